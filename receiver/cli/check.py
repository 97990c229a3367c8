"""``payhooks check`` and ``signals``: the ledger's health for cron and monitoring
(docs/operations.md), and the signals it owes.

Reads the vital figures once (``Ledger.vitals``), decides each check
(:func:`payhooks.receiver.checks.evaluate`) and prints one line per check, or JSON. Exit 0
when every check passes, 1 when one fails, 2 for bad usage. Under ``flask payhooks check``
it also sends ``check_failed`` in the merchant's app for each failing check.

``payhooks signals`` lists the signals still owed to the merchant's code (the backlog ``check``
watches); ``flask payhooks signals --send`` runs, in the app, exactly the receivers still owed,
each signal claimed with the lease so that none runs twice at once.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from payhooks.receiver.checks import CHECK_NAMES, CheckLimits, CheckReport, evaluate, send_failed
from payhooks.receiver.cli.common import (
    DURATION,
    PERCENT,
    app_or_none,
    database_option,
    fail_on_storage_errors,
    ledger_for,
    settings,
    terminal_text,
)
from payhooks.receiver.pipeline import send_owed

if TYPE_CHECKING:
    from payhooks.storage.rows import OwedSignal

__all__ = [
    "check",
    "signals",
]

_DEFAULTS = CheckLimits()


@click.command()
@click.option(
    "--max-silence",
    type=DURATION,
    default="24h",
    show_default=True,
    help="Fail when no delivery was accepted for this long.",
)
@click.option(
    "--max-failure-rate",
    type=PERCENT,
    default=_DEFAULTS.max_failure_percent,
    show_default=True,
    help="Fail when more of the last hour's deliveries failed.",
)
@click.option(
    "--min-deliveries",
    type=click.IntRange(min=1),
    default=_DEFAULTS.min_deliveries,
    show_default=True,
    help="Fewer deliveries (refused requests) in the last hour pass the failure (refused) rate.",
)
@click.option(
    "--max-refused-rate",
    type=PERCENT,
    default=_DEFAULTS.max_refused_percent,
    show_default=True,
    help="Fail when more of the last hour's requests were refused.",
)
@click.option(
    "--max-signal-age",
    type=DURATION,
    default="15m",
    show_default=True,
    help="Fail when a signal has been owed for longer.",
)
@click.option(
    "--max-receiver-failing",
    type=DURATION,
    default="1h",
    show_default=True,
    help="Fail when a signal has been owed this long after its receiver raised (any parked "
    "signal fails at once).",
)
@click.option(
    "--max-sync-age",
    type=DURATION,
    default="2d",
    show_default=True,
    help="Fail when no sync has completed for this long (a ledger never synced passes).",
)
@click.option(
    "--mismatch-window",
    type=DURATION,
    default="1h",
    show_default=True,
    help="Fail on mismatched payments changed within this; set it to how often check runs.",
)
@click.option(
    "--max-rollup-lag",
    type=DURATION,
    default="1h",
    show_default=True,
    help="Fail when a change has waited longer to be counted in finance's totals.",
)
@click.option(
    "--skip",
    multiple=True,
    type=click.Choice(CHECK_NAMES),
    help="Leave this check out; repeat it for several.",
)
@click.option(
    "--format",
    "output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="One line per check, or one JSON object.",
)
@database_option
@fail_on_storage_errors
def check(
    max_silence: Any,
    max_failure_rate: Decimal,
    min_deliveries: int,
    max_refused_rate: Decimal,
    max_signal_age: Any,
    max_receiver_failing: Any,
    max_sync_age: Any,
    mismatch_window: Any,
    max_rollup_lag: Any,
    skip: tuple[str, ...],
    output: str,
    database: Path | None,
) -> None:
    """Check the ledger's health: exit 0 when every check passes, 1 when one fails.

    The checks: silence, failure-rate, refusals, signals, receivers, drift, sync,
    mismatches, rollup.
    """
    limits = CheckLimits(
        max_silence=max_silence,
        max_failure_percent=max_failure_rate,
        min_deliveries=min_deliveries,
        max_refused_percent=max_refused_rate,
        max_signal_age=max_signal_age,
        max_receiver_failing=max_receiver_failing,
        max_sync_age=max_sync_age,
        mismatch_window=mismatch_window,
        max_rollup_lag=max_rollup_lag,
        skip=frozenset(skip),
    )
    with ledger_for(database, read_only=True) as ledger:
        report = evaluate(ledger.vitals(mismatch_window=limits.mismatch_window), limits)
    _print(report, output)
    app = app_or_none()
    if app is not None:
        send_failed(app, report)
    if not report.ok:
        names = ", ".join(result.name for result in report.failed)
        raise click.ClickException(f"{len(report.failed)} check(s) failed: {names}.")


def _print(report: CheckReport, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(report.as_json(), ensure_ascii=True))
        return
    for result in report.results:
        word = "ok" if result.ok else "FAILED"
        click.echo(terminal_text(f"{word} {result.name}: {result.detail}"))


def _waiting(signal: OwedSignal, now: datetime) -> bool:
    """Whether it waits for its retry's backoff (and is not parked)."""
    due = signal.next_attempt_at
    return signal.parked_at is None and due is not None and datetime.fromisoformat(due) > now


def _state(signal: OwedSignal, now: datetime) -> str:
    if signal.parked_at is not None:
        return "parked"
    if _waiting(signal, now):
        return f"retry at {signal.next_attempt_at}"
    return "due"


def _waiting_and_parked(owed: list[OwedSignal], now: datetime) -> tuple[int, int]:
    """How many of ``owed`` wait for their retry, and how many are parked."""
    waiting = sum(1 for row in owed if _waiting(row, now))
    return waiting, sum(1 for row in owed if row.parked_at is not None)


def _list(owed: list[OwedSignal], now: datetime) -> None:
    click.echo("id       outcome  delivery  signal               rounds  state / owed at")
    for row in owed:
        click.echo(
            f"{row.id:<8} {row.outcome_id:<8} {row.delivery_id:<9} {row.signal:<20} "
            f"{row.attempts:<7} {_state(row, now)} (owed at {row.owed_at})"
        )
        if row.error:
            first = terminal_text(row.error.splitlines()[0])
            click.echo(f"         {first[:160]}")
    waiting, parked = _waiting_and_parked(owed, now)
    click.echo(
        f"{len(owed)} signal(s) owed: {len(owed) - parked - waiting} due, {waiting} waiting for "
        f"a retry, {parked} parked. `flask payhooks signals --send` runs what is due (--now "
        "also what waits, --retry-parked also what is parked)."
    )


def _dismiss(database: Path | None, signal_id: int) -> None:
    with ledger_for(database) as ledger:
        found = ledger.signals.dismiss(signal_id)
    if found is None:
        raise click.ClickException(
            f"Signal #{signal_id} is not owed, or a sender holds it now; `payhooks signals` "
            "lists what is owed."
        )
    click.echo(
        f"Signal #{signal_id} ({found.signal} of outcome #{found.outcome_id}, delivery "
        f"#{found.delivery_id}) marked handled without running its receivers."
    )


@click.command()
@click.option("--send", is_flag=True, help="Run the receivers still owed of what is due.")
@click.option(
    "--now",
    "now_too",
    is_flag=True,
    help="Also what waits for its retry's backoff (implies --send).",
)
@click.option(
    "--retry-parked",
    is_flag=True,
    help="Also the parked signals (implies --send).",
)
@click.option("--identifier", help="Only this payment's signals (its external identifier).")
@click.option(
    "--dismiss",
    "dismiss_id",
    type=click.IntRange(min=1),
    metavar="ID",
    help="Mark the owed signal with this id (the listing's first column) handled without "
    "running its receivers, so the payment's later signals follow.",
)
@database_option
@fail_on_storage_errors
def signals(
    send: bool,
    now_too: bool,
    retry_parked: bool,
    identifier: str | None,
    dismiss_id: int | None,
    database: Path | None,
) -> None:
    """List the signals still owed to the app's receivers; with --send, run them.

    A signal is owed until every receiver connected to it has returned: one whose receiver
    raised is retried with a backoff, then parked. --send runs, for what is due and no other
    sender holds, exactly the receivers that have not returned; --now also runs what waits for
    its backoff, --retry-parked also what is parked. Sending needs the app (`flask payhooks
    signals --send`); plain `payhooks signals --send` refuses (exit 2). Exit 1 when a receiver
    raised (the signal stays owed, with its error).
    """
    config = settings()  # first: inside `flask payhooks`, this pushes the app's context
    if dismiss_id is not None:
        if send or now_too or retry_parked:
            raise click.UsageError("--dismiss runs nothing: give it without --send.")
        _dismiss(database, dismiss_id)
        return
    send = send or now_too or retry_parked
    app = app_or_none() if send else None
    if send and app is None:
        raise click.UsageError(
            "Outside your app there are no receivers to run: run `flask payhooks signals "
            "--send` in the app."
        )
    now = datetime.now().astimezone()
    with ledger_for(database) as ledger:
        owed = ledger.signals.owed(identifier=identifier)
        whose = "" if identifier is None else f" for {terminal_text(identifier)}"
        if not owed:
            click.echo(f"No signal is owed{whose}.")
            return
        if app is None:
            _list(owed, now)
            return
        report = send_owed(
            app,
            ledger,
            lease=timedelta(seconds=config.signals_lease_seconds),
            retries=config.signal_retries,
            waiting=now_too,
            parked=retry_parked,
            identifier=identifier,
            once_since=datetime.now().astimezone(),
        )
        left = ledger.signals.owed(identifier=identifier)
    if report.ran or report.signals_sent:
        said = report.describe()
        click.echo(said[:1].upper() + said[1:] + ".")
    else:
        click.echo(f"Nothing was run{whose}: no owed signal was due.")
    if left:
        waiting, parked = _waiting_and_parked(left, now)
        held = len(left) - parked - waiting
        click.echo(
            f"Still owed: {len(left)} signal(s), {waiting} waiting for a retry (--now runs "
            f"them), {parked} parked (--retry-parked runs them), {held} held by another "
            "sender or held back behind an earlier signal of their payment."
        )
    if report.raised:
        raise click.ClickException(
            f"{report.raised} receiver run(s) raised; `payhooks signals` lists what is still "
            "owed, with the errors."
        )
