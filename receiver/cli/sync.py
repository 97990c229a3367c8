"""``payhooks sync``: the service's transaction list against the ledger (docs/sync.md).

The engine is :func:`payhooks.service.sync.sync_transactions`; this module reads the settings,
shows progress on a terminal, prints the drift, and under ``flask payhooks sync`` sends the
``sync_drift`` signal so the merchant can alert on it. The service's side needs httpx (the
``service`` extra), which the console script does not: it is imported when the command runs,
so ``payhooks`` works without the extra and ``payhooks sync`` says how to get it.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from payhooks.receiver import signals
from payhooks.receiver.cli.common import (
    DURATION,
    BadUsage,
    app_or_none,
    database_option,
    fail_on_storage_errors,
    ledger_for,
    settings,
    terminal_text,
)

if TYPE_CHECKING:
    from payhooks.service import SyncProgress, SyncReport
    from payhooks.storage import Ledger

__all__ = ["sync"]


def _progress_printer() -> Any:
    """One line on standard error, rewritten after each page, when it is a terminal: a sync
    of a million transactions takes minutes, and a log file wants no carriage returns."""
    if not sys.stderr.isatty():
        return None

    def show(progress: SyncProgress) -> None:
        sys.stderr.write(
            f"\rSyncing: {progress.pages} page(s), {progress.items} transaction(s)"
            + (" (resumed)" if progress.resumed else "")
        )
        sys.stderr.flush()

    return show


def _print_drift(ledger: Ledger, report: SyncReport, summary: bool) -> None:
    """The drift, one line each (unless ``summary``), streamed from the ledger; the counts."""
    for row in () if summary else ledger.service.sync_drift():
        fields = [
            row.kind.value,
            row.external_identifier or "-",
            row.transaction_id or "-",
            f"service={row.service_status or '-'}",
            f"ledger={row.ledger_state or '-'}",
        ]
        click.echo(terminal_text("  ".join(fields)))
    for status, count in sorted(report.unknown_statuses.items()):
        click.echo(terminal_text(f"Unknown status string {status!r}: {count} transaction(s)."))
    if report.other_unknown:
        click.echo(
            f"Other unknown status strings: {report.other_unknown} transaction(s) (only the "
            f"first {len(report.unknown_statuses)} strings seen are named)."
        )
    counts = ", ".join(f"{kind} {n}" for kind, n in sorted(report.drift.items()))
    click.echo(f"Drift: {counts}." if counts else "No drift: the service's list agrees.")


@click.command()
@click.option("--service-url", metavar="URL", help="Default: PAYHOOKS_SERVICE_URL.")
@click.option("--token", metavar="JWT", help="Default: PAYHOOKS_SERVICE_TOKEN.")
@click.option("--merchant", metavar="ID", help="Default: PAYHOOKS_MERCHANT_ACCOUNT_ID.")
@click.option("--limit", type=click.IntRange(1, 100), help="The page size to ask for.")
@click.option(
    "--max-age",
    type=click.IntRange(min=0),
    metavar="SECONDS",
    help="Absent from the list this long: missing_at_service. Default: PAYHOOKS_SYNC_MAX_AGE.",
)
@click.option(
    "--max-pages",
    type=click.IntRange(min=1),
    default=20_000,  # payhooks.service.sync.DEFAULT_MAX_PAGES (the service extra may be absent)
    show_default=True,
    help="The most pages one run reads; the next sync resumes after them.",
)
@click.option(
    "--max-duration",
    type=DURATION,
    default="1h",  # payhooks.service.sync.DEFAULT_MAX_DURATION
    show_default=True,
    help="How long one run goes on asking for pages (30s, 15m, 2h); the next sync resumes "
    "where it stopped.",
)
@click.option(
    "--restart", is_flag=True, help="Start from the first page, not where a sync stopped."
)
@click.option("--summary", is_flag=True, help="Print the drift's counts, not one line each.")
@click.option("--fail-on-drift", is_flag=True, help="Exit 1 when any drift is found.")
@database_option
@fail_on_storage_errors
def sync(
    service_url: str | None,
    token: str | None,
    merchant: str | None,
    limit: int | None,
    max_age: int | None,
    max_pages: int,
    max_duration: timedelta,
    restart: bool,
    summary: bool,
    fail_on_drift: bool,
    database: Path | None,
) -> None:
    """Read the service's transaction list into the ledger and report the drift.

    Missed notifications, differing statuses, unknown status strings, transactions nobody
    expected, and expected payments the service does not have. Sync never settles a payment:
    the list is not signed. An interrupted sync resumes where it stopped.
    """
    if max_duration <= timedelta(0):
        raise BadUsage("--max-duration must be longer than 0s.")
    found = settings()
    url = service_url or found.service_url
    access_token = token or found.service_token
    account = merchant or found.merchant_account_id
    for value, option, key in (
        (url, "--service-url", "PAYHOOKS_SERVICE_URL"),
        (access_token, "--token", "PAYHOOKS_SERVICE_TOKEN"),
        (account, "--merchant", "PAYHOOKS_MERCHANT_ACCOUNT_ID"),
    ):
        if not value:
            raise BadUsage(f"payhooks sync needs {option} or {key}.")
    assert url is not None
    assert access_token is not None
    assert account is not None
    try:
        from payhooks.service import ServiceClient, ServiceError, sync_transactions
    except ImportError as err:
        raise click.ClickException(
            "payhooks sync needs the service extra: pip install 'payhooks[service]'."
        ) from err
    progress = _progress_printer()
    try:
        client = ServiceClient(url, access_token=access_token, merchant_account_id=account)
    except ValueError as err:
        raise BadUsage(f"payhooks sync cannot use its settings: {err}.") from err
    with ledger_for(database) as ledger, client:
        try:
            report = sync_transactions(
                client,
                ledger,
                status_map=found.sync_status_map,
                max_age=timedelta(seconds=found.sync_max_age if max_age is None else max_age),
                limit=limit,
                max_pages=max_pages,
                max_duration=max_duration,
                resume=not restart,
                progress=progress,
            )
        except ServiceError as err:
            raise click.ClickException(err.message) from err
        finally:
            if progress is not None:
                sys.stderr.write("\n")
        click.echo(
            f"Read {report.pages} page(s), {report.items} transaction(s)"
            + (f", resuming sync {report.run.id}." if report.resumed else ".")
        )
        _print_drift(ledger, report, summary)
    app = app_or_none()
    if report.has_drift and app is not None:
        signals.sync_drift.send(app, report=report, drift=dict(report.drift))
    if fail_on_drift and report.has_drift:
        total = sum(report.drift.values())
        raise click.ClickException(f"The service's list and the ledger differ ({total} row(s)).")
