"""The ledger as text: the reconciliation as a table for people, CSV for spreadsheets, JSON
Lines for tools; and the deliveries as rows, records and bodies.

Every format carries the same fields (:data:`REPORT_FIELDS`), amounts as exact decimal strings
in major units (``"25.00"``), never floats, and every text from outside (identifiers, errors,
headers, bodies) written its own safe way (:mod:`payhooks.receiver.cli.common`). Rows are
written one at a time as the ledger streams them, so a report over a million payments never
holds more than one row (the table keeps its first few rows to size its columns).
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final, Literal, TextIO

from payhooks.receiver.cli.common import terminal_json, terminal_text
from payhooks.receiver.report_csv import (
    NUMERIC_FIELDS,
    REPORT_FIELDS,
    cell_text,
    csv_header,
    record_line,
    report_record,
)
from payhooks.receiver.visible_text import body_as_text, json_lines_of
from payhooks.storage import MISMATCH_STATES, ReconciliationRow, from_minor_units
from payhooks.storage.reads import DeliveryDetails, LoggedDelivery, RejectedDelivery

__all__ = [
    "DELIVERY_HEADER",
    "NUMERIC_FIELDS",
    "REJECTED_HEADER",
    "REPORT_FIELDS",
    "ReportFormat",
    "Totals",
    "body_lines",
    "delivery_record",
    "delivery_row",
    "details_lines",
    "details_record",
    "needs_attention",
    "rejected_record",
    "rejected_row",
    "report_record",
    "write_report",
    "write_totals",
]

ReportFormat = Literal["table", "csv", "json"]

# The table's columns: a header, the report field, and whether numbers align right.
_TABLE_COLUMNS: Final = (
    ("EXTERNAL ID", "external_identifier", False),
    ("KIND", "kind", False),
    ("STATE", "state", False),
    ("CUR", "currency", False),
    ("EXPECTED", "expected_amount", True),
    ("RECEIVED", "received_amount", True),
    ("PERIODS", "periods_paid", True),
    ("TRANSACTIONS", "transaction_ids", False),
    ("DRIFT", "drift", False),
    ("REFUSED", "refused_deliveries", True),
)

#: How many rows the table reads ahead to size its columns.
_TABLE_SAMPLE: Final = 200


def needs_attention(row: ReconciliationRow) -> bool:
    """Whether ``row`` is in one of :data:`payhooks.storage.MISMATCH_STATES`, or the service's
    list disagrees with it (``drift``): what ``reconcile --fail-on-mismatch`` fails on."""
    return row.state in MISMATCH_STATES or row.drift is not None


@dataclass
class Totals:
    """Counts and totals per currency and state, gathered while a report streams.

    It follows the report's filters (``--state``, ``--since``), which the ledger's whole-file
    :meth:`payhooks.storage.Ledger.summary` cannot. Like it, money received in another currency
    (``currency_mismatch``) is never added to a total of a different currency.
    """

    #: (currency, state) -> [count, expected minor units, received minor units]
    groups: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    #: drift kind -> rows flagged with it
    drift: Counter[str] = field(default_factory=Counter)
    #: rows that need a person (:func:`needs_attention`), each counted once
    attention: int = 0

    def add(self, row: ReconciliationRow) -> None:
        group = self.groups.setdefault((row.currency, str(row.state)), [0, 0, 0])
        group[0] += 1
        group[1] += row.expected_amount_minor or 0
        received = row.received_amount_minor or 0
        if row.received_currency == row.currency:
            group[2] += received
        elif row.received_currency is not None:  # counted in the currency it arrived in
            other = self.groups.setdefault((row.received_currency, str(row.state)), [0, 0, 0])
            other[2] += received
            group[2] += row.home_received_amount_minor
        if row.drift is not None:
            self.drift[str(row.drift)] += 1
        self.attention += needs_attention(row)

    @property
    def rows(self) -> int:
        return sum(group[0] for group in self.groups.values())

    def lines(self) -> Iterator[tuple[str, str, int, Decimal, Decimal]]:
        """(currency, state, count, expected total, received total), sorted."""
        for (currency, state), (count, expected, received) in sorted(self.groups.items()):
            yield (
                currency,
                state,
                count,
                from_minor_units(expected, currency),
                from_minor_units(received, currency),
            )


def write_report(
    rows: Iterable[ReconciliationRow],
    out: TextIO,
    report_format: ReportFormat,
    *,
    totals: Totals | None = None,
) -> int:
    """Write ``rows`` to ``out`` in ``report_format``; return how many were written.

    :param totals: gathers the rows' counts and totals as they pass, when given.
    """
    counted = _counting(rows, totals)
    if report_format == "json":
        return _write_json_lines(counted, out)
    if report_format == "csv":
        return _write_csv(counted, out)
    return _write_table(counted, out)


def _counting(rows: Iterable[ReconciliationRow], totals: Totals | None) -> Iterator[dict[str, Any]]:
    for row in rows:
        if totals is not None:
            totals.add(row)
        yield report_record(row)


def _write_json_lines(records: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    written = 0
    for record in records:
        out.write(terminal_json(record))
        out.write("\n")
        written += 1
    return written


def _write_csv(records: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    out.write(csv_header())
    written = 0
    for record in records:
        out.write(record_line(record))
        written += 1
    return written


def _write_table(records: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    iterator = iter(records)
    sample: list[list[str]] = []
    for record in iterator:
        sample.append(_table_cells(record))
        if len(sample) >= _TABLE_SAMPLE:
            break
    headers = [header for header, _, _ in _TABLE_COLUMNS]
    widths = [
        max([len(header), *(len(cells[index]) for cells in sample)])
        for index, header in enumerate(headers)
    ]
    out.write(_table_line(headers, widths, header=True))
    written = 0
    for cells in sample:
        out.write(_table_line(cells, widths))
        written += 1
    for record in iterator:
        out.write(_table_line(_table_cells(record), widths))
        written += 1
    return written


def _table_cells(record: Mapping[str, Any]) -> list[str]:
    cells = []
    for _, name, _ in _TABLE_COLUMNS:
        value = record[name]
        if (
            name == "received_amount"
            and value is not None
            and (record["received_currency"] not in (None, record["currency"]))
        ):
            value = f"{value} {record['received_currency']}"
        cells.append(terminal_text(cell_text(value)))
    return cells


def _table_line(cells: list[str], widths: list[int], *, header: bool = False) -> str:
    parts = []
    for (_, _, right), cell, width in zip(_TABLE_COLUMNS, cells, widths, strict=True):
        parts.append(cell.rjust(width) if right and not header else cell.ljust(width))
    return "  ".join(parts).rstrip() + "\n"


def write_totals(totals: Totals, out: TextIO) -> None:
    """The totals as a small table: one line per currency and state."""
    lines = list(totals.lines())
    headers = ("CUR", "STATE", "COUNT", "EXPECTED", "RECEIVED")
    cells = [
        (terminal_text(currency), state, str(count), str(expected), str(received))
        for currency, state, count, expected, received in lines
    ]
    widths = [
        max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)
    ]
    out.write("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip() + "\n")
    for row in cells:
        parts = [
            value.rjust(width) if index >= 2 else value.ljust(width)
            for index, (value, width) in enumerate(zip(row, widths, strict=True))
        ]
        out.write("  ".join(parts).rstrip() + "\n")


#: How much of an error a table row shows; ``deliveries show`` shows all of it.
_ERROR_SHOWN: Final = 60

DELIVERY_HEADER: Final = (
    f"{'ID':>8}  {'RECEIVED':<25}  {'STATUS':<19}  {'TRIES':>5}  {'IDENTIFIER':<20}  "
    f"{'OUTCOME':<24}  {'BYTES':>7}  ERROR"
)
REJECTED_HEADER: Final = f"{'ID':>8}  {'RECEIVED':<25}  {'REMOTE ADDR':<39}  {'BYTES':>7}  REASON"


def _amount(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _outcome(row: LoggedDelivery) -> str:
    if row.outcome_id is None:
        return "-"
    amount = f" {row.amount} {terminal_text(row.currency or '')}" if row.amount is not None else ""
    return f"{row.outcome_id} {terminal_text(row.payment_status or '')}{amount}"


def _shortened(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def delivery_row(row: LoggedDelivery) -> str:
    """One table line: every text from outside escaped, the error shortened."""
    problem = row.error or (f"signal: {row.signal_error}" if row.signal_error else "")
    return (
        f"{row.id:>8}  {row.received_at.isoformat(timespec='seconds'):<25}  "
        f"{row.status.value:<19}  {row.attempts:>5}  "
        f"{terminal_text(row.external_identifier or '-'):<20}  {_outcome(row):<24}  "
        f"{row.body_size:>7}  {_shortened(terminal_text(problem), _ERROR_SHOWN)}"
    ).rstrip()


def rejected_row(row: RejectedDelivery) -> str:
    return (
        f"{row.id:>8}  {row.received_at.isoformat(timespec='seconds'):<25}  "
        f"{terminal_text(row.remote_addr or '-'):<39}  {row.body_size:>7}  "
        f"{terminal_text(row.reason)}"
    )


def delivery_record(row: LoggedDelivery) -> dict[str, Any]:
    """One delivery's log entry as a JSON object: the stored values, the amount a string."""
    return {
        "id": row.id,
        "received_at": row.received_at.isoformat(),
        "status": row.status.value,
        "attempts": row.attempts,
        "error": row.error,
        "signal_error": row.signal_error,
        "external_identifier": row.external_identifier,
        "outcome_id": row.outcome_id,
        "payment_status": row.payment_status,
        "amount": _amount(row.amount),
        "currency": row.currency,
        "body_size": row.body_size,
        "dedupe_key": row.dedupe_key,
    }


def rejected_record(row: RejectedDelivery) -> dict[str, Any]:
    return {
        "id": row.id,
        "received_at": row.received_at.isoformat(),
        "remote_addr": row.remote_addr,
        "reason": row.reason,
        "body_size": row.body_size,
    }


def details_record(details: DeliveryDetails) -> dict[str, Any]:
    """One delivery whole as a JSON object: ``body`` is its text when it is UTF-8 (else null),
    ``body_base64`` its exact bytes."""
    try:
        text: str | None = details.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return delivery_record(details) | {
        "headers": dict(details.headers),
        "body": text,
        "body_base64": base64.b64encode(details.body).decode("ascii"),
        "pruned_at": None if details.pruned_at is None else details.pruned_at.isoformat(),
        "pruned_into": details.pruned_into,
    }


def details_lines(details: DeliveryDetails) -> Iterator[str]:
    """``deliveries show``'s text: the entry, the headers, then the body."""
    fields = {
        "received at": details.received_at.isoformat(),
        "status": details.status.value,
        "attempts": str(details.attempts),
        "dedupe key": details.dedupe_key,
        "identifier": details.external_identifier or "-",
        "outcome": _outcome(details),
        "error": details.error or "-",
        "signal error": details.signal_error or "-",
        "body size": f"{details.body_size} bytes",
    }
    yield f"Delivery {details.id}"
    for name, value in fields.items():
        # The outcome is escaped already; escaping twice would double its backslashes.
        shown = value if name == "outcome" else terminal_text(value)
        yield f"  {name + ':':<14}{shown}"
    yield ""
    yield "Headers:"
    if not details.headers:
        yield "  (none stored)"
    for name, value in sorted(details.headers.items()):
        yield f"  {terminal_text(name)}: {terminal_text(value)}"
    yield ""
    yield "Body:"
    if details.pruned_at is not None:
        yield (
            f"  (pruned {details.pruned_at.isoformat()} into "
            f"{terminal_text(details.pruned_into or '?')}; payhooks prune's archive holds it)"
        )
        return
    yield from body_lines(details.body)


# -- the body ------------------------------------------------------------------------------


def body_lines(body: bytes) -> list[str]:
    """The body for the terminal, indented by two spaces: laid out when it is JSON (members
    in the order sent, repeated names kept, numbers as written), else on one line, escaped."""
    if not body:
        return ["  (empty)"]
    lines = json_lines_of(body)
    if lines is None:
        return ["  (not JSON; shown escaped)", f"  {body_as_text(body)}"]
    return [f"  {line}" for line in lines]
