"""``payhooks.storage``'s public names, pinned: growing the face is a decision, not an accident.

What merchants, finance and the other packages use: the ledger and what it takes and returns,
its errors, the money helpers. Everything else stays in its module.
"""

from __future__ import annotations

import importlib

PUBLIC = (
    "ConflictError",
    "CopyReport",
    "CreationAttempt",
    "CreationFailure",
    "CreationState",
    "DEFAULT_STATUS_MAP",
    "Delivery",
    "DeliveryStatus",
    "DriftKind",
    "DriftRow",
    "FINISHED_DELIVERY_STATUSES",
    "Flow",
    "Ledger",
    "ListedTransaction",
    "MAX_AMOUNT_MINOR",
    "MINOR_UNIT_EXPONENTS",
    "MISMATCH_STATES",
    "NotALedgerError",
    "Outcome",
    "OwedSignal",
    "PaymentKind",
    "PaymentState",
    "PostgresExtraMissingError",
    "ReconciliationRow",
    "ReconciliationState",
    "RecordedOutcome",
    "ReturnKind",
    "SCHEMA_VERSION",
    "STATE_RANK",
    "SYNCHRONOUS_MODES",
    "SchemaVersionError",
    "StorageError",
    "StorageUnavailableError",
    "SummaryRow",
    "SyncRun",
    "SyncStatus",
    "UnknownCurrencyError",
    "UnknownDeliveryError",
    "copy_ledger",
    "from_minor_units",
    "is_postgres_url",
    "migrate",
    "minor_unit_exponent",
    "redacted",
    "to_minor_units",
)


def test_the_storage_package_exports_exactly_its_public_names() -> None:
    package = importlib.import_module("payhooks.storage")
    assert tuple(sorted(package.__all__)) == PUBLIC
    for name in PUBLIC:
        assert getattr(package, name) is not None
