"""The ledger: expected payments, deliveries, outcomes, returns and reconciliation.

:class:`Ledger` is the one public face; the engine behind it (SQLite, in
:mod:`payhooks.storage.sqlite`, or PostgreSQL for a ``postgresql://`` URL, in
:mod:`payhooks.storage.postgresql`) is its business. No Flask, no receiver, no verify.

This face is what a merchant uses: the ledger, its model (rows, states, enums), its errors, the
money helpers, and migrate, copy, backup and the prune's archives. What people read (the
delivery log, a payment's story, finance, vitals) is :mod:`payhooks.storage.reads`; a name
only storage's own modules or tests use stays at its module's path. docs/api.md lists both
faces, and a test holds each ``__all__`` to its table.
"""

from __future__ import annotations

from payhooks.storage.archives import read_archive
from payhooks.storage.audit_ageing import DEFAULT_AUDIT_HORIZON
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
    ReadTimeLimitError,
    SchemaBehindError,
    StorageError,
    StorageUnavailableError,
    UnreadableRowError,
)
from payhooks.storage.health import (
    DEFAULT_HEALTH_LOCK_TIMEOUT_MS,
    DEFAULT_MIN_FREE_BYTES,
    LedgerHealth,
)
from payhooks.storage.ledger import SYNCHRONOUS_MODES, Ledger
from payhooks.storage.limits import DEFAULT_POOL_SIZE, MAX_AMOUNT_MINOR, MAX_POOL_SIZE
from payhooks.storage.migrations import copy_ledger, migrate
from payhooks.storage.records import (
    DEFAULT_STATUS_MAP,
    MISMATCH_STATES,
    Flow,
    Outcome,
    PaymentState,
    ReconciliationState,
)
from payhooks.storage.rows import (
    FINISHED_DELIVERY_STATUSES,
    Delivery,
    DeliveryStatus,
    PaymentKind,
    ReconciliationRow,
)
from payhooks.storage.signal_rows import ReceiverRun, SignalRound
from payhooks.storage.sqlite import backup_ledger
from payhooks.storage.sync_rows import (
    CreationAttempt,
    CreationState,
    DriftKind,
    DriftRow,
    ListedTransaction,
)
from payhooks.storage.targets import is_postgres_url, redacted

__all__ = [
    "DEFAULT_AUDIT_HORIZON",
    "DEFAULT_HEALTH_LOCK_TIMEOUT_MS",
    "DEFAULT_MIN_FREE_BYTES",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_STATUS_MAP",
    "FINISHED_DELIVERY_STATUSES",
    "MAX_AMOUNT_MINOR",
    "MAX_POOL_SIZE",
    "MINOR_UNIT_EXPONENTS",
    "MISMATCH_STATES",
    "SYNCHRONOUS_MODES",
    "ConflictError",
    "CreationAttempt",
    "CreationState",
    "Delivery",
    "DeliveryStatus",
    "DriftKind",
    "DriftRow",
    "Flow",
    "Ledger",
    "LedgerHealth",
    "ListedTransaction",
    "NotALedgerError",
    "Outcome",
    "PaymentKind",
    "PaymentState",
    "ReadTimeLimitError",
    "ReceiverRun",
    "ReconciliationRow",
    "ReconciliationState",
    "SchemaBehindError",
    "SignalRound",
    "StorageError",
    "StorageUnavailableError",
    "UnknownCurrencyError",
    "UnreadableRowError",
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
