"""``payhooks reconcile``: every payment, expected or not, against what arrived, as a table
for people, CSV for spreadsheets, JSON Lines for tools.

Every format carries the same fields (:data:`REPORT_FIELDS`), amounts as exact decimal strings
(``"25.00"``), never floats, every text from outside written its own safe way
(:mod:`payhooks.receiver.cli.common`). Rows are written as the ledger streams them, so a
report over a million payments holds one row (the table keeps a few to size its columns).
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Final, Literal, TextIO

import click

from payhooks.receiver.cli.common import (
    check_window,
    database_option,
    fail_on_storage_errors,
    ledger_for,
    local_moment_callback,
    settings,
    terminal_json,
    terminal_text,
)
from payhooks.receiver.report_csv import (
    NUMERIC_FIELDS,
    REPORT_FIELDS,
    cell_text,
    csv_header,
    record_line,
    report_record,
)
from payhooks.storage import (
    MISMATCH_STATES,
    ReconciliationRow,
    ReconciliationState,
    from_minor_units,
)

__all__ = [
    "NUMERIC_FIELDS",
    "REPORT_FIELDS",
    "ReportFormat",
    "Totals",
    "reconcile",
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


# -- reconcile ---------------------------------------------------------------------------------


@click.command()
@click.option(
    "--format",
    "report_format",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="json is JSON Lines: one object per row.",
)
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([state.value for state in ReconciliationState]),
    help="Only rows in this state; repeat it for several.",
)
@click.option(
    "--since",
    callback=local_moment_callback,
    metavar="TIME",
    help="Only payments opened at or after this time.",
)
@click.option(
    "--until",
    callback=local_moment_callback,
    metavar="TIME",
    help="Only payments opened before this time.",
)
@click.option(
    "--paid-since",
    callback=local_moment_callback,
    metavar="TIME",
    help="Only payments with money that arrived (a succeeded outcome) at or after this time.",
)
@click.option(
    "--paid-until",
    callback=local_moment_callback,
    metavar="TIME",
    help="Only payments with money that arrived (a succeeded outcome) before this time.",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the report to this file (with a progress bar) instead of standard output.",
)
@click.option(
    "--fail-on-mismatch",
    is_flag=True,
    help=(
        "Exit 1 when any row is amount_mismatch, currency_mismatch, duplicate_payment, "
        "unexpected or unknown_status, or has drift payhooks sync found (missed_notification, "
        "status_differs, unknown_status, unexpected, missing_at_service)."
    ),
)
@database_option
@fail_on_storage_errors
def reconcile(
    report_format: ReportFormat,
    states: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    paid_since: datetime | None,
    paid_until: datetime | None,
    output: Path | None,
    fail_on_mismatch: bool,
    database: Path | None,
) -> None:
    """Report every expected payment (and every unexpected one) against what arrived.

    A payment is opened when it was registered (an unexpected one: its first payment time);
    --since and --until filter on that. --paid-since and --paid-until keep the payments whose
    money arrived in that window (a succeeded outcome's payment time; a subscription: any
    period's). A time without an offset is the merchant's (PAYHOOKS_TIMEZONE, UTC by default).
    The table ends with counts and totals per currency and state, and names the zone.
    """
    zone = f"{settings().timezone.key} (PAYHOOKS_TIMEZONE)"
    check_window(since, until, "the report takes payments opened")
    check_window(
        paid_since, paid_until, "the report takes payments paid", "--paid-since", "--paid-until"
    )
    totals = Totals()
    with ledger_for(database, read_only=True) as ledger:
        rows = ledger.reconcile(
            state=states or None,
            since=since,
            until=until,
            paid_since=paid_since,
            paid_until=paid_until,
        )
        if output is None:
            with _writing_to_stdout() as out:
                write_report(rows, out, report_format, totals=totals)
                if report_format == "table":
                    if totals.rows:
                        out.write("\n")
                        write_totals(totals, out)
                    else:
                        out.write("(no rows)\n")
                    out.write(f"Times without an offset are read in {zone}.\n")
        else:
            try:
                with (
                    _written_whole(output) as handle,
                    click.progressbar(
                        _unsized(rows), label=f"Writing {output}", file=sys.stderr, show_pos=True
                    ) as bar,
                ):
                    write_report(bar, handle, report_format, totals=totals)
            except OSError as err:
                raise click.ClickException(f"{output} cannot be written: {err.strerror}.") from err
    if output is not None:
        note = f"times without an offset are read in {zone}"
        click.echo(f"Wrote {totals.rows} row(s) to {output}; {note}.", err=True)
    if fail_on_mismatch:
        _fail_on_mismatch(totals)


@contextmanager
def _writing_to_stdout() -> Iterator[TextIO]:
    """Standard output for a report, flushed before the block ends, so a full disk or a closed
    file is an exit 1 with one sentence rather than a traceback (or Python's complaint at exit).

    A closed pipe (``payhooks reconcile | head``) means the reader has what it wanted: the
    command ends quietly with exit 0, as ``cat`` and ``grep`` do (``--fail-on-mismatch`` is not
    judged on a report nobody read whole). After that or any other failure, what is still
    buffered goes to the null device: it cannot be written anyway, and the interpreter would
    try again on its way out.
    """
    out = sys.stdout
    try:
        yield out
        out.flush()
    except BrokenPipeError:
        _discard_stdout()
        raise click.exceptions.Exit(0) from None
    except OSError as err:
        _discard_stdout()
        raise click.ClickException(
            f"The report cannot be written to standard output: {err.strerror or err}."
        ) from err


def _discard_stdout() -> None:
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file (a test runner's buffer): nothing is flushed at exit
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, descriptor)
    finally:
        os.close(null)


@contextmanager
def _written_whole(path: Path) -> Iterator[TextIO]:
    """A file written whole or not at all: a temporary file beside ``path``, moved over it once
    complete, so Ctrl-C or a full disk never leaves a truncated report that looks whole.

    Only a regular file (or a new one) is replaced: a device, a pipe or a terminal
    (``/dev/stdout``, ``/dev/full``, a FIFO) is written in place, as replacing it would put a
    plain file where the device was. A symbolic link keeps pointing where it did: its target is
    what gets replaced."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        regular = True
    if not regular:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            yield handle
        return
    path = path.resolve()
    # The name is chosen before the file exists and the file is made inside the ``try``: a
    # Ctrl-C that lands just after the file was created (inside ``mkstemp``, or before a
    # ``try`` around its result) would otherwise leave the temporary file behind.
    temporary = path.parent / f".{path.name}.{secrets.token_hex(8)}"
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(descriptor, "w", encoding="utf-8", newline="") as handle:
            yield handle
        os.replace(temporary, path)
    except BaseException as err:
        if not (isinstance(err, FileExistsError) and err.filename == str(temporary)):
            temporary.unlink(missing_ok=True)  # never another's file of the same name
        raise


def _unsized(rows: Iterator[ReconciliationRow]) -> Iterator[ReconciliationRow]:
    """The rows with no length hint: the bar counts them rather than guess a total (counting
    first would compute the whole reconciliation twice)."""
    yield from rows


def _fail_on_mismatch(totals: Totals) -> None:
    by_state: Counter[str] = Counter()
    for (_, state), (count, _, _) in totals.groups.items():
        if ReconciliationState(state) in MISMATCH_STATES:
            by_state[state] += count
    for kind, count in totals.drift.items():
        by_state[f"drift {kind}"] += count
    if by_state:
        listed = ", ".join(f"{state} {count}" for state, count in sorted(by_state.items()))
        count = totals.attention  # a row with a mismatch and drift is one payment
        raise click.ClickException(f"{count} payment(s) need attention ({listed}).")
