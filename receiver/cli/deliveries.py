"""``payhooks deliveries`` and ``reprocess``: the stored deliveries and refused requests.

``list`` pages through them newest first, ``show`` shows one whole (headers and body), and
``export`` writes raw bodies to files ``payhooks replay`` sends again. Each opens an existing
ledger only. What a delivery carries came from outside, so every text reaches the terminal
escaped (:mod:`payhooks.receiver.cli.reports` shows them).

``payhooks reprocess``: stored deliveries run through parsing again. It sends signals only
inside the merchant's app (``flask payhooks reprocess``): the receivers are connected there
(:func:`~payhooks.receiver.cli.common.app_or_none`).
"""

from __future__ import annotations

import os
import secrets
import sys
from datetime import datetime
from pathlib import Path

import click

from payhooks.receiver.cli.common import (
    app_or_none,
    check_window,
    database_option,
    fail_on_storage_errors,
    ledger_for,
    moment_callback,
    settings,
    terminal_json,
    terminal_text,
)
from payhooks.receiver.cli.reports import (
    DELIVERY_HEADER,
    REJECTED_HEADER,
    delivery_record,
    delivery_row,
    details_lines,
    details_record,
    rejected_record,
    rejected_row,
)
from payhooks.receiver.pipeline import (
    UNFINISHED_STATUSES,
    delivery_ids,
    reprocess_deliveries,
)
from payhooks.storage import DeliveryStatus, Ledger
from payhooks.storage.reads import DeliveryDetails, DeliveryErrorCode, DeliveryFilter

__all__ = ["deliveries", "reprocess"]


@click.group()
def deliveries() -> None:
    """Look through the stored deliveries and the refused requests (read-only)."""


@deliveries.command("list")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice([status.value for status in DeliveryStatus]),
    help="Only deliveries with this status; repeat it for several.",
)
@click.option(
    "--since", callback=moment_callback, metavar="TIME", help="Only those received at or after."
)
@click.option(
    "--until", callback=moment_callback, metavar="TIME", help="Only those received before."
)
@click.option("--identifier", metavar="ID", help="Only deliveries about this payment.")
@click.option(
    "--code",
    metavar="CODE",
    help="Only deliveries whose outcome has this status code (PS, PF...).",
)
@click.option(
    "--error",
    type=click.Choice([code.value for code in DeliveryErrorCode]),
    help="Only deliveries with this error: a stored error status, or a signal receiver's.",
)
@click.option(
    "--search",
    metavar="TEXT",
    help="Only deliveries about a payment whose identifier starts with TEXT, with the "
    "delivery key (webhook-id) TEXT, or about the payment of the service's transaction id TEXT.",
)
@click.option(
    "--refused",
    is_flag=True,
    help="The refused requests (a signature that did not hold) instead of the deliveries.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=50,
    show_default=True,
    help="At most this many rows.",
)
@click.option(
    "--before",
    "before_id",
    type=click.IntRange(min=1),
    metavar="ID",
    help="Only rows with an id below this one: the next page, as the last line says.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="json is JSON Lines: one object per row (the count goes to standard error).",
)
@database_option
@fail_on_storage_errors
def list_command(
    statuses: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    identifier: str | None,
    code: str | None,
    error: str | None,
    search: str | None,
    refused: bool,
    limit: int,
    before_id: int | None,
    output_format: str,
    database: Path | None,
) -> None:
    """List deliveries newest first, with what became of each.

    A time without an offset is UTC. The table ends with how many rows match and, when more
    remain, the --before ID that lists the next page.
    """
    check_window(since, until, "the list takes rows received")
    narrowed = (identifier, code, error, search)
    if refused and (statuses or any(value is not None for value in narrowed)):
        raise click.UsageError(
            "--refused lists requests that were never stored as deliveries: they have no "
            "--status, --identifier, --code, --error or --search."
        )
    for value, option in ((code, "--code"), (search, "--search")):
        if value is not None and (not value or "\x00" in value):
            raise click.BadParameter("it must be text, not empty, without NUL.", param_hint=option)
    with ledger_for(database, read_only=True) as ledger:
        if refused:
            _list_refused(ledger, since, until, before_id, limit, output_format)
            return
        wanted = DeliveryFilter(
            statuses, since, until, identifier, payment_status=code, error=error, text=search
        )
        page = ledger.receiver.delivery_log(wanted, before_id=before_id, limit=limit)
        count = ledger.receiver.count_deliveries(wanted)
        if output_format == "json":
            for row in page.rows:
                click.echo(terminal_json(delivery_record(row)))
        else:
            click.echo(DELIVERY_HEADER)
            for row in page.rows:
                click.echo(delivery_row(row))
    _footer(page.next_before_id, count, "delivery(ies)", output_format)


def _list_refused(
    ledger: Ledger,
    since: datetime | None,
    until: datetime | None,
    before_id: int | None,
    limit: int,
    output_format: str,
) -> None:
    page = ledger.receiver.rejected_log(since=since, until=until, before_id=before_id, limit=limit)
    count = ledger.receiver.count_rejected(since=since, until=until)
    if output_format == "json":
        for row in page.rows:
            click.echo(terminal_json(rejected_record(row)))
    else:
        click.echo(REJECTED_HEADER)
        for row in page.rows:
            click.echo(rejected_row(row))
    _footer(page.next_before_id, count, "refused request(s)", output_format)


def _footer(next_before_id: int | None, count: int, noun: str, output_format: str) -> None:
    """The count matching the filter and where the next page starts: the table's last line,
    or standard error beside JSON Lines."""
    line = f"{count} {noun} match."
    if next_before_id is not None:
        line += f" More remain: pass --before {next_before_id} for the next page."
    click.echo(line, err=output_format == "json")


@deliveries.command("show")
@click.argument("delivery_id", metavar="ID", type=click.IntRange(min=1))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one object, the body as text (when UTF-8) and as base64.",
)
@database_option
@fail_on_storage_errors
def show(delivery_id: int, output_format: str, database: Path | None) -> None:
    """Show one delivery whole: what became of it, its headers and its body.

    A JSON body is laid out (members in the order sent, numbers as written); any other is
    shown escaped. Exit 1 when there is no such delivery.
    """
    with ledger_for(database, read_only=True) as ledger:
        details = _details(ledger, delivery_id)
    if output_format == "json":
        click.echo(terminal_json(details_record(details), indent=2))
        return
    for line in details_lines(details):
        click.echo(line)


def _details(ledger: Ledger, delivery_id: int) -> DeliveryDetails:
    details = ledger.receiver.delivery_details(delivery_id)
    if details is None:
        raise click.ClickException(f"There is no delivery {delivery_id} in the ledger.")
    return details


@deliveries.command("export")
@click.argument("delivery_ids", metavar="ID...", nargs=-1, required=True, type=click.IntRange(1))
@click.option(
    "--output",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="The folder to write to (created when missing).",
)
@database_option
@fail_on_storage_errors
def export(delivery_ids: tuple[int, ...], output: Path, database: Path | None) -> None:
    """Write each delivery's raw body, byte for byte, to DIR/delivery-ID.json.

    `payhooks replay DIR/delivery-ID.json --url ...` sends it again, newly signed. An existing
    file is never overwritten (exit 1); nothing is written unless every ID is a delivery.
    """
    ids = list(dict.fromkeys(delivery_ids))
    with ledger_for(database, read_only=True) as ledger:
        found = [_details(ledger, delivery_id) for delivery_id in ids]
    for details in found:
        if details.pruned_at is not None:
            raise click.ClickException(
                f"Delivery {details.id}'s body was pruned into {details.pruned_into}; "
                "nothing was written (payhooks restore-pruned puts it back)."
            )
    targets = [(details, output / f"delivery-{details.id}.json") for details in found]
    for _, target in targets:
        if target.exists() or target.is_symlink():
            raise click.ClickException(f"{target} exists already; it was not overwritten.")
    try:
        output.mkdir(parents=True, exist_ok=True)
        for details, target in targets:
            _write_new(target, details.body)
            click.echo(f"Wrote {terminal_text(str(target))} ({len(details.body)} bytes).")
    except FileExistsError as err:
        raise click.ClickException(
            f"{err.filename2 or err.filename} exists already; it was not overwritten."
        ) from err
    except OSError as err:
        raise click.ClickException(
            f"{err.filename or output} cannot be written: {err.strerror or err}."
        ) from err


def _write_new(target: Path, body: bytes) -> None:
    """Write ``body`` to a new file at ``target``, whole or not at all: a temporary file
    beside it, linked into place (which fails if ``target`` appeared meanwhile). The
    temporary file is named first and made inside the ``try``, so a Ctrl-C just after it was
    created still removes it."""
    temporary = target.parent / f".{target.name}.{secrets.token_hex(8)}"
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(descriptor, "wb") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(temporary, target)
    except FileExistsError as err:
        if err.filename2 is None:  # os.open met another's file of that name: never removed
            raise
        temporary.unlink(missing_ok=True)
        raise
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    temporary.unlink()


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
        with click.progressbar(ids, label="Reprocessing", file=sys.stderr) as bar:
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
