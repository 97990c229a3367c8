"""The ledger's schema on SQLite, written out: its tables, indexes and views.

One migration per release, recorded by name in ``_sqlite_migrations`` (set ``payhooks``, through
``sqlite_utils.Migrations``); the *schema version* is how many are applied. Opening a current
file costs one small query. When it is behind, the migrations run under ``BEGIN IMMEDIATE``:
the first of several processes opening a new file takes the write lock and migrates, the
others wait on the busy timeout, find nothing left to do and go on. CHANGELOG.md lists what
each release's migration changes.

Table and view names, and the state names, are a contract (docs/reconciliation.md): finance
tools read them directly. Times are UTC ISO 8601 text (:mod:`payhooks.storage.times`); money is
``INTEGER`` minor units beside the amount exactly as sent (``TEXT``). PostgreSQL's schema, with
the same names, is :mod:`payhooks.storage.postgresql.schema`, written out in its own spelling.
No trigger computes anything: a payment's reconciliation row is computed in Python
(:mod:`payhooks.storage.rules`) and stored by the transaction that changes one of its inputs.
The only triggers refuse to change ``audit_log`` (append-only, but for what ``payhooks prune``
archived under a permit) and ``audit_prune_permits``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from sqlite_utils import Database, Migrations

from payhooks.storage.errors import SchemaVersionError
from payhooks.storage.sqlite.schema_rollup import ROLLUP_TABLES
from payhooks.storage.views import RECONCILIATION_VIEW_SQL, SYNC_DRIFT_VIEW_SQL

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "TABLES", "migrate", "schema_version"]

#: The migration set; its name is what ``_sqlite_migrations.migration_set`` holds.
MIGRATIONS = Migrations("payhooks")

# The names registered in MIGRATIONS, in order (Migrations keeps its list private).
_MIGRATION_NAMES: list[str] = []

_DELIVERY_STATUSES = (
    "'received', 'processed', 'duplicate', 'malformed_json', 'invalid_payload', "
    "'processing_error', 'conflicting_outcome'"
)

#: The 0.1.0 schema, in order: every table and index.
TABLES = (
    """
    CREATE TABLE payments (
        external_identifier TEXT NOT NULL PRIMARY KEY
            CHECK (length(external_identifier) BETWEEN 1 AND 64),
        kind TEXT NOT NULL CHECK (kind IN ('transaction', 'subscription')),
        amount_minor INTEGER NOT NULL CHECK (amount_minor BETWEEN 0 AND 1000000000000000),
        currency TEXT NOT NULL CHECK (length(currency) = 3),
        plan_amount_minor INTEGER CHECK (plan_amount_minor BETWEEN 0 AND 1000000000000000),
        created_at TEXT NOT NULL,
        description TEXT,
        metadata TEXT,
        CHECK ((kind = 'subscription') = (plan_amount_minor IS NOT NULL))
    )""",
    # A rowid table (not WITHOUT ROWID): the rowid orders registrations as they committed, the
    # finance rollup's watermark (payments are never deleted, so a rowid is never reused).
    # Payments registered in a period (the console's finance page).
    "CREATE INDEX payments_created ON payments (created_at)",
    """
    CREATE TABLE creation_attempts (
        id INTEGER PRIMARY KEY,
        external_identifier TEXT NOT NULL REFERENCES payments (external_identifier),
        kind TEXT NOT NULL CHECK (kind IN ('transaction', 'subscription')),
        idempotency_key TEXT,
        -- sending: asked, no answer yet; then created, refused or uncertain (answer lost).
        state TEXT NOT NULL CHECK (state IN ('sending', 'created', 'refused', 'uncertain')),
        service_id TEXT,
        http_status INTEGER,
        error_code TEXT,
        error TEXT,
        started_at TEXT NOT NULL,
        finished_at TEXT
    )""",
    "CREATE INDEX creation_attempts_identifier ON creation_attempts (external_identifier, id)",
    f"""
    CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY,
        dedupe_key TEXT NOT NULL UNIQUE,
        -- The delivery whose dedupe_key this one arrived under with other bytes; this one is
        -- then stored under '<dedupe_key>#<body_sha256>'.
        reused_key_of INTEGER REFERENCES deliveries (id),
        received_at TEXT NOT NULL,
        headers TEXT NOT NULL,
        body BLOB NOT NULL,
        body_sha256 TEXT NOT NULL CHECK (length(body_sha256) = 64),
        status TEXT NOT NULL DEFAULT 'received' CHECK (status IN ({_DELIVERY_STATUSES})),
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 1,
        outcome_id INTEGER REFERENCES outcomes (id),
        -- The payment it is about, when known: its outcome's, or the one a refused body names.
        external_identifier TEXT,
        signal_error TEXT,
        updated_at TEXT NOT NULL,
        -- payhooks prune: when body and headers were archived and emptied, and the archive's
        -- file name (body_sha256 stays, to check a body read back from it).
        pruned_at TEXT,
        pruned_into TEXT
    )""",
    "CREATE INDEX deliveries_status ON deliveries (status, id) WHERE status <> 'processed'",
    """
    CREATE INDEX deliveries_problems ON deliveries (external_identifier, id)
    WHERE status IN ('malformed_json', 'invalid_payload', 'conflicting_outcome')""",
    # A payment's deliveries, newest first (payhooks deliveries list); none before it is known.
    "CREATE INDEX deliveries_identifier ON deliveries (external_identifier, id) "
    "WHERE external_identifier IS NOT NULL",
    # Time windows: the delivery log's (1h, 24h, 7d, --since/--until) and the health
    # figures' (the last hour, the last day), read exactly whatever order rows were stored in.
    "CREATE INDEX deliveries_received ON deliveries (received_at)",
    """
    CREATE TABLE outcomes (
        id INTEGER PRIMARY KEY,
        delivery_id INTEGER NOT NULL REFERENCES deliveries (id),
        transaction_id TEXT NOT NULL,
        external_identifier TEXT NOT NULL,
        flow TEXT NOT NULL,
        provider TEXT,
        provider_reference TEXT,
        provider_status TEXT,
        payment_status TEXT NOT NULL,
        state TEXT NOT NULL,
        state_rank INTEGER NOT NULL,
        amount TEXT NOT NULL,
        currency TEXT NOT NULL CHECK (length(currency) = 3),
        amount_minor INTEGER NOT NULL CHECK (amount_minor BETWEEN 0 AND 1000000000000000),
        paid_at TEXT NOT NULL,
        extra TEXT NOT NULL DEFAULT '{}',
        recorded_at TEXT NOT NULL,
        UNIQUE (transaction_id, payment_status)
    )""",
    "CREATE INDEX outcomes_identifier ON outcomes (external_identifier)",
    # Money paid in a period (the console's finance page): partial, and holding what the sums
    # read (its state too, or SQLite reads the table to check it), so a sum never reads the table.
    """
    CREATE INDEX outcomes_paid ON outcomes (paid_at, currency, amount_minor, state)
    WHERE state = 'succeeded'""",
    """
    CREATE TABLE owed_signals (
        id INTEGER PRIMARY KEY,
        outcome_id INTEGER NOT NULL REFERENCES outcomes (id),
        delivery_id INTEGER NOT NULL REFERENCES deliveries (id),
        signal TEXT NOT NULL,
        position INTEGER NOT NULL,
        reconciliation TEXT NOT NULL,
        owed_at TEXT NOT NULL,
        -- A sender's claim: nobody else sends it before this time.
        claimed_until TEXT,
        sent_at TEXT,
        error TEXT,
        -- Rounds of its receivers run so far, the last one's start, when the next is due
        -- (a receiver raised: backoff), and when it was parked (the last round raised).
        attempts INTEGER NOT NULL DEFAULT 0,
        attempted_at TEXT,
        next_attempt_at TEXT,
        parked_at TEXT,
        -- A person marked it handled without running it (sent_at set with it).
        dismissed_at TEXT,
        -- A first round in which every receiver returned, compactly: "RECEIVER:MS ..." with
        -- each receiver's id in signal_receivers (a clean delivery writes a few bytes more);
        -- any other round's runs are rows of signal_runs.
        ran TEXT,
        UNIQUE (outcome_id, signal)
    )""",
    "CREATE INDEX owed_signals_unsent ON owed_signals (outcome_id) WHERE sent_at IS NULL",
    # The signals a person must see: a receiver raised and they are still owed (few).
    "CREATE INDEX owed_signals_failing ON owed_signals (parked_at, next_attempt_at) "
    "WHERE sent_at IS NULL AND attempts > 0",
    # The receivers' stable names, numbered once, for owed_signals.ran.
    """
    CREATE TABLE signal_receivers (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE
    )""",
    # Each receiver's run in a round that was not a clean first one: retries, raises.
    """
    CREATE TABLE signal_runs (
        id INTEGER PRIMARY KEY,
        owed_signal_id INTEGER NOT NULL REFERENCES owed_signals (id),
        receiver TEXT NOT NULL,
        started_at TEXT NOT NULL,
        duration_ms INTEGER NOT NULL,
        -- What it raised; NULL: it returned.
        error TEXT
    )""",
    "CREATE INDEX signal_runs_signal ON signal_runs (owed_signal_id, id)",
    # The runs that raised, by time: the health figures count the last day's.
    "CREATE INDEX signal_runs_errors ON signal_runs (started_at) WHERE error IS NOT NULL",
    """
    CREATE TABLE payment_states (
        external_identifier TEXT NOT NULL PRIMARY KEY,
        kind TEXT,
        state TEXT NOT NULL,
        drift TEXT,
        currency TEXT NOT NULL,
        expected_amount_minor INTEGER,
        received_currency TEXT,
        received_amount_minor INTEGER,
        refunded_amount_minor INTEGER NOT NULL,
        charged_back_amount_minor INTEGER NOT NULL,
        net_amount_minor INTEGER,
        opened_at TEXT NOT NULL,
        lifecycle_state TEXT,
        periods_paid INTEGER NOT NULL,
        transaction_ids TEXT NOT NULL,
        unknown_outcomes INTEGER NOT NULL,
        last_outcome_at TEXT,
        refused_deliveries INTEGER NOT NULL,
        conflicting_deliveries INTEGER NOT NULL,
        latest_problem TEXT,
        home_received_amount_minor INTEGER NOT NULL DEFAULT 0,
        updated_at TEXT NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX payment_states_order ON payment_states ((kind IS NULL), external_identifier)",
    # The unexpected rows by when they were opened (the finance page's period): few, and written
    # only for a payment nobody registered.
    "CREATE INDEX payment_states_unexpected ON payment_states (opened_at) WHERE kind IS NULL",
    # The mismatched payments alone (the health figures count them, and those changed lately).
    """
    CREATE INDEX payment_states_mismatches ON payment_states (state, updated_at)
    WHERE state IN ('amount_mismatch', 'currency_mismatch', 'duplicate_payment', 'unexpected',
        'unknown_status')""",
    # The mismatched payments by when they were opened: the exceptions queue lists the oldest.
    """
    CREATE INDEX payment_states_mismatches_opened ON payment_states (opened_at)
    WHERE state IN ('amount_mismatch', 'currency_mismatch', 'duplicate_payment', 'unexpected',
        'unknown_status')""",
    # The rows with drift alone: the sync_drift view finds them without reading every payment.
    "CREATE INDEX payment_states_drift ON payment_states (drift) WHERE drift IS NOT NULL",
    """
    CREATE TABLE rejected_deliveries (
        id INTEGER PRIMARY KEY,
        received_at TEXT NOT NULL,
        remote_addr TEXT,
        reason TEXT NOT NULL,
        body BLOB NOT NULL,
        body_size INTEGER NOT NULL
    )""",
    # The refused requests' windows (the console's, --since/--until) and the health figures'.
    "CREATE INDEX rejected_deliveries_received ON rejected_deliveries (received_at)",
    """
    CREATE TABLE returns (
        id INTEGER PRIMARY KEY,
        external_identifier TEXT NOT NULL,
        returned_at TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('return', 'cancel')),
        result_code TEXT
    )""",
    "CREATE INDEX returns_external_identifier ON returns (external_identifier, returned_at)",
    """
    CREATE TABLE sync_runs (
        id INTEGER PRIMARY KEY,
        started_at TEXT NOT NULL,
        -- Payments registered before this and still unseen are missing_at_service, once the
        -- run is complete: its start minus the configured age.
        expected_before TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'interrupted', 'complete')),
        -- The next_cursor of the last page committed: where a resumed run goes on.
        next_cursor TEXT,
        pages INTEGER NOT NULL DEFAULT 0,
        items INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        updated_at TEXT NOT NULL,
        finished_at TEXT
    )""",
    """
    CREATE TABLE service_transactions (
        transaction_id TEXT NOT NULL PRIMARY KEY,
        external_identifier TEXT NOT NULL,
        -- The status string exactly as the service listed it.
        status TEXT NOT NULL,
        -- What the sync's status map made of it ('unknown' when the map lacks it).
        state TEXT NOT NULL,
        state_rank INTEGER NOT NULL,
        currency TEXT,
        amount_minor INTEGER,
        first_seen_at TEXT NOT NULL,
        last_seen_at TEXT NOT NULL,
        sync_run INTEGER NOT NULL REFERENCES sync_runs (id),
        -- How it disagrees with the notifications (payhooks.storage.rules), and the state
        -- they gave it; both kept by the transaction that changes either side.
        drift TEXT,
        ledger_state TEXT
    )""",
    "CREATE INDEX service_transactions_identifier ON service_transactions (external_identifier)",
    # The rows a sync run touched, for the finance rollup's refresh (sync is not the receiver).
    "CREATE INDEX service_transactions_run ON service_transactions (sync_run)",
    """
    CREATE INDEX service_transactions_drift ON service_transactions (drift)
    WHERE drift IS NOT NULL""",
    """
    CREATE TABLE sync_unstorable_items (
        id INTEGER PRIMARY KEY,
        sync_run INTEGER NOT NULL REFERENCES sync_runs (id),
        -- The item's id and identifier where the ledger can store them; never the bad value.
        transaction_id TEXT,
        external_identifier TEXT,
        reason TEXT NOT NULL,
        seen_at TEXT NOT NULL
    )""",
    """
    CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        who TEXT NOT NULL,
        role TEXT NOT NULL,
        action TEXT NOT NULL,
        target TEXT,
        note TEXT,
        -- JSON text: a bulk action's filter and counts.
        detail TEXT NOT NULL,
        result TEXT NOT NULL
    )""",
    # A record's own entries, for its page (a payment's notes).
    "CREATE INDEX audit_log_target ON audit_log (target, id)",
    # What payhooks prune archived of audit_log before it deleted it: the one permit to delete
    # (audit_log_no_delete), kept as the record of each ageing; append-only too.
    """
    CREATE TABLE audit_prune_permits (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        -- Entries with an id up to this and a time before the horizon may be deleted.
        up_to_id INTEGER NOT NULL,
        horizon TEXT NOT NULL,
        archive TEXT NOT NULL,
        archive_sha256 TEXT NOT NULL,
        entries INTEGER NOT NULL
    )""",
    """
    CREATE TRIGGER audit_prune_permits_no_update BEFORE UPDATE ON audit_prune_permits
    BEGIN SELECT RAISE(ABORT, 'audit_prune_permits is append-only'); END""",
    """
    CREATE TRIGGER audit_prune_permits_no_delete BEFORE DELETE ON audit_prune_permits
    BEGIN SELECT RAISE(ABORT, 'audit_prune_permits is append-only'); END""",
    # Append-only: payhooks only inserts and reads; these refuse everything else, but for the
    # entries the newest permit covers (archived by payhooks prune).
    """
    CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END""",
    """
    CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    WHEN NOT EXISTS (
        SELECT 1 FROM audit_prune_permits AS p
        WHERE p.id = (SELECT MAX(id) FROM audit_prune_permits)
        AND OLD.id <= p.up_to_id AND OLD.at < p.horizon
    )
    BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END""",
    # Refused console actions, counted per person, action, code and minute: one row each.
    """
    CREATE TABLE audit_refusals (
        id INTEGER PRIMARY KEY,
        -- The start of the minute (UTC ISO 8601, as every time) the refusals fell in.
        minute TEXT NOT NULL,
        who TEXT NOT NULL,
        role TEXT NOT NULL,
        action TEXT NOT NULL,
        code TEXT NOT NULL,
        times INTEGER NOT NULL,
        -- The first refused request's target, escaped and cut to 100 characters.
        first_target TEXT,
        last_at TEXT NOT NULL,
        UNIQUE (minute, who, role, action, code)
    )""",
    """
    CREATE TABLE exception_reviews (
        external_identifier TEXT NOT NULL PRIMARY KEY,
        status TEXT NOT NULL CHECK (status IN ('open', 'acknowledged', 'resolved', 'ignored')),
        -- The reconciliation state it was reviewed in: another state shows it open again.
        reviewed_state TEXT NOT NULL,
        note TEXT,
        who TEXT NOT NULL,
        reviewed_at TEXT NOT NULL
    ) WITHOUT ROWID""",
    *ROLLUP_TABLES,
    RECONCILIATION_VIEW_SQL,
    SYNC_DRIFT_VIEW_SQL,
)


def _migration(name: str) -> Callable[[Callable[[Database], None]], Callable[[Database], None]]:
    """Register a migration under ``name``; names are recorded in the file, so never rename."""

    def register(function: Callable[[Database], None]) -> Callable[[Database], None]:
        _MIGRATION_NAMES.append(name)
        return MIGRATIONS(name=name)(function)

    return register


@_migration("0.1.0")
def _release_0_1_0(db: Database) -> None:
    """The first release's schema."""
    for statement in TABLES:
        db.execute(statement)


#: The schema version this code writes: the number of migrations it knows.
SCHEMA_VERSION = len(_MIGRATION_NAMES)


def schema_version(db: Database) -> int:
    """How many payhooks migrations the file has; raises when it has some this code lacks."""
    try:
        rows = db.conn.execute(
            f"SELECT name FROM {Migrations.migrations_table} WHERE migration_set = ?",  # noqa: S608
            (MIGRATIONS.name,),
        ).fetchall()
    except sqlite3.OperationalError as err:
        if "no such table" in str(err):
            return 0
        raise
    unknown = sorted(name for (name,) in rows if name not in _MIGRATION_NAMES)
    if unknown:
        raise SchemaVersionError(
            f"The database has migrations this payhooks does not know ({', '.join(unknown)}); "
            "it was written by another version (a newer one, or a build from before 0.1.0)."
        )
    return len(rows)


def migrate(db: Database) -> int:
    """Bring the file to :data:`SCHEMA_VERSION`, safely against other processes doing the same.

    Cheap when the file is current. Otherwise every pending migration and its record are one
    ``BEGIN IMMEDIATE`` transaction, re-checked under the lock. Returns the version.
    """
    if schema_version(db) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    if db.conn.in_transaction:  # the caller's own transaction: migrate inside it
        with db.atomic():
            MIGRATIONS.apply(db)
        return schema_version(db)
    db.execute("BEGIN IMMEDIATE")
    try:
        MIGRATIONS.apply(db)
        version = schema_version(db)
        db.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise
    return version
