"""``payhooks show``: one payment's story, from the ledger (:meth:`payhooks.storage.Ledger.story`).

Text for people: a short header from the payment's reconciliation row, then one line per event,
oldest first: its time (UTC, ISO 8601), its kind, its details. Every line is escaped for the
terminal as a whole (:func:`~payhooks.receiver.cli.common.terminal_text`): identifiers,
errors, descriptions and status strings came from outside. JSON for tools: one document,
``{"payment": {...}, "events": [...]}``, exact (only JSON's own escapes), amounts as decimal
strings in major units and times in ISO 8601 with their offset.
"""

from __future__ import annotations

from collections.abc import Iterator
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
from payhooks.storage.reads import Entry, PaymentStory, describe

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


def _event_record(entry: Entry) -> dict[str, Any]:
    """``entry`` as JSON: ``at`` and ``kind``, then its row's columns; an amount only in major
    units (its ``X_minor`` column is left out for ``X``)."""
    record: dict[str, Any] = {"at": entry.at.isoformat(), "kind": str(entry.kind)}
    for name, value in entry.row.items():
        if not name.endswith("_minor"):
            record[name] = _json_value(value)
    return record


def story_record(story: PaymentStory) -> dict[str, Any]:
    """``story`` as the JSON document ``payhooks show --format json`` writes: ``payment`` has
    the fields of ``payhooks reconcile``'s records (all None when the ledger keeps no row for
    it), ``events`` one object per entry of its timeline."""
    if story.row is None:
        payment = dict.fromkeys(REPORT_FIELDS) | {"external_identifier": story.external_identifier}
    else:
        payment = report_record(story.row)
    return {"payment": payment, "events": [_event_record(entry) for entry in story.timeline()]}


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


def story_lines(story: PaymentStory) -> Iterator[str]:
    """``story`` as text, line by line, not yet escaped for the terminal: the header, an empty
    line, then one line per entry (:func:`~payhooks.storage.reads.describe`)."""
    yield from _header(story)
    yield ""
    for entry in story.timeline():
        yield f"{_time(entry.at)}  {str(entry.kind).ljust(_KIND_WIDTH)}  {describe(entry)}"
