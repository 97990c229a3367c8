"""``payhooks reprocess`` and ``payhooks signals``: stored deliveries, and the signals their
outcomes still owe the merchant's code.

Both send signals only inside the merchant's app (``flask payhooks ...``): the receivers are
connected there. Signals are owed from the commit that makes them owed until their receivers
have run; a sender claims them first, with a lease (``PAYHOOKS_SIGNALS_LEASE_SECONDS``), so a
worker that died in between leaves them here: ``flask payhooks signals`` lists them and
``--send`` sends those nobody holds (after an incident, or from a cron). Delivery to receivers
is at least once, never twice at the same time; each carries the stable ``outcome_id`` to act
once on.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import TextIO

import click
from flask import current_app

from payhooks.receiver.cli.common import (
    database_option,
    fail_on_storage_errors,
    ledger_for,
    settings,
)
from payhooks.receiver.cli.escaping import terminal_text
from payhooks.receiver.pipeline import (
    UNFINISHED_STATUSES,
    delivery_ids,
    reprocess_deliveries,
    send_claimed,
)
from payhooks.storage import DeliveryStatus

__all__ = ["reprocess", "signals"]


def _stderr() -> TextIO:
    return sys.stderr


@click.command()
@click.option(
    "--status",
    type=click.Choice([status.value for status in DeliveryStatus]),
    help=(
        "Only deliveries with this status. Default: every delivery without a recorded outcome "
        "(received, malformed_json, invalid_payload, processing_error)."
    ),
)
@click.option(
    "--no-signals",
    is_flag=True,
    help=(
        "Record the outcomes without sending their signals: they stay owed, and "
        "`flask payhooks signals --send` in the app sends them. Required outside an app: "
        "plain `payhooks` has no app whose signals it could send."
    ),
)
@database_option
@fail_on_storage_errors
def reprocess(status: str | None, no_signals: bool, database: Path | None) -> None:
    """Run stored deliveries through parsing again and record their outcomes.

    For deliveries that failed to parse (a status code the map lacked, a bug since fixed).
    Exit 1 when some still cannot be processed. Run it as `flask payhooks reprocess` in your
    app to send the app's signals for each outcome recorded for the first time; plain
    `payhooks reprocess` cannot, and refuses (exit 2) unless given --no-signals.
    """
    config = settings()
    app = None if no_signals else _app()
    if app is None and not no_signals:
        raise click.UsageError(
            "Outside your app, reprocess cannot send its signals: run `flask payhooks "
            "reprocess` in the app, or pass --no-signals to record the outcomes and leave "
            "their signals owed."
        )
    statuses = UNFINISHED_STATUSES if status is None else (DeliveryStatus(status),)
    with ledger_for(database) as ledger:
        ids = delivery_ids(ledger, statuses)
        with click.progressbar(ids, label="Reprocessing", file=_stderr()) as bar:
            try:
                report = reprocess_deliveries(
                    ledger,
                    bar,
                    time_zone=config.time_zone,
                    status_map=config.status_map,
                    app=app,
                )
            except ValueError as err:
                raise click.ClickException(f"The configuration cannot be used: {err}.") from err
    if not report.total:
        click.echo("No delivery to reprocess.")
        return
    listed = ", ".join(f"{count} {name}" for name, count in sorted(report.counts.items()))
    click.echo(f"Reprocessed {report.total} delivery(ies): {listed}.")
    if report.still_failing:
        options = " ".join(
            f"--status {status}" for status in report.failing_statuses if status != "not_found"
        )
        raise click.ClickException(
            f"{report.still_failing} delivery(ies) still cannot be processed; "
            f"`payhooks deliveries list {options}` shows them with their errors."
        )


@click.command()
@click.option(
    "--send",
    is_flag=True,
    help="Send every owed signal with the app's receivers, then mark it sent.",
)
@database_option
@fail_on_storage_errors
def signals(send: bool, database: Path | None) -> None:
    """List the signals still owed to the app's receivers; with --send, send them.

    A signal is owed from the commit that makes it owed until its receivers ran: a worker that
    died in between leaves it here. --send sends those no other sender holds (a claim lasts
    PAYHOOKS_SIGNALS_LEASE_SECONDS). Sending needs the app (`flask payhooks signals --send`);
    plain `payhooks signals --send` refuses (exit 2). Exit 1 when a receiver raised (its
    error is kept with the signal and on the delivery).
    """
    config = settings()  # first: inside `flask payhooks`, this pushes the app's context
    app = _app() if send else None
    if send and app is None:
        raise click.UsageError(
            "Outside your app there are no receivers to send to: run `flask payhooks signals "
            "--send` in the app."
        )
    with ledger_for(database) as ledger:
        owed = ledger.signals.owed()
        if not owed:
            click.echo("No signal is owed.")
            return
        if app is None:
            click.echo("outcome  delivery  signal               reconciliation      owed at")
            for row in owed:
                click.echo(
                    f"{row.outcome_id:<8} {row.delivery_id:<9} {row.signal:<20} "
                    f"{terminal_text(row.reconciliation):<19} {row.owed_at}"
                )
            click.echo(f"{len(owed)} signal(s) owed; `flask payhooks signals --send` sends them.")
            return
        lease = timedelta(seconds=config.signals_lease_seconds)
        sent, failures, outcomes = 0, 0, set[int]()
        while claimed := ledger.signals.claim(None, lease=lease, limit=100):
            failures += len(send_claimed(app, ledger, claimed))
            sent += len(claimed)
            outcomes.update(signal.outcome_id for signal in claimed)
    click.echo(f"Sent {sent} signal(s) for {len(outcomes)} outcome(s).")
    held = len(owed) - sent
    if held > 0:
        click.echo(
            f"{held} signal(s) are held by a sender now; they are sent by it, or after its lease."
        )
    if failures:
        raise click.ClickException(
            f"{failures} signal(s) had a receiver that raised; their errors are kept with "
            "the signals and on the deliveries."
        )


def _app() -> object | None:
    """Inside a merchant's app with payhooks (``flask payhooks``), the app whose receivers get
    the signals; None for the plain ``payhooks`` script."""
    if not current_app or "payhooks" not in current_app.extensions:
        return None
    app: object = current_app._get_current_object()  # type: ignore[attr-defined]
    return app
