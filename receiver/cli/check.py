"""``payhooks check``: the ledger's health for cron and monitoring (docs/operations.md).

Reads the vital figures once (``Ledger.vitals``), decides each check
(:func:`payhooks.receiver.checks.evaluate`) and prints one line per check, or JSON. Exit 0
when every check passes, 1 when one fails, 2 for bad usage. Under ``flask payhooks check``
it also sends ``check_failed`` in the merchant's app for each failing check.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import click
from flask import current_app

from payhooks.receiver.checks import CHECK_NAMES, CheckLimits, CheckReport, evaluate, send_failed
from payhooks.receiver.cli.common import database_option, fail_on_storage_errors, ledger_for
from payhooks.receiver.cli.escaping import terminal_text
from payhooks.receiver.cli.option_values import DURATION, PERCENT

__all__ = ["check"]

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
    skip: tuple[str, ...],
    output: str,
    database: Path | None,
) -> None:
    """Check the ledger's health: exit 0 when every check passes, 1 when one fails.

    The checks: silence, failure-rate, refusals, signals, receivers, drift, sync,
    mismatches.
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
        skip=frozenset(skip),
    )
    with ledger_for(database, read_only=True) as ledger:
        report = evaluate(ledger.vitals(mismatch_window=limits.mismatch_window), limits)
    _print(report, output)
    if current_app and "payhooks" in current_app.extensions:
        send_failed(current_app._get_current_object(), report)  # type: ignore[attr-defined]
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
