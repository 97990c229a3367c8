"""``payhooks.storage``'s public names, pinned: growing the face is a decision, not an accident.

What merchants, finance and the other packages use: the ledger and what it takes and returns,
its errors, the money helpers. Everything else stays in its module. ``Ledger``'s own face is
merchants' and finance's; the receiver's, the signals' and the service's writes are parts
composed behind it.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from payhooks.storage import Ledger

PUBLIC = (
    "ACCEPTED_DELIVERY_STATUSES",
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
    "DEFAULT_AUDIT_HORIZON",
    "DEFAULT_HEALTH_LOCK_TIMEOUT_MS",
    "DEFAULT_MIN_FREE_BYTES",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_STATUS_MAP",
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
    "FAILED_DELIVERY_STATUSES",
    "FINISHED_DELIVERY_STATUSES",
    "FailingSignal",
    "Figure",
    "FilteredTotal",
    "FinanceFilter",
    "FinancePage",
    "Flow",
    "HEALTH_CODES",
    "Ledger",
    "LedgerHealth",
    "ListedTransaction",
    "LogPage",
    "LoggedDelivery",
    "MAX_AMOUNT_MINOR",
    "MAX_POOL_SIZE",
    "MINOR_UNIT_EXPONENTS",
    "MISMATCH_STATES",
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
    "SCHEMA_VERSION",
    "STATE_RANK",
    "SYNCHRONOUS_MODES",
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
    "UNEXPECTED_KIND",
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
)


def test_the_storage_package_exports_exactly_its_public_names() -> None:
    package = importlib.import_module("payhooks.storage")
    assert tuple(sorted(package.__all__)) == PUBLIC
    for name in PUBLIC:
        assert getattr(package, name) is not None


#: ``Ledger``'s public attributes: merchants' and finance's, and the four composed parts.
LEDGER_FACE = (
    "close",
    "console",
    "database",
    "engine",
    "expect_subscription",
    "expect_transaction",
    "finance",
    "health",
    "prune",
    "read_time_limit",
    "receiver",
    "reconcile",
    "restore_pruned",
    "row",
    "schema_version",
    "service",
    "signals",
    "state",
    "story",
    "summary",
    "synchronous",
    "transaction",
    "vitals",
)


def test_the_ledger_face_is_merchants_and_finances_with_each_part_behind_it(
    tmp_path: Path,
) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        assert tuple(name for name in dir(ledger) if not name.startswith("_")) == LEDGER_FACE
        assert callable(ledger.receiver.record_delivery)
