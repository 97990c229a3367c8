"""A SQLite ledger's health, from what can be seen without writing.

In order, each a reason the next write would fail: the schema is not this code's; the
connection is ``query_only``; the process may not write the file or its folder (asked of the
kernel with ``access(2)``, which answers for this process, root and an immutable file
included); the folder's free space (``statvfs``) is below the threshold; and the write lock
cannot be had within a short timeout. That last one takes ``BEGIN IMMEDIATE`` and rolls it
back at once: nothing is written (the file, the WAL and ``data_version`` stay as they were),
but for that moment a receiver's write waits, so the timeout is short.
"""

from __future__ import annotations

import os
import sqlite3

from sqlite_utils import Database

from payhooks.storage.health import LedgerHealth, check_schema
from payhooks.storage.sqlite.schema import SCHEMA_VERSION, schema_version

__all__ = ["check_health"]

# SQLITE_BUSY, SQLITE_LOCKED; SQLITE_READONLY; SQLITE_FULL.
_BUSY = frozenset({5, 6})
_READONLY = 8
_FULL = 13


def check_health(
    conn: sqlite3.Connection,
    file: str | None,
    *,
    busy_timeout_ms: int,
    min_free_bytes: int,
    lock_timeout_ms: int,
) -> LedgerHealth:
    """The health of the ledger on ``conn`` (its main file ``file``, None in memory).

    :param busy_timeout_ms: the connection's own busy timeout, put back after the lock probe.
    """
    found = check_schema(
        lambda: schema_version(Database(conn, execute_plugins=False)), SCHEMA_VERSION
    )
    if isinstance(found, LedgerHealth):
        return found
    version = found
    (query_only,) = conn.execute("PRAGMA query_only").fetchone()
    if query_only:
        return LedgerHealth("ledger_read_only", "The ledger is open read-only.", version)
    if file is not None:
        folder = os.path.dirname(os.path.abspath(file))
        if not os.access(file, os.W_OK) or not os.access(folder, os.W_OK | os.X_OK):
            return LedgerHealth(
                "ledger_read_only", "This process may not write the ledger or its folder.", version
            )
        stats = os.statvfs(folder)
        if stats.f_bavail * stats.f_frsize < min_free_bytes:
            return LedgerHealth(
                "ledger_disk_full",
                "The ledger's disk has less free space than the health threshold.",
                version,
            )
    return _probe_write_lock(conn, version, busy_timeout_ms, lock_timeout_ms)


def _probe_write_lock(
    conn: sqlite3.Connection, version: int, busy_timeout_ms: int, lock_timeout_ms: int
) -> LedgerHealth:
    if conn.in_transaction:  # this thread is writing: the lock is ours
        return LedgerHealth.healthy(version)
    conn.execute(f"PRAGMA busy_timeout = {int(lock_timeout_ms)}")
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError as err:
        code = getattr(err, "sqlite_errorcode", 0) & 0xFF
        if code in _BUSY:
            return LedgerHealth(
                "ledger_locked",
                f"Another connection held the ledger's write lock for over {lock_timeout_ms} ms.",
                version,
            )
        if code == _READONLY:
            return LedgerHealth("ledger_read_only", "SQLite refuses to write the ledger.", version)
        if code == _FULL:
            return LedgerHealth("ledger_disk_full", "The ledger's disk is full.", version)
        raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    return LedgerHealth.healthy(version)
