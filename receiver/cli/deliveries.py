"""``payhooks deliveries``: the stored deliveries and refused requests.

``list`` pages through them newest first, ``show`` shows one whole (headers and body), and
``export`` writes raw bodies to files ``payhooks replay`` sends again. Each opens an existing
ledger only. Everything a delivery carries came from outside (identifiers, errors, headers,
the body), so text for the terminal goes through
:func:`~payhooks.receiver.cli.common.terminal_text` and JSON through
:func:`~payhooks.receiver.cli.common.terminal_json`: a tool decoding the JSON gets the exact
values back, and a terminal shows no escape sequence and no bidirectional control. Amounts are
decimal strings, never floats.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

import click

from payhooks.receiver.cli.common import (
    check_window,
    database_option,
    fail_on_storage_errors,
    ledger_for,
    moment_callback,
    terminal_json,
    terminal_text,
)
from payhooks.receiver.visible_text import body_as_text, json_lines_of
from payhooks.storage import Delivery, DeliveryStatus, Ledger
from payhooks.storage.reads import DeliveryErrorCode, DeliveryFilter, RejectedDelivery

__all__ = ["deliveries"]


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


def _details(ledger: Ledger, delivery_id: int) -> Delivery:
    details = ledger.receiver.delivery(delivery_id)
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
            assert details.body is not None  # read whole
            _write_new(target, details.body)
            click.echo(f"Wrote {terminal_text(str(target))} ({details.body_size} bytes).")
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


# -- how a delivery is shown -------------------------------------------------------------------


#: How much of an error a table row shows; ``deliveries show`` shows all of it.
_ERROR_SHOWN: Final = 60

DELIVERY_HEADER: Final = (
    f"{'ID':>8}  {'RECEIVED':<25}  {'STATUS':<19}  {'TRIES':>5}  {'IDENTIFIER':<20}  "
    f"{'OUTCOME':<24}  {'BYTES':>7}  ERROR"
)
REJECTED_HEADER: Final = f"{'ID':>8}  {'RECEIVED':<25}  {'REMOTE ADDR':<39}  {'BYTES':>7}  REASON"


def _amount(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _outcome(row: Delivery) -> str:
    if row.outcome_id is None:
        return "-"
    amount = f" {row.amount} {terminal_text(row.currency or '')}" if row.amount is not None else ""
    return f"{row.outcome_id} {terminal_text(row.payment_status or '')}{amount}"


def _shortened(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def delivery_row(row: Delivery) -> str:
    """One table line: every text from outside escaped, the error shortened."""
    problem = row.error or (f"signal: {row.signal_error}" if row.signal_error else "")
    return (
        f"{row.id:>8}  {row.received_at.isoformat(timespec='seconds'):<25}  "
        f"{row.status.value:<19}  {row.attempts:>5}  "
        f"{terminal_text(row.external_identifier or '-'):<20}  {_outcome(row):<24}  "
        f"{row.body_size:>7}  {_shortened(terminal_text(problem), _ERROR_SHOWN)}"
    ).rstrip()


def rejected_row(row: RejectedDelivery) -> str:
    return (
        f"{row.id:>8}  {row.received_at.isoformat(timespec='seconds'):<25}  "
        f"{terminal_text(row.remote_addr or '-'):<39}  {row.body_size:>7}  "
        f"{terminal_text(row.reason)}"
    )


def delivery_record(row: Delivery) -> dict[str, Any]:
    """One delivery's log entry as a JSON object: the stored values, the amount a string."""
    return {
        "id": row.id,
        "received_at": row.received_at.isoformat(),
        "status": row.status.value,
        "attempts": row.attempts,
        "error": row.error,
        "signal_error": row.signal_error,
        "external_identifier": row.external_identifier,
        "outcome_id": row.outcome_id,
        "payment_status": row.payment_status,
        "amount": _amount(row.amount),
        "currency": row.currency,
        "body_size": row.body_size,
        "dedupe_key": row.dedupe_key,
    }


def rejected_record(row: RejectedDelivery) -> dict[str, Any]:
    return {
        "id": row.id,
        "received_at": row.received_at.isoformat(),
        "remote_addr": row.remote_addr,
        "reason": row.reason,
        "body_size": row.body_size,
    }


def details_record(details: Delivery) -> dict[str, Any]:
    """One delivery whole as a JSON object: ``body`` is its text when it is UTF-8 (else null),
    ``body_base64`` its exact bytes."""
    assert details.body is not None  # read whole
    assert details.headers is not None
    try:
        text: str | None = details.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return delivery_record(details) | {
        "headers": dict(details.headers),
        "body": text,
        "body_base64": base64.b64encode(details.body).decode("ascii"),
        "pruned_at": None if details.pruned_at is None else details.pruned_at.isoformat(),
        "pruned_into": details.pruned_into,
    }


def details_lines(details: Delivery) -> Iterator[str]:
    """``deliveries show``'s text: the entry, the headers, then the body."""
    assert details.body is not None  # read whole
    assert details.headers is not None
    fields = {
        "received at": details.received_at.isoformat(),
        "status": details.status.value,
        "attempts": str(details.attempts),
        "dedupe key": details.dedupe_key,
        "identifier": details.external_identifier or "-",
        "outcome": _outcome(details),
        "error": details.error or "-",
        "signal error": details.signal_error or "-",
        "body size": f"{details.body_size} bytes",
    }
    yield f"Delivery {details.id}"
    for name, value in fields.items():
        # The outcome is escaped already; escaping twice would double its backslashes.
        shown = value if name == "outcome" else terminal_text(value)
        yield f"  {name + ':':<14}{shown}"
    yield ""
    yield "Headers:"
    if not details.headers:
        yield "  (none stored)"
    for name, value in sorted(details.headers.items()):
        yield f"  {terminal_text(name)}: {terminal_text(value)}"
    yield ""
    yield "Body:"
    if details.pruned_at is not None:
        yield (
            f"  (pruned {details.pruned_at.isoformat()} into "
            f"{terminal_text(details.pruned_into or '?')}; payhooks prune's archive holds it)"
        )
        return
    yield from body_lines(details.body)


# -- the body ------------------------------------------------------------------------------


def body_lines(body: bytes) -> list[str]:
    """The body for the terminal, indented by two spaces: laid out when it is JSON (members
    in the order sent, repeated names kept, numbers as written), else on one line, escaped."""
    if not body:
        return ["  (empty)"]
    lines = json_lines_of(body)
    if lines is None:
        return ["  (not JSON; shown escaped)", f"  {body_as_text(body)}"]
    return [f"  {line}" for line in lines]
