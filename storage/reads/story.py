"""Reading one payment's story: one query per table that knows it, turned into events.

SQL selects each table's rows for one ``external_identifier`` (the signals through the
payment's outcomes); Python builds the events (:mod:`payhooks.storage.reads.story_rows`) and puts
them in time order. The statements are plain SQL both engines run, with ``?`` placeholders
(:mod:`payhooks.storage.postgresql.dialect`). Nothing is written.

Each statement reads what is committed when it runs: a write that lands between two of them
(a delivery arriving as the story is read) can show in one table and not yet in the next.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

import payhooks.storage.creation_attempts as creation_attempts
import payhooks.storage.reconciliation as reconciliation
from payhooks.storage.reads.story_rows import (
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
from payhooks.storage.records import PaymentState
from payhooks.storage.rows import DeliveryStatus, PaymentKind, ReturnKind
from payhooks.storage.sql import Connection
from payhooks.storage.sync_rows import DriftKind
from payhooks.storage.times import from_text

__all__ = ["read_story"]

_PAYMENT: Final = (
    "SELECT created_at, kind, amount_minor, currency, plan_amount_minor, description, metadata "
    "FROM payments WHERE external_identifier = ?"
)
# Through the index deliveries_identifier (external_identifier, id).
_DELIVERIES: Final = (
    "SELECT received_at, id, dedupe_key, status, attempts, error, signal_error, outcome_id, "
    "pruned_into FROM deliveries WHERE external_identifier = ? ORDER BY id"
)
_OUTCOMES: Final = (
    "SELECT recorded_at, id, delivery_id, transaction_id, payment_status, state, amount, "
    "currency, amount_minor, paid_at FROM outcomes WHERE external_identifier = ? ORDER BY id"
)
_SIGNALS: Final = """
    SELECT s.owed_at, s.outcome_id, s.delivery_id, s.signal, s.reconciliation, s.sent_at,
        s.error, s.claimed_until, s.attempts, s.next_attempt_at, s.parked_at, s.dismissed_at
    FROM owed_signals AS s JOIN outcomes AS o ON o.id = s.outcome_id
    WHERE o.external_identifier = ?
    ORDER BY s.outcome_id, s.position"""
_RETURNS: Final = (
    "SELECT returned_at, id, kind, result_code FROM returns WHERE external_identifier = ? "
    "ORDER BY returned_at, id"
)
_SIGHTINGS: Final = (
    "SELECT first_seen_at, transaction_id, status, state, currency, amount_minor, last_seen_at, "
    "drift FROM service_transactions WHERE external_identifier = ? ORDER BY transaction_id"
)


def _time(text: str | None) -> datetime | None:
    return None if text is None else from_text(text)


def _registration(row: tuple[Any, ...]) -> RegistrationEvent:
    created_at, kind, amount_minor, currency, plan, description, metadata = row
    return RegistrationEvent(
        at=from_text(created_at),
        payment_kind=PaymentKind(kind),
        amount_minor=amount_minor,
        currency=currency,
        plan_amount_minor=plan,
        description=description,
        metadata=None if metadata is None else json.loads(metadata),
    )


def _delivery(row: tuple[Any, ...]) -> DeliveryEvent:
    received_at, ident, dedupe_key, status, attempts, error, signal_error, outcome_id, pruned = row
    return DeliveryEvent(
        at=from_text(received_at),
        delivery_id=ident,
        dedupe_key=dedupe_key,
        status=DeliveryStatus(status),
        attempts=attempts,
        error=error,
        signal_error=signal_error,
        outcome_id=outcome_id,
        pruned_into=pruned,
    )


def _outcome(row: tuple[Any, ...]) -> OutcomeEvent:
    (
        recorded_at,
        ident,
        delivery_id,
        transaction_id,
        status,
        state,
        amount,
        currency,
        minor,
        paid,
    ) = row
    return OutcomeEvent(
        at=from_text(recorded_at),
        outcome_id=ident,
        delivery_id=delivery_id,
        transaction_id=transaction_id,
        payment_status=status,
        state=PaymentState(state),
        amount=Decimal(amount),
        currency=currency,
        amount_minor=minor,
        paid_at=from_text(paid),
    )


def _signal(row: tuple[Any, ...]) -> SignalEvent:
    owed_at, outcome_id, delivery_id, signal, state, sent_at, error, claimed_until = row[:8]
    attempts, next_attempt_at, parked_at, dismissed_at = row[8:]
    return SignalEvent(
        at=from_text(owed_at),
        outcome_id=outcome_id,
        delivery_id=delivery_id,
        signal=signal,
        reconciliation=state,
        sent_at=_time(sent_at),
        error=error,
        claimed_until=_time(claimed_until),
        attempts=attempts,
        next_attempt_at=_time(next_attempt_at),
        parked_at=_time(parked_at),
        dismissed_at=_time(dismissed_at),
    )


def _return(row: tuple[Any, ...]) -> ReturnEvent:
    returned_at, ident, kind, result_code = row
    return ReturnEvent(
        at=from_text(returned_at),
        return_id=ident,
        return_kind=ReturnKind(kind),
        result_code=result_code,
    )


def _sighting(row: tuple[Any, ...]) -> SyncSightingEvent:
    first_seen, transaction_id, status, state, currency, amount_minor, last_seen, drift = row
    return SyncSightingEvent(
        at=from_text(first_seen),
        transaction_id=transaction_id,
        status=status,
        state=PaymentState(state),
        currency=currency,
        amount_minor=amount_minor,
        last_seen_at=from_text(last_seen),
        drift=None if drift is None else DriftKind(drift),
    )


def _creation_attempts(conn: Connection, external_identifier: str) -> list[CreationAttemptEvent]:
    attempts = map(
        creation_attempts.to_attempt, creation_attempts.select(conn, external_identifier, None)
    )
    return [
        CreationAttemptEvent(
            at=attempt.started_at,
            attempt_id=attempt.id,
            state=attempt.state,
            http_status=attempt.http_status,
            error_code=attempt.error_code,
            error=attempt.error,
            service_id=attempt.service_id,
            finished_at=attempt.finished_at,
        )
        for attempt in attempts
    ]


def _rows(
    conn: Connection, sql: str, external_identifier: str, build: Callable[[Any], StoryEvent]
) -> Iterable[StoryEvent]:
    return [build(row) for row in conn.execute(sql, (external_identifier,)).fetchall()]


def read_story(conn: Connection, external_identifier: str) -> PaymentStory | None:
    """Everything the tables hold about ``external_identifier``, or None when none names it.

    The events are gathered kind by kind, each table's in its stored order, then sorted by
    time alone: the sort is stable, so events at the same moment keep
    :class:`~payhooks.storage.reads.story_rows.EventKind` order, then their table's.
    """
    gathered: list[StoryEvent] = []
    gathered.extend(_rows(conn, _PAYMENT, external_identifier, _registration))
    gathered.extend(_creation_attempts(conn, external_identifier))
    gathered.extend(_rows(conn, _DELIVERIES, external_identifier, _delivery))
    gathered.extend(_rows(conn, _OUTCOMES, external_identifier, _outcome))
    gathered.extend(_rows(conn, _SIGNALS, external_identifier, _signal))
    gathered.extend(_rows(conn, _RETURNS, external_identifier, _return))
    gathered.extend(_rows(conn, _SIGHTINGS, external_identifier, _sighting))
    if not gathered:
        return None
    return PaymentStory(
        external_identifier=external_identifier,
        row=reconciliation.row_for(conn, external_identifier),
        events=tuple(sorted(gathered, key=lambda event: event.at)),
    )
