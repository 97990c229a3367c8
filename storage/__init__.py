"""The ledger: expected payments, deliveries, outcomes, returns and reconciliation.

:class:`Ledger` is the one public face; the engine behind it (SQLite, in
:mod:`payhooks.storage.sqlite`, or PostgreSQL for a ``postgresql://`` URL, in
:mod:`payhooks.storage.postgresql`) is its business. No Flask, no receiver, no verify.
"""

from __future__ import annotations

from payhooks.storage.archive_leftovers import ArchiveLeftovers
from payhooks.storage.archives import ArchivedRow, ArchiveError, read_archive
from payhooks.storage.audit_ageing import DEFAULT_AUDIT_HORIZON, AuditAgeing
from payhooks.storage.currencies import (
    MINOR_UNIT_EXPONENTS,
    UnknownCurrencyError,
    from_minor_units,
    minor_unit_exponent,
    to_minor_units,
)
from payhooks.storage.errors import (
    ConflictError,
    NotALedgerError,
    PostgresExtraMissingError,
    ReadTimeLimitError,
    SchemaBehindError,
    SchemaVersionError,
    StorageError,
    StorageUnavailableError,
    UnknownDeliveryError,
    UnreadableRowError,
)
from payhooks.storage.health import (
    DEFAULT_HEALTH_LOCK_TIMEOUT_MS,
    DEFAULT_MIN_FREE_BYTES,
    HEALTH_CODES,
    LedgerHealth,
)
from payhooks.storage.ledger import (
    SYNCHRONOUS_MODES,
    Ledger,
)
from payhooks.storage.limits import DEFAULT_POOL_SIZE, MAX_AMOUNT_MINOR, MAX_POOL_SIZE
from payhooks.storage.migrations import CopyReport, copy_ledger, migrate
from payhooks.storage.reads.audit import AuditEntry
from payhooks.storage.reads.audit_refusals import RefusalCount
from payhooks.storage.reads.delivery_log import (
    DeliveryDetails,
    DeliveryFilter,
    LoggedDelivery,
    LogPage,
    RejectedDelivery,
    RejectedDetails,
)
from payhooks.storage.reads.exception_queue import MismatchCount
from payhooks.storage.reads.exception_reviews import ExceptionReview, ReviewStatus
from payhooks.storage.reads.finance import bucket_size_for
from payhooks.storage.reads.finance_rows import (
    UNEXPECTED_KIND,
    BucketSize,
    ChartBucket,
    Figure,
    FilteredTotal,
    FinanceFilter,
    FinancePage,
    PeriodFigures,
    PeriodOverview,
)
from payhooks.storage.reads.log_search import DeliveryErrorCode
from payhooks.storage.reads.story_rows import (
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
from payhooks.storage.reads.vitals import (
    ACCEPTED_DELIVERY_STATUSES,
    FAILED_DELIVERY_STATUSES,
    ErrorCause,
    Vitals,
    WindowCounts,
)
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
from payhooks.storage.signal_rows import FailingSignal, ReceiverRun, SignalRound, SignalRun
from payhooks.storage.sqlite import SCHEMA_VERSION, backup_ledger
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
    "ACCEPTED_DELIVERY_STATUSES",
    "DEFAULT_AUDIT_HORIZON",
    "DEFAULT_HEALTH_LOCK_TIMEOUT_MS",
    "DEFAULT_MIN_FREE_BYTES",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_STATUS_MAP",
    "FAILED_DELIVERY_STATUSES",
    "FINISHED_DELIVERY_STATUSES",
    "HEALTH_CODES",
    "MAX_AMOUNT_MINOR",
    "MAX_POOL_SIZE",
    "MINOR_UNIT_EXPONENTS",
    "MISMATCH_STATES",
    "SCHEMA_VERSION",
    "STATE_RANK",
    "SYNCHRONOUS_MODES",
    "UNEXPECTED_KIND",
    "ArchiveError",
    "ArchiveLeftovers",
    "ArchivedRow",
    "AuditAgeing",
    "AuditEntry",
    "BucketSize",
    "ChartBucket",
    "ConflictError",
    "CopyReport",
    "CreationAttempt",
    "CreationAttemptEvent",
    "CreationFailure",
    "CreationState",
    "Delivery",
    "DeliveryDetails",
    "DeliveryErrorCode",
    "DeliveryEvent",
    "DeliveryFilter",
    "DeliveryStatus",
    "DriftKind",
    "DriftRow",
    "ErrorCause",
    "EventKind",
    "ExceptionReview",
    "FailingSignal",
    "Figure",
    "FilteredTotal",
    "FinanceFilter",
    "FinancePage",
    "Flow",
    "Ledger",
    "LedgerHealth",
    "ListedTransaction",
    "LogPage",
    "LoggedDelivery",
    "MismatchCount",
    "NotALedgerError",
    "Outcome",
    "OutcomeEvent",
    "OwedSignal",
    "PaymentKind",
    "PaymentState",
    "PaymentStory",
    "PeriodFigures",
    "PeriodOverview",
    "PostgresExtraMissingError",
    "PruneReport",
    "ReadTimeLimitError",
    "ReceiverRun",
    "ReconciliationRow",
    "ReconciliationState",
    "RecordedOutcome",
    "RefusalCount",
    "RegistrationEvent",
    "RejectedDelivery",
    "RejectedDetails",
    "ReturnEvent",
    "ReturnKind",
    "ReviewStatus",
    "SchemaBehindError",
    "SchemaVersionError",
    "SignalEvent",
    "SignalRound",
    "SignalRun",
    "StorageError",
    "StorageUnavailableError",
    "StoryEvent",
    "SummaryRow",
    "SyncRun",
    "SyncSightingEvent",
    "SyncStatus",
    "UnknownCurrencyError",
    "UnknownDeliveryError",
    "UnreadableRowError",
    "Vitals",
    "WindowCounts",
    "backup_ledger",
    "bucket_size_for",
    "copy_ledger",
    "from_minor_units",
    "is_postgres_url",
    "migrate",
    "minor_unit_exponent",
    "read_archive",
    "redacted",
    "to_minor_units",
]
