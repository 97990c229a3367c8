"""A reconciliation row as a report record, and as one formula-safe CSV line.

``payhooks reconcile --format csv`` and the console's CSV export write the same bytes for the
same rows, so the record, the fields and the escaping live here, below both the command line
and the web pages. An ``unexpected`` row's identifier and every transaction id come from
notification bodies: the signature says the service sent them, not that they are harmless.

Two rules for text cells, in :func:`csv_field`. A cell is made honest to read first, as the
table and the console's pages make it (:func:`payhooks.receiver.visible_text.visible`): a
control character (an ESC sequence that drives the terminal a CSV is ``cat`` to), a line
separator or a bidirectional control (U+202E, which shows one payment as another in a
spreadsheet or an editor) is written as an escape (``\\x1b``, ``\\u202e``) and a backslash as
``\\\\``. Then a spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and,
in some, a tab or a carriage return) as a formula: the OWASP rule prefixes a single quote and
quotes the cell. Numbers the report computed (amounts, counts) are written as they are:
``-5.00`` is a number a spreadsheet should add up, not a formula.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from payhooks.receiver.visible_text import visible
from payhooks.storage import ReconciliationRow, from_minor_units

__all__ = [
    "FORMULA_TRIGGERS",
    "NUMERIC_FIELDS",
    "REPORT_FIELDS",
    "cell_text",
    "csv_field",
    "csv_header",
    "csv_line",
    "record_line",
    "report_record",
]

#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP, "CSV
#: Injection").
FORMULA_TRIGGERS: Final = frozenset("=+-@\t\r")

# A CSV cell is quoted when it holds the delimiter, the quote or a line break.
_NEEDS_QUOTES: Final = re.compile('[,"\r\n]')

#: The fields of every report row, in column order.
REPORT_FIELDS: Final = (
    "external_identifier",
    "kind",
    "state",
    "currency",
    "expected_amount",
    "received_currency",
    "received_amount",
    "periods_paid",
    "transaction_ids",
    "lifecycle_state",
    "unknown_outcomes",
    "last_outcome_at",
    "opened_at",
    "drift",
    "refunded_amount",
    "charged_back_amount",
    "net_amount",
    "refused_deliveries",
    "conflicting_deliveries",
    "latest_problem",
    "home_received_amount",
)

#: The fields that hold numbers the report computed: never neutralised in CSV, for a negative
#: amount (``-5.00``) is a number a spreadsheet should add up, not a formula.
NUMERIC_FIELDS: Final = frozenset(
    {
        "expected_amount",
        "received_amount",
        "periods_paid",
        "unknown_outcomes",
        "refunded_amount",
        "charged_back_amount",
        "net_amount",
        "refused_deliveries",
        "conflicting_deliveries",
        "home_received_amount",
    }
)


def csv_field(value: Any, *, text: bool) -> str:
    """One CSV field, quoted only where CSV needs it, as Python's ``csv`` module would write it.

    :param text: whether ``value`` is text that may come from outside. Such a field has every
        character :func:`~payhooks.receiver.visible_text.visible` escapes escaped (so it holds
        no line break either), and when it then starts with one of :data:`FORMULA_TRIGGERS`
        gets a leading ``'`` and is always quoted, so a spreadsheet shows it as text. Numbers
        the report computed pass ``text=False``.
    """
    cell = "" if value is None else str(value)
    if text:
        cell = visible(cell)
    if text and cell[:1] in FORMULA_TRIGGERS:
        return '"' + ("'" + cell).replace('"', '""') + '"'
    if _NEEDS_QUOTES.search(cell):
        return '"' + cell.replace('"', '""') + '"'
    return cell


def _minor(amount: int | None, currency: str | None) -> str | None:
    if amount is None or currency is None:
        return None
    return str(from_minor_units(amount, currency))


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def report_record(row: ReconciliationRow) -> dict[str, Any]:
    """``row`` as the JSON-ready mapping every format is written from.

    ``received_amount`` is in ``received_currency``, which differs from ``currency`` only for
    a ``currency_mismatch``. Missing values are None (empty in CSV and the table).
    """
    return {
        "external_identifier": row.external_identifier,
        "kind": None if row.kind is None else str(row.kind),
        "state": str(row.state),
        "currency": row.currency,
        "expected_amount": _text(row.expected_amount),
        "received_currency": row.received_currency,
        "received_amount": _text(row.received_amount),
        "periods_paid": row.periods_paid,
        "transaction_ids": list(row.transaction_ids),
        "lifecycle_state": None if row.lifecycle_state is None else str(row.lifecycle_state),
        "unknown_outcomes": row.unknown_outcomes,
        "last_outcome_at": None if row.last_outcome_at is None else row.last_outcome_at.isoformat(),
        "opened_at": row.opened_at.isoformat(),
        "drift": None if row.drift is None else str(row.drift),
        "refunded_amount": _minor(row.refunded_amount_minor, row.received_currency),
        "charged_back_amount": _minor(row.charged_back_amount_minor, row.received_currency),
        "net_amount": _minor(row.net_amount_minor, row.received_currency),
        "refused_deliveries": row.refused_deliveries,
        "conflicting_deliveries": row.conflicting_deliveries,
        "latest_problem": row.latest_problem,
        "home_received_amount": _minor(row.home_received_amount_minor, row.currency),
    }


def cell_text(value: Any) -> str:
    """A report record's value as one cell's text, for the CSV and the terminal's table alike:
    None is empty, a list (transaction ids) is space-separated."""
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(value)
    return str(value)


def csv_header() -> str:
    """The CSV's first line, its field names, ending in a newline."""
    return ",".join(csv_field(name, text=True) for name in REPORT_FIELDS) + "\n"


def record_line(record: Mapping[str, Any]) -> str:
    """One :func:`report_record` as a CSV line, ending in a newline."""
    fields = (
        csv_field(cell_text(record[name]), text=name not in NUMERIC_FIELDS)
        for name in REPORT_FIELDS
    )
    return ",".join(fields) + "\n"


def csv_line(row: ReconciliationRow) -> str:
    """``row`` as a CSV line, ending in a newline."""
    return record_line(report_record(row))
