"""``payhooks expect`` and ``reconcile``: the ledger from the command line.

Each opens the file that ``--database``, the app (under ``flask payhooks``) or
``PAYHOOKS_DATABASE`` names, else ``./payhooks.db``. ``reconcile`` refuses a
file that does not exist rather than report on an empty ledger they just created.
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TextIO

import click

from payhooks.receiver.cli.common import (
    NegativeAmountsCommand,
    amount_callback,
    check_window,
    currency_callback,
    database_option,
    fail_on_storage_errors,
    ledger_for,
    moment_callback,
    resolve_database,
)
from payhooks.receiver.cli.expected_csv import (
    ExpectedPayment,
    ExpectedPaymentsError,
    check_expected_payments,
    iter_expected_payments,
)
from payhooks.receiver.cli.reports import ReportFormat, Totals, write_report, write_totals
from payhooks.storage import (
    MISMATCH_STATES,
    ConflictError,
    Ledger,
    PaymentKind,
    ReconciliationRow,
    ReconciliationState,
    from_minor_units,
)

__all__ = ["expect", "reconcile"]


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
    a second time (see :mod:`payhooks.receiver.cli.expected_csv`): memory stays bounded,
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
    callback=moment_callback,
    metavar="TIME",
    help="Only payments opened at or after this time.",
)
@click.option(
    "--until",
    callback=moment_callback,
    metavar="TIME",
    help="Only payments opened before this time.",
)
@click.option(
    "--paid-since",
    callback=moment_callback,
    metavar="TIME",
    help="Only payments with money that arrived (a succeeded outcome) at or after this time.",
)
@click.option(
    "--paid-until",
    callback=moment_callback,
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
    period's). A time without an offset is UTC. The table ends with counts and totals per
    currency and state.
    """
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
        click.echo(f"Wrote {totals.rows} row(s) to {output}.", err=True)
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
