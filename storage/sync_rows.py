"""What the ledger takes from, and gives back about, the service: its transaction list and
the merchant's attempts to create payments there.

Kept apart from :mod:`payhooks.storage.rows` because they belong to one concern, what the
service says (:mod:`payhooks.storage.service_transactions` and
:mod:`payhooks.storage.creation_attempts` have their SQL).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from payhooks.storage.records import PaymentState

__all__ = [
    "CreationAttempt",
    "CreationFailure",
    "CreationState",
    "DriftKind",
    "DriftRow",
    "ListedTransaction",
    "SyncRun",
    "SyncStatus",
]


class ListedTransaction(NamedTuple):
    """One item of the service's list, as the sync read and mapped it."""

    transaction_id: str
    external_identifier: str
    #: The status string exactly as listed.
    status: str
    #: What the sync's status map made of it; ``unknown`` when the map lacks the string.
    state: PaymentState
    #: An ISO 4217 code when the list gave one the ledger knows, else None.
    currency: str | None = None
    amount_minor: int | None = None


class DriftKind(StrEnum):
    """How the service's list and the notifications disagree about one transaction or payment."""

    MISSED_NOTIFICATION = "missed_notification"
    STATUS_DIFFERS = "status_differs"
    UNKNOWN_STATUS = "unknown_status"
    UNEXPECTED = "unexpected"
    MISSING_AT_SERVICE = "missing_at_service"
    #: A listed item the ledger cannot store (its id or identifier, when storable, is kept).
    UNSTORABLE_ITEM = "unstorable_item"


class DriftRow(NamedTuple):
    """One row of the ``sync_drift`` view."""

    kind: DriftKind
    external_identifier: str
    #: The service's id; None for ``missing_at_service``.
    transaction_id: str | None
    #: The status string as listed (None for ``missing_at_service``).
    service_status: str | None
    service_state: PaymentState | None
    #: The state the notifications gave that transaction; None when none arrived.
    ledger_state: PaymentState | None
    seen_at: datetime | None


class SyncStatus(StrEnum):
    """Where one sync run stands."""

    RUNNING = "running"
    INTERRUPTED = "interrupted"
    COMPLETE = "complete"


@dataclass(frozen=True, slots=True)
class SyncRun:
    """One sync of the service's list, from the ``sync_runs`` table."""

    id: int
    started_at: datetime
    #: Payments registered before this, unseen by a complete run, are ``missing_at_service``.
    expected_before: datetime
    status: SyncStatus
    #: Where a resumed run goes on: the ``next_cursor`` of the last page recorded, exactly as
    #: the service gave it. None: at the start, or past the last page.
    next_cursor: str | None
    pages: int
    items: int
    error: str | None
    updated_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class CreationFailure:
    """Why an expected payment may not exist at the service
    (``Ledger.service.creation_failure``)."""

    external_identifier: str
    #: True: the service refused it (``refused``); False: no usable answer (``uncertain``).
    certain: bool
    reason: str
    failed_at: datetime


class CreationState(StrEnum):
    """What became of one attempt to create a payment at the service."""

    #: Asked, no answer yet: on its way, or its sender stopped (a crash leaves it so).
    SENDING = "sending"
    #: The service has it: it answered with its id, or its list showed it later.
    CREATED = "created"
    #: The service answered 4xx, or the request was refused before sending: not created.
    REFUSED = "refused"
    #: No usable answer, or a 5xx: it may exist at the service.
    UNCERTAIN = "uncertain"


@dataclass(frozen=True, slots=True)
class CreationAttempt:
    """One attempt to create a payment at the service, from the ``creation_attempts`` table."""

    id: int
    external_identifier: str
    #: ``transaction`` or ``subscription``.
    kind: str
    idempotency_key: str | None
    state: CreationState
    #: The service's id, once created.
    service_id: str | None
    http_status: int | None
    #: The error's stable code (``invalid_request``, ``transport_error``...).
    error_code: str | None
    error: str | None
    started_at: datetime
    finished_at: datetime | None
