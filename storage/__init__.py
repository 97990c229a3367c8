"""The SQLite ledger: expected payments, deliveries, outcomes, returns and reconciliation."""

from __future__ import annotations

from storage.errors import (
    ConflictError,
    SchemaVersionError,
    StorageError,
    StorageUnavailableError,
    UnknownDeliveryError,
)
from storage.ledger import DEFAULT_MAX_REJECTED, DEFAULT_MAX_RETURNS, SYNCHRONOUS_MODES, Ledger
from storage.limits import MAX_AMOUNT_MINOR
from storage.records import (
    DEFAULT_STATUS_MAP,
    MISMATCH_STATES,
    STATE_RANK,
    Flow,
    Outcome,
    PaymentState,
    ReconciliationState,
)
from storage.rows import (
    FINISHED_DELIVERY_STATUSES,
    Delivery,
    DeliveryStatus,
    PaymentKind,
    ReconciliationRow,
    RecordedOutcome,
    ReturnKind,
    SummaryRow,
)
from storage.schema import SCHEMA_VERSION

__all__ = [
    "DEFAULT_MAX_REJECTED",
    "DEFAULT_MAX_RETURNS",
    "DEFAULT_STATUS_MAP",
    "FINISHED_DELIVERY_STATUSES",
    "MAX_AMOUNT_MINOR",
    "MISMATCH_STATES",
    "SCHEMA_VERSION",
    "STATE_RANK",
    "SYNCHRONOUS_MODES",
    "ConflictError",
    "Delivery",
    "DeliveryStatus",
    "Flow",
    "Ledger",
    "Outcome",
    "PaymentKind",
    "PaymentState",
    "ReconciliationRow",
    "ReconciliationState",
    "RecordedOutcome",
    "ReturnKind",
    "SchemaVersionError",
    "StorageError",
    "StorageUnavailableError",
    "SummaryRow",
    "UnknownDeliveryError",
]
