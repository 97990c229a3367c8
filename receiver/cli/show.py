"""``payhooks show``: one payment's story, from the ledger (:meth:`payhooks.storage.Ledger.story`).

Text for people: a short header from the payment's reconciliation row, then one line per event,
oldest first: its time (UTC, ISO 8601), its kind, its details. Every line is escaped for the
terminal as a whole (:func:`~payhooks.receiver.cli.common.terminal_text`): identifiers,
errors, descriptions and status strings came from outside. JSON for tools: one document,
``{"payment": {...}, "events": [...]}``, exact (only JSON's own escapes), amounts as decimal
strings in major units and times in ISO 8601 with their offset.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any, Literal

import click

from payhooks.receiver.cli.common import (
    database_option,
    fail_on_storage_errors,
    ledger_for,
    terminal_json,
    terminal_text,
)
from payhooks.receiver.cli.reports import REPORT_FIELDS, report_record
from payhooks.storage.reads import (
    CreationAttemptEvent,
    DeliveryEvent,
    OutcomeEvent,
    PaymentStory,
    RegistrationEvent,
    ReturnEvent,
    SignalEvent,
    StoryEvent,
    SyncSightingEvent,
)

__all__ = ["show", "story_lines", "story_record"]

ShowFormat = Literal["text", "json"]

_KIND_WIDTH = len("creation_attempt")
_LABEL_WIDTH = len("conflicting deliveries  ")


@click.command()
@click.argument("identifier")
@click.option(
    "--format",
    "show_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help='json is one document: {"payment": {...}, "events": [...]}.',
)
@database_option
@fail_on_storage_errors
def show(identifier: str, show_format: ShowFormat, database: Path | None) -> None:
    """Tell everything the ledger knows about one payment, oldest first.

    IDENTIFIER is the payment's external identifier. Its registration, the attempts to create
    it at the service, every delivery naming it, its outcomes and the signals owed for them,
    the customer's returns and what each sync saw. Exit 1 when the ledger has nothing about it.
    """
    with ledger_for(database, read_only=True) as ledger:
        story = ledger.story(identifier)
    if story is None:
        # The group escapes the message for the terminal.
        raise click.ClickException(f"The ledger has nothing about '{identifier}'.")
    if show_format == "json":
        click.echo(terminal_json(story_record(story)))
        return
    for line in story_lines(story):
        click.echo(terminal_text(line))


# -- JSON ------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal | Enum):
        return str(value)
    return value


def _event_record(event: StoryEvent) -> dict[str, Any]:
    """``event`` as JSON: ``at`` and ``kind``, then its fields; an ``X_minor`` amount is given
    as ``X``, its decimal string in major units."""
    record: dict[str, Any] = {"at": event.at.isoformat(), "kind": str(event.kind)}
    for field in dataclasses.fields(event):
        name = field.name.removesuffix("_minor")
        if name != "at":
            record[name] = _json_value(getattr(event, name))
    return record


def story_record(story: PaymentStory) -> dict[str, Any]:
    """``story`` as the JSON document ``payhooks show --format json`` writes: ``payment`` has
    the fields of ``payhooks reconcile``'s records (all None when the ledger keeps no row for
    it), ``events`` one object per event."""
    if story.row is None:
        payment = dict.fromkeys(REPORT_FIELDS) | {"external_identifier": story.external_identifier}
    else:
        payment = report_record(story.row)
    return {"payment": payment, "events": [_event_record(event) for event in story.events]}


# -- text ------------------------------------------------------------------------------------


def _money(amount: Decimal | None, currency: str | None) -> str:
    return "-" if amount is None or currency is None else f"{amount} {currency}"


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def _header(story: PaymentStory) -> Iterator[str]:
    row = story.row
    fields: list[tuple[str, object]] = [("payment", story.external_identifier)]
    if row is None:
        fields.append(
            ("state", "- (nothing registered, recorded or listed: no reconciliation row)")
        )
    else:
        fields += [
            ("kind", row.kind or "- (unexpected: nothing registered)"),
            ("state", row.state),
            ("drift", row.drift or "-"),
            ("expected", _money(row.expected_amount, row.currency)),
            ("received", _money(row.received_amount, row.received_currency)),
            ("refused deliveries", row.refused_deliveries),
            ("conflicting deliveries", row.conflicting_deliveries),
        ]
        if row.latest_problem:
            fields.append(("latest problem", row.latest_problem))
    for label, value in fields:
        yield f"{label.ljust(_LABEL_WIDTH)}{value}"


def _metadata(metadata: Mapping[str, Any]) -> str:
    return json.dumps(metadata, ensure_ascii=False, sort_keys=True)


def _details(event: StoryEvent) -> list[str]:
    """The event's details, in the order a person reads them."""
    match event:
        case RegistrationEvent():
            parts = [f"{event.payment_kind} {_money(event.amount, event.currency)}"]
            if event.plan_amount is not None:
                parts.append(f"later periods {_money(event.plan_amount, event.currency)}")
            if event.description is not None:
                parts.append(f"description {event.description}")
            if event.metadata is not None:
                parts.append(f"metadata {_metadata(event.metadata)}")
        case CreationAttemptEvent():
            parts = [f"#{event.attempt_id} {event.state}"]
            if event.http_status is not None:
                parts.append(f"HTTP {event.http_status}")
            if event.error_code is not None or event.error is not None:
                parts.append(": ".join(p for p in (event.error_code, event.error) if p))
            if event.service_id is not None:
                parts.append(f"service id {event.service_id}")
        case DeliveryEvent():
            parts = [f"#{event.delivery_id} {event.status}", f"key {event.dedupe_key}"]
            parts.append(f"{event.attempts} attempt(s)")
            if event.outcome_id is not None:
                parts.append(f"outcome #{event.outcome_id}")
            if event.error is not None:
                parts.append(f"error {event.error}")
            if event.signal_error is not None:
                parts.append(f"receiver error {event.signal_error}")
            if event.pruned_into is not None:
                parts.append(f"body pruned into {event.pruned_into}")
        case OutcomeEvent():
            parts = [
                f"#{event.outcome_id} {event.transaction_id} {event.payment_status} "
                f"{event.state} {_money(event.amount, event.currency)}",
                f"paid {_time(event.paid_at)}",
                f"delivery #{event.delivery_id}",
            ]
        case SignalEvent():
            parts = [f"{event.signal} ({event.reconciliation}) for outcome #{event.outcome_id}"]
            if event.dismissed_at is not None:
                parts.append(f"marked handled without running {_time(event.dismissed_at)}")
            elif event.sent_at is not None:
                parts.append(f"sent {_time(event.sent_at)}")
            elif event.claimed_until is not None:
                parts.append(f"owed, claimed until {_time(event.claimed_until)}")
            elif event.parked_at is not None:
                parts.append(f"owed, parked {_time(event.parked_at)}")
            elif event.next_attempt_at is not None:
                parts.append(f"owed, retry at {_time(event.next_attempt_at)}")
            else:
                parts.append("owed")
            if event.attempts:
                parts.append(f"{event.attempts} round(s)")
            if event.error is not None:
                parts.append(f"error {event.error}")
        case ReturnEvent():
            parts = [str(event.return_kind)]
            if event.result_code is not None:
                parts.append(f"result code {event.result_code}")
        case SyncSightingEvent():
            parts = [
                f"{event.transaction_id} listed {event.status} ({event.state}) "
                f"{_money(event.amount, event.currency)}",
                f"last seen {_time(event.last_seen_at)}",
                f"drift {event.drift or '-'}",
            ]
    return parts


def story_lines(story: PaymentStory) -> Iterator[str]:
    """``story`` as text, line by line, not yet escaped for the terminal: the header, an empty
    line, then one line per event."""
    yield from _header(story)
    yield ""
    for event in story.events:
        kind = str(event.kind).ljust(_KIND_WIDTH)
        yield f"{_time(event.at)}  {kind}  {', '.join(_details(event))}"
