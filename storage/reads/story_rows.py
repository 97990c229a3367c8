"""One payment's story as the ledger hands it back: what each table knows of it, as events.

Plain frozen dataclasses, like :mod:`payhooks.storage.rows`: no database handle, exact money
(``int`` minor units, ``Decimal`` major units), aware times in UTC. Each event has ``at`` (when
it happened, by the ledger's clock, or the service's list for a sighting) and ``kind`` (an
:class:`EventKind`, the same for every event of a class); the rest are its details. Text that
came from outside (identifiers, errors, descriptions, status strings) is exactly as stored:
whoever shows it escapes it for where it goes.

:mod:`payhooks.storage.reads.story` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any, ClassVar

from payhooks.storage.currencies import from_minor_units
from payhooks.storage.records import PaymentState
from payhooks.storage.rows import DeliveryStatus, PaymentKind, ReconciliationRow, ReturnKind
from payhooks.storage.sync_rows import CreationState, DriftKind

__all__ = [
    "CreationAttemptEvent",
    "DeliveryEvent",
    "EventKind",
    "OutcomeEvent",
    "PaymentStory",
    "RegistrationEvent",
    "ReturnEvent",
    "SignalEvent",
    "StoryEvent",
    "SyncSightingEvent",
]


class EventKind(StrEnum):
    """What one event of a story is; events at the same moment come in this order."""

    REGISTRATION = "registration"
    CREATION_ATTEMPT = "creation_attempt"
    DELIVERY = "delivery"
    OUTCOME = "outcome"
    SIGNAL = "signal"
    RETURN = "return"
    SYNC_SIGHTING = "sync_sighting"


@dataclass(frozen=True, slots=True)
class RegistrationEvent:
    """The merchant registered the payment (a row of ``payments``); ``at`` is when."""

    kind: ClassVar[EventKind] = EventKind.REGISTRATION
    at: datetime
    payment_kind: PaymentKind
    amount_minor: int
    currency: str
    #: A subscription's later periods; None for a one-off transaction.
    plan_amount_minor: int | None
    description: str | None
    #: The metadata registered with it, as stored (JSON); None when there was none.
    metadata: Mapping[str, Any] | None

    @property
    def amount(self) -> Decimal:
        """``amount_minor`` in major units of ``currency``."""
        return from_minor_units(self.amount_minor, self.currency)

    @property
    def plan_amount(self) -> Decimal | None:
        """``plan_amount_minor`` in major units of ``currency``."""
        plan = self.plan_amount_minor
        return None if plan is None else from_minor_units(plan, self.currency)


@dataclass(frozen=True, slots=True)
class CreationAttemptEvent:
    """An attempt to create the payment at the service; ``at`` is when it began."""

    kind: ClassVar[EventKind] = EventKind.CREATION_ATTEMPT
    at: datetime
    attempt_id: int
    state: CreationState
    http_status: int | None
    #: The error's stable code (``invalid_request``, ``transport_error``...).
    error_code: str | None
    error: str | None
    #: The service's id, once created.
    service_id: str | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class DeliveryEvent:
    """An authenticated delivery about the payment; ``at`` is when it first arrived."""

    kind: ClassVar[EventKind] = EventKind.DELIVERY
    at: datetime
    delivery_id: int
    #: The ``webhook-id`` (or the body's digest) it was stored under.
    dedupe_key: str
    status: DeliveryStatus
    #: How many times it arrived with these bytes.
    attempts: int
    #: Why parsing or processing failed, or which fields a conflicting outcome changed.
    error: str | None
    #: What signal receivers raised after it was processed.
    signal_error: str | None
    #: The outcome it recorded, duplicated or contradicted.
    outcome_id: int | None
    #: The archive ``payhooks prune`` moved its body and headers into; None while kept.
    pruned_into: str | None = None


@dataclass(frozen=True, slots=True)
class OutcomeEvent:
    """An outcome recorded for the payment; ``at`` is when it was recorded (``paid_at`` is
    the service's time for it)."""

    kind: ClassVar[EventKind] = EventKind.OUTCOME
    at: datetime
    outcome_id: int
    #: The delivery that recorded it.
    delivery_id: int
    transaction_id: str
    #: ``payment_status`` exactly as sent (``PS``).
    payment_status: str
    state: PaymentState
    #: The amount exactly as sent.
    amount: Decimal
    currency: str
    amount_minor: int
    paid_at: datetime


@dataclass(frozen=True, slots=True)
class SignalEvent:
    """A signal owed to the merchant's code for one of the payment's outcomes; ``at`` is when
    it became owed."""

    kind: ClassVar[EventKind] = EventKind.SIGNAL
    at: datetime
    outcome_id: int
    delivery_id: int
    #: The signal's name (``payment-succeeded``...).
    signal: str
    #: The reconciliation state it was decided on.
    reconciliation: str
    #: When every receiver had returned; None while it is owed.
    sent_at: datetime | None
    #: What a receiver raised in its last round that raised, when one did.
    error: str | None
    #: A sender's lease on it, while one holds it.
    claimed_until: datetime | None
    #: Rounds of its receivers run so far.
    attempts: int = 0
    #: While owed after a raise: when its next round is due, or when it was parked.
    next_attempt_at: datetime | None = None
    parked_at: datetime | None = None
    #: When a person marked it handled without running it (then ``sent_at`` too).
    dismissed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ReturnEvent:
    """The customer came back through the return or cancel redirect; ``at`` is when."""

    kind: ClassVar[EventKind] = EventKind.RETURN
    at: datetime
    return_id: int
    return_kind: ReturnKind
    #: The browser's query string's word (``Authorised``...): never proof of payment.
    result_code: str | None


@dataclass(frozen=True, slots=True)
class SyncSightingEvent:
    """A transaction of the payment on the service's list (``payhooks sync``); ``at`` is when
    a sync first saw it."""

    kind: ClassVar[EventKind] = EventKind.SYNC_SIGHTING
    at: datetime
    transaction_id: str
    #: The status string exactly as listed.
    status: str
    state: PaymentState
    currency: str | None
    amount_minor: int | None
    last_seen_at: datetime
    #: How it disagrees with the notifications; None when it agrees.
    drift: DriftKind | None

    @property
    def amount(self) -> Decimal | None:
        """``amount_minor`` in major units of ``currency``, when the list gave both."""
        if self.amount_minor is None or self.currency is None:
            return None
        return from_minor_units(self.amount_minor, self.currency)


#: Any one event of a story.
StoryEvent = (
    RegistrationEvent
    | CreationAttemptEvent
    | DeliveryEvent
    | OutcomeEvent
    | SignalEvent
    | ReturnEvent
    | SyncSightingEvent
)


@dataclass(frozen=True, slots=True)
class PaymentStory:
    """Everything the ledger knows about one ``external_identifier``
    (:meth:`payhooks.storage.Ledger.story`)."""

    external_identifier: str
    #: Its reconciliation row (:meth:`payhooks.storage.Ledger.row`); None when the ledger keeps
    #: none for it: no registration, outcome or sighting names it, only a refused delivery or
    #: a return.
    row: ReconciliationRow | None
    #: Oldest first; events at the same moment in :class:`EventKind` order, then as stored.
    events: tuple[StoryEvent, ...]
