"""The ledger: expected payments, deliveries, outcomes, returns and reconciliation.

:class:`Ledger` is the one public face; the engine behind it (SQLite, in
:mod:`payhooks.storage.sqlite`, or PostgreSQL for a ``postgresql://`` URL, in
:mod:`payhooks.storage.postgresql`) is its business. No Flask, no receiver, no verify.
"""

from __future__ import annotations

from payhooks.storage.archives import ArchivedRow, ArchiveError, read_archive
from payhooks.storage.currencies import (
    MINOR_UNIT_EXPONENTS,
    UnknownCurrencyError,
    from_minor_units,
    minor_unit_exponent,
    to_minor_units,
)
from payhooks.storage.delivery_log import (
    DeliveryDetails,
    DeliveryFilter,
    LoggedDelivery,
    LogPage,
    RejectedDelivery,
)
from payhooks.storage.errors import (
    ConflictError,
    NotALedgerError,
    PostgresExtraMissingError,
    SchemaVersionError,
    StorageError,
    StorageUnavailableError,
    UnknownDeliveryError,
)
from payhooks.storage.ledger import (
    SYNCHRONOUS_MODES,
    Ledger,
)
from payhooks.storage.limits import MAX_AMOUNT_MINOR
from payhooks.storage.migrations import CopyReport, copy_ledger, migrate
from payhooks.storage.records import (
    DEFAULT_STATUS_MAP,
    MISMATCH_STATES,
    STATE_RANK,
    Flow,
    Outcome,
    PaymentState,
    ReconciliationState,
)
from payhooks.storage.retention import PruneReport
from payhooks.storage.rows import (
    FINISHED_DELIVERY_STATUSES,
    Delivery,
    DeliveryStatus,
    OwedSignal,
    PaymentKind,
    ReconciliationRow,
    RecordedOutcome,
    ReturnKind,
    SummaryRow,
)
from payhooks.storage.sqlite import SCHEMA_VERSION, backup_ledger
from payhooks.storage.story_rows import (
    CreationAttemptEvent,
    DeliveryEvent,
    EventKind,
    OutcomeEvent,
    PaymentStory,
    RegistrationEvent,
    ReturnEvent,
    SignalEvent,
    StoryEvent,
    SyncSightingEvent,
)
from payhooks.storage.sync_rows import (
    CreationAttempt,
    CreationFailure,
    CreationState,
    DriftKind,
    DriftRow,
    ListedTransaction,
    SyncRun,
    SyncStatus,
)
from payhooks.storage.targets import is_postgres_url, redacted

__all__ = [
    "DEFAULT_STATUS_MAP",
    "FINISHED_DELIVERY_STATUSES",
    "MAX_AMOUNT_MINOR",
    "MINOR_UNIT_EXPONENTS",
    "MISMATCH_STATES",
    "SCHEMA_VERSION",
    "STATE_RANK",
    "SYNCHRONOUS_MODES",
    "ArchiveError",
    "ArchivedRow",
    "ConflictError",
    "CopyReport",
    "CreationAttempt",
    "CreationAttemptEvent",
    "CreationFailure",
    "CreationState",
    "Delivery",
    "DeliveryDetails",
    "DeliveryEvent",
    "DeliveryFilter",
    "DeliveryStatus",
    "DriftKind",
    "DriftRow",
    "EventKind",
    "Flow",
    "Ledger",
    "ListedTransaction",
    "LogPage",
    "LoggedDelivery",
    "NotALedgerError",
    "Outcome",
    "OutcomeEvent",
    "OwedSignal",
    "PaymentKind",
    "PaymentState",
    "PaymentStory",
    "PostgresExtraMissingError",
    "PruneReport",
    "ReconciliationRow",
    "ReconciliationState",
    "RecordedOutcome",
    "RegistrationEvent",
    "RejectedDelivery",
    "ReturnEvent",
    "ReturnKind",
    "SchemaVersionError",
    "SignalEvent",
    "StorageError",
    "StorageUnavailableError",
    "StoryEvent",
    "SummaryRow",
    "SyncRun",
    "SyncSightingEvent",
    "SyncStatus",
    "UnknownCurrencyError",
    "UnknownDeliveryError",
    "backup_ledger",
    "copy_ledger",
    "from_minor_units",
    "is_postgres_url",
    "migrate",
    "minor_unit_exponent",
    "read_archive",
    "redacted",
    "to_minor_units",
]
