"""Reading a file of expected payments for ``payhooks expect --csv``: all or nothing, in bounded
memory.

The file is read twice, and neither pass keeps its rows:

1. :func:`check_expected_payments` checks every row, reports every bad one with its line
   number (the first :data:`MAX_REPORTED`, and how many more), and registers nothing. The same
   identifier twice with different data is a bad row too; to see that without holding a
   million identifiers in memory, the identifiers seen so far go into a temporary SQLite
   database on disk, which SQLite pages through a small cache.
2. Only a file that is entirely good is read again by :func:`iter_expected_payments`, row by
   row, for the command to register in one ledger transaction. Each row is checked again (the
   file may have changed in between): any problem then raises, and the transaction rolls back.

Two passes rather than one transaction rolled back at the first bad line: the common mistake (a
typo on line 9,000) is found without taking the ledger's write lock, which the receiver needs
for every notification, and every bad row is still reported in one run.

Columns (a header row names them, in any order): ``external_identifier``, ``amount_minor``,
``currency``, and optionally ``kind`` (``transaction``, the default, or ``subscription``),
``plan_amount_minor`` (required for a subscription, refused for a transaction) and
``description``.
"""

from __future__ import annotations

import csv
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Final, TextIO

from payhooks.receiver.cli.common import AMOUNT_RULE
from payhooks.storage import MAX_AMOUNT_MINOR, PaymentKind, minor_unit_exponent

__all__ = [
    "COLUMNS",
    "MAX_REPORTED",
    "REQUIRED_COLUMNS",
    "CheckedFile",
    "ExpectedPayment",
    "ExpectedPaymentsError",
    "RowError",
    "check_expected_payments",
    "iter_expected_payments",
]

#: Columns that every file must have.
REQUIRED_COLUMNS: Final = ("external_identifier", "amount_minor", "currency")

#: Every column a file may have.
COLUMNS: Final = (*REQUIRED_COLUMNS, "kind", "plan_amount_minor", "description")

#: How many bad rows are listed before the report stops counting them one by one.
MAX_REPORTED: Final = 20


@dataclass(frozen=True, slots=True)
class ExpectedPayment:
    """One checked row, ready for :meth:`payhooks.storage.Ledger.expect_transaction` or
    :meth:`~payhooks.storage.Ledger.expect_subscription`."""

    line: int
    external_identifier: str
    kind: PaymentKind
    amount_minor: int
    currency: str
    plan_amount_minor: int | None
    description: str | None


@dataclass(frozen=True, slots=True)
class RowError:
    """What is wrong with one line of the file."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class ExpectedPaymentsError(ValueError):
    """The file cannot be registered; ``errors`` lists every bad line found.

    ``code`` is ``invalid_csv``; ``message`` is one sentence for a person.
    """

    code = "invalid_csv"

    def __init__(self, message: str, errors: Iterable[RowError] = ()) -> None:
        self.message = message
        self.errors = tuple(errors)
        super().__init__(message)


def _minor_units(text: str, column: str) -> int:
    if not text.isascii() or not text.isdigit() or not text.strip("0"):
        raise ValueError(f"{column} {text[:24]!r} is not an amount: {AMOUNT_RULE}")
    digits = text.lstrip("0")
    if len(digits) > len(str(MAX_AMOUNT_MINOR)) or int(digits or "0") > MAX_AMOUNT_MINOR:
        raise ValueError(
            f"{column} {text[:24]!r} is over the largest amount the ledger takes "
            f"({MAX_AMOUNT_MINOR} minor units)"
        )
    return int(digits or "0")


def _check_row(line: int, row: dict[str, str]) -> ExpectedPayment:
    """One row as an :class:`ExpectedPayment`; ``ValueError`` with the first problem."""
    identifier = row["external_identifier"]
    if not 1 <= len(identifier) <= 64:
        raise ValueError("external_identifier must be 1 to 64 characters")
    amount = _minor_units(row["amount_minor"].strip(), "amount_minor")
    currency = row["currency"].strip().upper()
    try:
        minor_unit_exponent(currency)
    except ValueError:
        raise ValueError(f"currency {row['currency']!r} is not an ISO 4217 code") from None
    kind_text = (row.get("kind") or "").strip().lower() or PaymentKind.TRANSACTION.value
    try:
        kind = PaymentKind(kind_text)
    except ValueError:
        raise ValueError(
            f"kind {row.get('kind')!r} is neither 'transaction' nor 'subscription'"
        ) from None
    plan_text = (row.get("plan_amount_minor") or "").strip()
    plan: int | None = None
    if kind is PaymentKind.SUBSCRIPTION:
        if not plan_text:
            raise ValueError("a subscription needs plan_amount_minor")
        plan = _minor_units(plan_text, "plan_amount_minor")
    elif plan_text:
        raise ValueError("plan_amount_minor is only for kind 'subscription'")
    description = row.get("description") or None
    return ExpectedPayment(line, identifier, kind, amount, currency, plan, description)


def _reader(handle: TextIO) -> csv.DictReader[str]:
    """A reader over ``handle`` whose header has been checked.

    :raises ExpectedPaymentsError: a missing or unknown column, or an empty file.
    """
    reader = csv.DictReader(handle, restkey="\0extra", strict=True)
    try:
        header = reader.fieldnames
    except csv.Error as err:
        raise ExpectedPaymentsError(f"line 1: the header cannot be read: {err}") from err
    if not header:
        raise ExpectedPaymentsError("The file is empty; it needs a header row.")
    names = [name.strip() for name in header]
    reader.fieldnames = names
    missing = [name for name in REQUIRED_COLUMNS if name not in names]
    unknown = [name for name in names if name not in COLUMNS]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing column(s) {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown column(s) {', '.join(repr(n) for n in unknown)}")
        raise ExpectedPaymentsError(f"line 1: {'; '.join(parts)} (columns: {', '.join(COLUMNS)}).")
    return reader


def _checked_rows(reader: csv.DictReader[str]) -> Iterator[ExpectedPayment | RowError]:
    """Each row, checked on its own: a payment or what is wrong with its line (the line where
    the row ends, as a text editor counts). A row the csv module cannot read ends the file."""
    width = len(reader.fieldnames or ())
    try:
        for row in reader:
            line = reader.line_num
            if "\0extra" in row or any(value is None for value in row.values()):
                yield RowError(line, f"expected {width} fields")
                continue
            try:
                yield _check_row(line, row)
            except ValueError as err:
                yield RowError(line, str(err))
    except csv.Error as err:
        yield RowError(reader.line_num, f"the row cannot be read: {err}")


@dataclass(frozen=True, slots=True)
class CheckedFile:
    """What :func:`check_expected_payments` found in a good file."""

    #: Every row, repeats included: how many payments the second pass yields.
    rows: int
    #: Rows that repeat an earlier row exactly (registering them again changes nothing).
    repeated: int


class _SeenIdentifiers:
    """The identifiers read so far, with their line and data, in a temporary SQLite database
    on disk: a million of them cost a few megabytes of cache rather than hundreds of
    megabytes of Python objects."""

    def __init__(self) -> None:
        # "": a private temporary database that SQLite keeps on disk and deletes on close.
        self._conn = sqlite3.connect("", isolation_level=None)
        self._conn.execute(
            "CREATE TABLE seen (identifier TEXT PRIMARY KEY, line INTEGER, kind TEXT, "
            "amount INTEGER, currency TEXT, plan INTEGER, description TEXT) WITHOUT ROWID"
        )
        self._conn.execute("BEGIN")

    def add(self, payment: ExpectedPayment) -> tuple[int, bool] | None:
        """None when the identifier is new; else the earlier line, and whether its data is
        the same."""
        data = (
            payment.kind.value,
            payment.amount_minor,
            payment.currency,
            payment.plan_amount_minor,
            payment.description,
        )
        inserted = self._conn.execute(
            "INSERT INTO seen VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (payment.external_identifier, payment.line, *data),
        ).rowcount
        if inserted:
            return None
        line, *earlier = self._conn.execute(
            "SELECT line, kind, amount, currency, plan, description FROM seen WHERE identifier = ?",
            (payment.external_identifier,),
        ).fetchone()
        return line, tuple(earlier) == data

    def close(self) -> None:
        self._conn.close()


def check_expected_payments(handle: TextIO) -> CheckedFile:
    """Check the whole file, keeping none of its rows.

    :raises ExpectedPaymentsError: a missing or unknown column, an empty file, or any bad row
        (the first :data:`MAX_REPORTED` listed, each with its line number, and a count of all;
        the same identifier twice with different data is a bad row too).
    """
    reader = _reader(handle)
    shown: list[RowError] = []
    bad = rows = repeated = 0
    with closing(_SeenIdentifiers()) as seen:
        for checked in _checked_rows(reader):
            if isinstance(checked, ExpectedPayment):
                earlier = seen.add(checked)
                if earlier is None:
                    rows += 1
                    continue
                line, same = earlier
                if same:
                    rows += 1
                    repeated += 1  # the same payment twice: registering it again is a no-op
                    continue
                checked = RowError(
                    checked.line,
                    f"{checked.external_identifier!r} is already on line {line} "
                    "with different data",
                )
            bad += 1
            if len(shown) < MAX_REPORTED:
                shown.append(checked)
    if bad:
        more = bad - len(shown)
        summary = f"{bad} bad row(s)" + (f" ({more} not listed)" if more else "")
        raise ExpectedPaymentsError(f"{summary}; nothing was registered.", shown)
    return CheckedFile(rows, repeated)


def iter_expected_payments(handle: TextIO) -> Iterator[ExpectedPayment]:
    """Every payment of a file :func:`check_expected_payments` passed, one at a time, repeats
    included.

    :raises ExpectedPaymentsError: at the first bad row, should the file have changed since
        it was checked (the caller's transaction must then roll back).
    """
    for checked in _checked_rows(_reader(handle)):
        if isinstance(checked, RowError):
            raise ExpectedPaymentsError(
                "the file changed while it was being registered; nothing was registered.",
                [checked],
            )
        yield checked
