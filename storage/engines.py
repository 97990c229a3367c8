"""The engine a ledger runs on, chosen once, by the form of its target.

A ``postgresql://`` URL opens a :class:`~payhooks.storage.postgresql.engine.PostgresEngine`
(psycopg is an optional extra, so it is imported only then); anything else is a SQLite file's
path or a caller's ``sqlite_utils.Database``, opened by a
:class:`~payhooks.storage.sqlite.engine.SQLiteEngine`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeAlias

from sqlite_utils import Database

from payhooks.storage.sqlite.engine import SQLiteEngine
from payhooks.storage.targets import is_postgres_url

if TYPE_CHECKING:
    from payhooks.storage.postgresql.engine import PostgresEngine

__all__ = ["Engine", "open_engine"]

Engine: TypeAlias = "SQLiteEngine | PostgresEngine"


def open_engine(
    target: str | os.PathLike[str] | Database,
    *,
    busy_timeout_ms: int,
    synchronous: str,
    write_lock: bool,
    check_same_thread: bool,
) -> Engine:
    """Open ``target`` with its engine; the SQLite-only options are ignored on PostgreSQL."""
    if is_postgres_url(target):
        from payhooks.storage.postgresql.engine import PostgresEngine

        return PostgresEngine(str(target), busy_timeout_ms=busy_timeout_ms, synchronous=synchronous)
    return SQLiteEngine(
        target,
        busy_timeout_ms=busy_timeout_ms,
        synchronous=synchronous,
        write_lock=write_lock,
        check_same_thread=check_same_thread,
    )
