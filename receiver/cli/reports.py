"""The reconciliation as text: a table for people, CSV for spreadsheets, JSON Lines for tools.

Every format carries the same fields (:data:`REPORT_FIELDS`), amounts as exact decimal strings
in major units (``"25.00"``), never floats. Identifiers come from webhook bodies, so each format
writes text its own safe way: CSV cells a spreadsheet would run as formulas are neutralised
(:mod:`payhooks.receiver.report_csv`, which the console's CSV export shares), control
characters in the table are shown as escapes (:mod:`payhooks.receiver.cli.escaping`), JSON
Lines stays exact. Rows are written one at a time as the ledger streams them, so a report over
a million payments never holds more than one row (the table keeps its first few rows to size
its columns).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final, Literal, TextIO

from payhooks.receiver.cli.escaping import terminal_json, terminal_text
from payhooks.receiver.report_csv import (
    NUMERIC_FIELDS,
    REPORT_FIELDS,
    cell_text,
    csv_header,
    record_line,
    report_record,
)
from payhooks.storage import MISMATCH_STATES, ReconciliationRow, from_minor_units

__all__ = [
    "NUMERIC_FIELDS",
    "REPORT_FIELDS",
    "ReportFormat",
    "Totals",
    "needs_attention",
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
