"""Moving a SQLite ledger to PostgreSQL, and checking the copy: ``payhooks copy-ledger``.

The copy is one PostgreSQL transaction into a migrated, empty database: every table's rows
with their ids (the bodies byte for byte, as ``bytea``), through ``COPY``; the identity
sequences moved past the highest id; ``deliveries.outcome_id`` set once the outcomes it names
exist (the two tables refer to each other).

The check, after the commit: the row count of every table equal on both, every body's SHA-256
equal to the one stored with it, and the reconciliation summary (counts and totals per
currency and state) equal on both. A failed check is reported, not hidden; the copy stays for
a person to look at.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import psycopg
from sqlite_utils import Database

from payhooks.storage.errors import StorageError
from payhooks.storage.ledger import Ledger
from payhooks.storage.postgresql.errors import translate_errors
from payhooks.storage.postgresql.schema import migrate
from payhooks.storage.rows import CopyReport
from payhooks.storage.times import system_clock, to_text

__all__ = ["TABLES", "copy_ledger"]

#: The tables copied, in an order their references allow.
TABLES = (
    "payments",
    "creation_attempts",
    "deliveries",
    "outcomes",
    "owed_signals",
    "signal_receivers",
    "signal_runs",
    "payment_states",
    "returns",
    "rejected_deliveries",
    "sync_runs",
    "service_transactions",
    "audit_log",
    "audit_prune_permits",
    "audit_refusals",
    "exception_reviews",
)
_WITH_IDS = (
    "creation_attempts",
    "deliveries",
    "outcomes",
    "owed_signals",
    "signal_receivers",
    "signal_runs",
    "returns",
    "rejected_deliveries",
    "sync_runs",
    "audit_log",
    "audit_prune_permits",
    "audit_refusals",
)


def _columns(db: Database, table: str) -> list[str]:
    return [column.name for column in db[table].columns]


def _count_sqlite(source: Database, table: str) -> int:
    row = source.execute(f"SELECT COUNT(*) FROM {table}").fetchone()  # noqa: S608 - constants
    return int(row[0]) if row else 0


def _count_pg(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()  # noqa: S608 - constants
    return int(row[0]) if row else 0


def copy_ledger(
    sqlite_path: str | os.PathLike[str], url: str, progress: Callable[[str], None] | None = None
) -> CopyReport:
    """Copy the SQLite ledger at ``sqlite_path`` into the PostgreSQL database at ``url``
    (migrated first, and refused unless empty), then check the copy; ``progress`` is called
    with each table's name as its copy starts.

    :raises StorageError: the file or the server cannot be used, or the database already
        holds a ledger's rows; nothing is copied.
    """
    if not os.path.exists(sqlite_path):
        raise StorageError(f"There is no SQLite ledger at {os.fspath(sqlite_path)}.")
    Ledger(sqlite_path, create=False).close()  # a ledger, brought to the current schema
    source = Database(os.fspath(sqlite_path), execute_plugins=False)
    report = CopyReport()
    try:
        with translate_errors(), psycopg.connect(url, autocommit=True) as conn:
            migrate(conn, now=to_text(system_clock()))
            _copy(source, conn, progress or (lambda table: None))
            for table in TABLES:
                report.counts[table] = (_count_sqlite(source, table), _count_pg(conn, table))
            bad_bodies = conn.execute(
                "SELECT COUNT(*) FROM deliveries "
                "WHERE encode(sha256(body), 'hex') <> body_sha256 AND pruned_at IS NULL"
            ).fetchone()
            if bad_bodies and bad_bodies[0]:
                report.problems.append(f"{bad_bodies[0]} copied bodies do not match their SHA-256.")
    finally:
        source.close()
    for table, (before, after) in report.counts.items():
        if before != after:
            report.problems.append(f"{table} has {before} rows in SQLite and {after} copied.")
    with Ledger(sqlite_path) as old, Ledger(url) as new:
        if old.summary() != new.summary():
            report.problems.append("The reconciliation summary differs between the two.")
    return report


def _copy(source: Database, conn: psycopg.Connection[Any], progress: Callable[[str], None]) -> None:
    with conn.transaction():
        for table in TABLES:
            if _count_pg(conn, table):
                raise StorageError(
                    f"The PostgreSQL database already holds a ledger ({table} has rows); "
                    "copy into an empty one."
                )
        outcome_links: list[tuple[int, int]] = []
        for table in TABLES:
            progress(table)
            columns = _columns(source, table)
            select = f"SELECT {', '.join(columns)} FROM {table}"  # noqa: S608
            if table == "deliveries":
                select = select.replace("outcome_id", "NULL AS outcome_id", 1)
                outcome_links = [
                    (row[1], row[0])
                    for row in source.execute(
                        "SELECT id, outcome_id FROM deliveries WHERE outcome_id IS NOT NULL"
                    )
                ]
            with conn.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in source.execute(select):
                    copy.write_row(row)
            if table == "outcomes" and outcome_links:
                conn.cursor().executemany(
                    "UPDATE deliveries SET outcome_id = %s WHERE id = %s", outcome_links
                )
        for table in _WITH_IDS:
            sql = f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false)"  # noqa: E501, S608 - constants
            conn.execute(sql)
