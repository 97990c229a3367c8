"""``payhooks reprocess``: stored deliveries run through parsing again.

It sends signals only inside the merchant's app (``flask payhooks reprocess``): the receivers
are connected there (``payhooks signals`` is in :mod:`~payhooks.receiver.cli.signals_command`).
"""

from __future__ import annotations

import sys
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
from payhooks.receiver.pipeline import (
    UNFINISHED_STATUSES,
    delivery_ids,
    reprocess_deliveries,
)
from payhooks.storage import DeliveryStatus

__all__ = ["app_or_none", "reprocess"]


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
    app = None if no_signals else app_or_none()
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
                    retries=config.signal_retries,
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


def app_or_none() -> object | None:
    """Inside a merchant's app with payhooks (``flask payhooks``), the app whose receivers get
    the signals; None for the plain ``payhooks`` script."""
    if not current_app or "payhooks" not in current_app.extensions:
        return None
    app: object = current_app._get_current_object()  # type: ignore[attr-defined]
    return app
