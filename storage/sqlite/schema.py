"""The ledger's schema on SQLite: its tables, its forward migrations, and the derived views and
triggers made anew after each.

Migrations are ``sqlite_utils.Migrations``: each applied one is recorded by name in
``_sqlite_migrations`` (set ``payhooks``), and the *schema version* is how many are applied.
Opening a ledger whose file is current costs one small query. When it is behind, the
migrations run under ``BEGIN IMMEDIATE``: the first of several processes opening a new file at
once takes the write lock and migrates, the others wait on the busy timeout, re-read the
version under the lock, find nothing left to do and go on.

Table and view names and the state names are a contract (docs/reconciliation.md): finance
tools read them directly. Times are UTC ISO 8601 text (:mod:`payhooks.storage.times`); money is
``INTEGER`` minor units beside the amount exactly as sent (``TEXT``).

The statements are SQLite's (``WITHOUT ROWID``, rebuilding a table to change a ``CHECK``), and
so is ``sqlite_utils.Migrations``. PostgreSQL's schema, with the same table, column and view
names and the same migrations by name, is :mod:`payhooks.storage.postgresql.schema`: a new
migration here is one function there too.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable

from sqlite_utils import Database, Migrations

from payhooks.storage.errors import SchemaVersionError
from payhooks.storage.listed_identifiers import LISTED_NAMED_SQL, LISTED_TABLE_SQL, listed_view_sql
from payhooks.storage.owed_signals import COLUMNS as SIGNALS_COLUMNS
from payhooks.storage.owed_signals import VIEW_SQL as OWED_SIGNALS_VIEW_SQL
from payhooks.storage.reconciliation import RECONCILIATION_VIEW_SQL
from payhooks.storage.rollup import (
    IDENTIFIERS_INDEX_SQL,
    IDENTIFIERS_TABLE_SQL,
    ROLLUP_TRIGGERS,
    TRANSACTIONS_TABLE_SQL,
    identifiers_view_sql,
    rebuild_sql,
    transactions_view_sql,
)
from payhooks.storage.service_transactions import (
    DRIFT_VIEW_SQL,
    RUNS_TABLE_SQL,
    TABLE_INDEX_SQL,
    TABLE_SQL,
)
from payhooks.storage.sqlite.past_schemas import (
    DELIVERIES_STATUS_INDEX,
    DELIVERIES_V2,
    INITIAL_SCHEMA,
    MOVE_OWED_SIGNALS,
    MOVE_SIGNALS_TO_DELIVERIES,
    OWED_SIGNALS_V5,
    OWED_SIGNALS_V7_INDEX,
    PUT_BACK_V1_DELIVERIES,
    SET_ASIDE_V1_DELIVERIES,
    UNMOVABLE_OWED_SIGNALS,
    V2_DELIVERY_STATUSES,
    V9_INDEXES,
    refuse_unmovable_owed_signals,
)

__all__ = [
    "INITIAL_SCHEMA",
    "MIGRATIONS",
    "OWED_SIGNALS_V5",
    "SCHEMA_VERSION",
    "TRIGGERS",
    "V2_DELIVERY_STATUSES",
    "VIEWS",
    "create_views",
    "migrate",
    "schema_version",
]

#: The migration set; its name is what ``_sqlite_migrations.migration_set`` holds.
MIGRATIONS = Migrations("payhooks")

# The names registered in MIGRATIONS, in order (Migrations keeps its list private).
_MIGRATION_NAMES: list[str] = []


def _migration(name: str) -> Callable[[Callable[[Database], None]], Callable[[Database], None]]:
    """Register a migration under ``name``; names are recorded in the file, so never rename."""

    def register(function: Callable[[Database], None]) -> Callable[[Database], None]:
        _MIGRATION_NAMES.append(name)
        return MIGRATIONS(name=name)(function)

    return register


@_migration("0001_initial_schema")
def _initial_schema(db: Database) -> None:
    """Every table and index of the first schema (the view: see :func:`create_views`)."""
    for statement in INITIAL_SCHEMA:
        db.execute(statement)


def _sha256_hex(body: bytes | None) -> str | None:
    return None if body is None else hashlib.sha256(body).hexdigest()


@_migration("0002_delivery_body_hash")
def _delivery_body_hash(db: Database) -> None:
    """``deliveries`` gains ``body_sha256`` (so a reused ``dedupe_key`` with other bytes is
    told apart), ``reused_key_of``, and the status ``conflicting_outcome``.

    SQLite cannot change a CHECK constraint in place, so the table is rebuilt. Its rows are set
    aside in a temporary table, the old table dropped, the new one created and the rows put
    back. ``outcomes`` refers to ``deliveries``, and ``PRAGMA foreign_keys`` cannot be switched
    off inside a transaction (this one may be the caller's): with the checks deferred, dropping
    the table counts its referring outcomes as violations and putting the rows back counts them
    off again, so the transaction commits with every reference whole. The rows pass through
    the temporary table once: a one-time cost of about twice the table's size in temporary
    storage.
    """
    conn = db.conn
    conn.create_function("payhooks_sha256", 1, _sha256_hex, deterministic=True)
    deferred = conn.execute("PRAGMA defer_foreign_keys").fetchone()[0]
    conn.execute("PRAGMA defer_foreign_keys = ON")
    try:
        conn.execute("DROP TABLE IF EXISTS temp.payhooks_deliveries_v1")
        conn.execute(SET_ASIDE_V1_DELIVERIES)
        conn.execute("DROP TABLE main.deliveries")
        conn.execute(DELIVERIES_V2)
        conn.execute(PUT_BACK_V1_DELIVERIES)
        conn.execute("DROP TABLE temp.payhooks_deliveries_v1")
        conn.execute(DELIVERIES_STATUS_INDEX)
    finally:
        if not deferred:
            conn.execute("PRAGMA defer_foreign_keys = OFF")


@_migration("0003_reconciliation_reads_the_latest_outcome")
def _reconciliation_reads_the_latest_outcome(db: Database) -> None:
    """The reconciliation rules read the latest outcome: an unknown code after a success is
    ``unknown_status``, a retry after a failure or cancellation is ``pending`` again.

    Nothing to change in the tables: the view is created again by :func:`migrate` after any
    migration. This one records that files before it have the older view.
    """


@_migration("0004_rollup_tables")
def _rollup_tables(db: Database) -> None:
    """``transactions`` and ``identifiers``: what the outcomes say per transaction and per
    identifier, which the reconciliation reads instead of every outcome
    (:mod:`payhooks.storage.rollup`). Filled, with their triggers, by :func:`migrate`."""
    db.execute(TRANSACTIONS_TABLE_SQL)
    db.execute(IDENTIFIERS_TABLE_SQL)
    db.execute(IDENTIFIERS_INDEX_SQL)


@_migration("0005_owed_signals")
def _owed_signals(db: Database) -> None:
    """``owed_signals``: the signals each new outcome owes the merchant's code, kept until
    they are sent (a table until 0007)."""
    for statement in OWED_SIGNALS_V5:
        db.execute(statement)


@_migration("0006_service_transactions")
def _service_transactions(db: Database) -> None:
    """What ``payhooks sync`` reads from the service's transaction list (``sync_runs``,
    ``service_transactions``: :mod:`payhooks.storage.service_transactions`), and
    ``payments.creation``: ``refused`` or ``uncertain`` when creating it at the service failed
    (``Ledger.mark_creation_failed``), with why and when."""
    db.execute(RUNS_TABLE_SQL)
    db.execute(TABLE_SQL)
    db.execute(TABLE_INDEX_SQL)
    db.execute(
        "ALTER TABLE payments ADD COLUMN creation TEXT CHECK (creation IN ('refused', 'uncertain'))"
    )
    db.execute("ALTER TABLE payments ADD COLUMN creation_error TEXT")
    db.execute("ALTER TABLE payments ADD COLUMN creation_failed_at TEXT")


@_migration("0007_signals_on_outcomes")
def _signals_on_outcomes(db: Database) -> None:
    """The owed signals move onto their outcome's row (:mod:`payhooks.storage.owed_signals`):
    ``owed_signals`` becomes a view, ``outcomes_signals_owed`` indexes what is still owed, and
    ``outcomes_delivery`` goes (nothing looks outcomes up by delivery but the owed signals,
    which have their own index, and deliveries are never deleted). Each delivery writes three
    b-trees fewer (issue 17).

    The rollup trigger on updates is dropped first: it is made anew by :func:`create_views`
    (on the outcome's own columns only, so marking signals sent does not recompute the
    rollups), and the rows moved here must not recompute them one by one.
    """
    db.execute("DROP TRIGGER IF EXISTS outcomes_rollup_update")
    for column in SIGNALS_COLUMNS:
        db.execute(f"ALTER TABLE outcomes ADD COLUMN {column} TEXT")
    db.execute(MOVE_OWED_SIGNALS)
    db.execute("DROP TABLE owed_signals")
    db.execute("DROP INDEX IF EXISTS outcomes_delivery")
    db.execute(OWED_SIGNALS_V7_INDEX)


@_migration("0008_rollups_by_transaction_key")
def _rollups_by_transaction_key(db: Database) -> None:
    """``outcomes_reconciliation`` goes (issue 17: 1.4 WAL pages a delivery); the rollups' triggers
    find a transaction's outcomes by its unique key, and a refill of the rollups sorts them."""
    db.execute("DROP INDEX IF EXISTS outcomes_reconciliation")


@_migration("0009_signals_on_deliveries")
def _signals_on_deliveries(db: Database) -> None:
    """The owed signals move from each outcome to the delivery that recorded it
    (:mod:`payhooks.storage.owed_signals`), and ``deliveries_status`` leaves out ``processed``:
    the receiver then writes each row of a delivery once (issue 17)."""
    for column in SIGNALS_COLUMNS:
        db.execute(f"ALTER TABLE deliveries ADD COLUMN {column} TEXT")
    refuse_unmovable_owed_signals(db.execute(UNMOVABLE_OWED_SIGNALS).fetchone()[0])
    db.execute(MOVE_SIGNALS_TO_DELIVERIES)
    db.execute("DROP VIEW IF EXISTS owed_signals")  # it reads the columns dropped below
    db.execute("DROP INDEX IF EXISTS outcomes_signals_owed")
    for column in SIGNALS_COLUMNS:
        db.execute(f"ALTER TABLE outcomes DROP COLUMN {column}")
    db.execute("DROP INDEX IF EXISTS deliveries_status")
    for statement in V9_INDEXES:
        db.execute(statement)


@_migration("0010_flattened_reconciliation_view")
def _flattened_reconciliation_view(db: Database) -> None:
    """No table changes: this marks the ``reconciliation`` view's new definition, made anew
    after any migration (with the rollup tables refilled from ``outcomes``, one pass under the
    write lock). Each column has one affinity in every arm, so SQLite flattens the view into a
    plain query that reads it, and a payment's listed transactions are looked up only when
    something was listed (until 0011 rolled their drift up; issue 17:
    :mod:`payhooks.storage.reconciliation`)."""


@_migration("0011_listed_identifiers")
def _listed_identifiers(db: Database) -> None:
    """``listed_identifiers``: the drift the service's list shows per identifier, kept by
    triggers, so the reconciliation reads one row per payment instead of searching its listed
    transactions (issue 17: :mod:`payhooks.storage.listed_identifiers`). Filled, with its
    triggers, by :func:`create_views`."""
    db.execute(LISTED_TABLE_SQL)


@_migration("0012_listed_identifiers_named")
def _listed_identifiers_named(db: Database) -> None:
    """``listed_identifiers.named`` and its partial index: the reconciliation's rows for the
    identifiers only the service's list names read the few rows nothing else names, instead
    of searching ``payments`` and ``identifiers`` for every listed transaction (issue 17).
    Filled by :func:`create_views`' refill."""
    for statement in LISTED_NAMED_SQL:
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
            "it was written by a newer version."
        )
    return len(rows)


#: Derived objects, created from this code rather than by any one migration: whenever a
#: migration is applied they are dropped and created again (and the rollup tables refilled
#: from ``outcomes``), so a change of the rules needs a (possibly empty) migration to mark the
#: version, and no migration keeps a copy of old SQL.
VIEWS = {
    "transactions_from_outcomes": transactions_view_sql(),
    "identifiers_from_transactions": identifiers_view_sql(),
    "listed_identifiers_from_service": listed_view_sql(),
    "reconciliation": RECONCILIATION_VIEW_SQL,
    "sync_drift": DRIFT_VIEW_SQL,
    "owed_signals": OWED_SIGNALS_VIEW_SQL,
}
TRIGGERS = ROLLUP_TRIGGERS


def create_views(db: Database) -> None:
    """Drop and create every view and trigger from the current definitions, and refill the
    rollup tables they keep (one pass over ``outcomes``, one over ``transactions``, one over
    ``service_transactions``)."""
    for name in TRIGGERS:
        db.execute(f"DROP TRIGGER IF EXISTS {name}")
    for name in reversed(VIEWS):
        db.execute(f"DROP VIEW IF EXISTS {name}")
    for sql in VIEWS.values():
        db.execute(sql)
    for statement in rebuild_sql():
        db.execute(statement)
    for sql in TRIGGERS.values():
        db.execute(sql)


def _apply(db: Database) -> None:
    if MIGRATIONS.pending(db):
        MIGRATIONS.apply(db)
        create_views(db)


def migrate(db: Database) -> int:
    """Bring the file to :data:`SCHEMA_VERSION`, safely against other processes doing the same.

    Cheap when the file is current. Otherwise every pending migration, its record and the
    views made anew are one ``BEGIN IMMEDIATE`` transaction, re-checked under the lock.
    Returns the version.
    """
    if schema_version(db) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    if db.conn.in_transaction:  # the caller's own transaction: migrate inside it
        with db.atomic():
            _apply(db)
        return schema_version(db)
    db.execute("BEGIN IMMEDIATE")
    try:
        _apply(db)
        version = schema_version(db)
        db.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise
    return version
