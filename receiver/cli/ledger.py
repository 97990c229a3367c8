"""``payhooks expect``: registering the payments the merchant expects, one or a CSV file's.

It opens the file that ``--database``, the app (under ``flask payhooks``) or
``PAYHOOKS_DATABASE`` names, else ``./payhooks.db``, and creates it when it is missing.

``expect --csv`` reads its file twice, all or nothing, in bounded memory, and neither pass
keeps its rows:

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
"""

from __future__ import annotations

import csv
import sqlite3
import sys
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

import click

from payhooks.receiver.cli.common import (
    AMOUNT_RULE,
    NegativeAmountsCommand,
    amount_callback,
    currency_callback,
    database_option,
    fail_on_storage_errors,
    ledger_for,
    resolve_database,
)
from payhooks.storage import (
    MAX_AMOUNT_MINOR,
    ConflictError,
    Ledger,
    PaymentKind,
    from_minor_units,
    minor_unit_exponent,
)

__all__ = ["expect"]


# -- expect ------------------------------------------------------------------------------------


@click.command(cls=NegativeAmountsCommand)
@click.argument("external_id", required=False)
@click.argument("amount_minor", required=False, type=int, callback=amount_callback)
@click.argument("currency", required=False, callback=currency_callback)
@click.option("--subscription", is_flag=True, help="A subscription rather than one payment.")
@click.option(
    "--plan-amount",
    type=int,
    callback=amount_callback,
    metavar="N",
    help="A subscription's later periods, in minor units (the first is AMOUNT_MINOR).",
)
@click.option("--description", help="A note kept with the payment.")
@click.option(
    "--csv",
    "csv_file",
    type=click.Path(exists=True, dir_okay=False, readable=True, path_type=Path),
    help="Register every row of a CSV file instead (all or nothing).",
)
@database_option
@fail_on_storage_errors
def expect(
    external_id: str | None,
    amount_minor: int | None,
    currency: str | None,
    subscription: bool,
    plan_amount: int | None,
    description: str | None,
    csv_file: Path | None,
    database: Path | None,
) -> None:
    """Register a payment you expect: EXTERNAL_ID AMOUNT_MINOR CURRENCY, or --csv FILE.

    AMOUNT_MINOR is in the currency's minor units (2500 CNY is 25.00), 1 to 10^15.
    Registering the same
    payment again is a no-op; with different data it fails (exit 1).

    The CSV file has a header row with the columns external_identifier, amount_minor,
    currency, and optionally kind (transaction or subscription), plan_amount_minor and
    description. Every row is checked first: a bad row is reported with its line number and
    nothing of the file is registered.
    """
    if csv_file is not None:
        given = (external_id, amount_minor, currency, plan_amount, description)
        if subscription or any(value is not None for value in given):
            raise click.UsageError("--csv takes no payment arguments or options beside it.")
        _expect_csv(csv_file, database)
        return
    if external_id is None or amount_minor is None or currency is None:
        raise click.UsageError("Give EXTERNAL_ID AMOUNT_MINOR CURRENCY, or --csv FILE.")
    if not 1 <= len(external_id) <= 64:
        raise click.BadParameter("must be 1 to 64 characters.", param_hint="'EXTERNAL_ID'")
    if subscription and plan_amount is None:
        raise click.UsageError("--subscription needs --plan-amount (later periods' amount).")
    if plan_amount is not None and not subscription:
        raise click.UsageError("--plan-amount is only for --subscription.")
    payment = ExpectedPayment(
        line=0,
        external_identifier=external_id,
        kind=PaymentKind.SUBSCRIPTION if subscription else PaymentKind.TRANSACTION,
        amount_minor=amount_minor,
        currency=currency,
        plan_amount_minor=plan_amount,
        description=description,
    )
    with ledger_for(database, must_exist=False) as ledger:
        try:
            new = _register(ledger, payment)
        except ConflictError as err:
            raise click.ClickException(err.message) from err
        except ValueError as err:
            # What the arguments' types let through and the ledger still refuses (text that
            # cannot be stored, such as undecodable bytes from the command line).
            raise click.ClickException(f"The payment cannot be registered: {err}.") from err
    amount = from_minor_units(amount_minor, currency)
    if new:
        click.echo(f"Registered {external_id}: {amount} {currency} ({payment.kind}).")
    else:
        click.echo(f"{external_id} was already registered with the same data; nothing changed.")


def _register(ledger: Ledger, payment: ExpectedPayment) -> bool:
    """Register one checked payment; True when it is new."""
    if payment.plan_amount_minor is not None:
        return ledger.expect_subscription(
            payment.external_identifier,
            payment.amount_minor,
            payment.currency,
            payment.plan_amount_minor,
            description=payment.description,
        )
    return ledger.expect_transaction(
        payment.external_identifier,
        payment.amount_minor,
        payment.currency,
        description=payment.description,
    )


def _remove_ledger_files(database: Path | str) -> None:
    """Remove a SQLite ledger and its companions (log, shared memory, write lock)."""
    for suffix in ("", "-wal", "-shm", "-journal", ".lock"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)


def _open_csv(path: Path) -> TextIO:
    # utf-8-sig: spreadsheets often start the file with a byte-order mark.
    return path.open(encoding="utf-8-sig", newline="")


def _expect_csv(path: Path, database: Path | None) -> None:
    """Check the whole file, then register it in one of the ledger's transactions, reading it
    a second time (see this module's docstring): memory stays bounded,
    whatever the size. All or nothing: a failure, Ctrl-C included, rolls every row back, and
    a SQLite file this command created is removed again, so nothing is left that looks like a
    ledger."""
    target = resolve_database(database)
    created = isinstance(target, Path) and not target.exists()
    new = 0
    try:
        with _open_csv(path) as handle:
            checked = check_expected_payments(handle)
        with (
            ledger_for(target, must_exist=False) as ledger,
            ledger.transaction(),
            _open_csv(path) as handle,
            click.progressbar(length=checked.rows, label="Registering", file=sys.stderr) as bar,
        ):
            for payment in iter_expected_payments(handle):
                try:
                    new += _register(ledger, payment)
                except ConflictError as err:
                    raise click.ClickException(
                        f"{path}: line {payment.line}: {err.message} Nothing was registered."
                    ) from err
                bar.update(1)
    except BaseException as err:
        if created:
            _remove_ledger_files(target)
        if isinstance(err, ExpectedPaymentsError):
            for error in err.errors:
                click.echo(f"{path}: {error}", err=True)
            raise click.ClickException(f"{path}: {err.message}") from err
        if isinstance(err, (OSError, UnicodeDecodeError)):
            raise click.ClickException(f"{path} cannot be read: {err}.") from err
        raise
    unchanged = checked.rows - checked.repeated - new
    click.echo(
        f"Registered {new} payment(s) from {path}"
        + (f"; {unchanged} already registered with the same data." if unchanged else ".")
    )


# -- the expected payments' CSV file -----------------------------------------------------------


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
    """The file cannot be registered: ``message`` says so in one sentence, ``errors`` lists
    every bad line found."""

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
    """A reader over ``handle`` whose header has been checked (:class:`ExpectedPaymentsError`
    for a missing or unknown column, or an empty file)."""
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
    """Check the whole file, keeping none of its rows (the first pass).

    :raises ExpectedPaymentsError: a bad header, an empty file, or any bad row.
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
