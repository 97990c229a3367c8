"""The engine a ledger runs on, chosen once, by the form of its target.

A ``postgresql://`` URL opens a :class:`~payhooks.storage.postgresql.engine.PostgresEngine`
(psycopg is an optional extra, so it is imported only then); anything else is a SQLite file's
path or a caller's ``sqlite_utils.Database``, opened by a
:class:`~payhooks.storage.sqlite.engine.SQLiteEngine`. Both offer :class:`Engine`; nothing above
them asks which one it holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from sqlite_utils import Database

from payhooks.storage.errors import PostgresExtraMissingError
from payhooks.storage.health import LedgerHealth
from payhooks.storage.limits import DEFAULT_POOL_SIZE
from payhooks.storage.sql import Connection
from payhooks.storage.sqlite.engine import SQLiteEngine
from payhooks.storage.targets import is_postgres_url

__all__ = ["Engine", "open_engine", "require_postgres"]

_T = TypeVar("_T")


class Engine(Protocol):
    """What the ledger needs of a database engine."""

    #: ``"sqlite"`` or ``"postgresql"``.
    kind: str
    #: The target, without a password: for ``repr`` and messages.
    name: str
    schema_version: int
    #: Makes every write: a transaction, or a savepoint of the open one.
    writer: Any

    @property
    def database(self) -> Any: ...

    def read(self) -> AbstractContextManager[Any]: ...

    def session(self) -> AbstractContextManager[Any]: ...

    def stream(
        self, query: Callable[[Any], Any], convert: Callable[[tuple[Any, ...]], _T]
    ) -> Iterator[_T]: ...

    def stream_apart(
        self, query: Callable[[Any], Any], convert: Callable[[tuple[Any, ...]], _T]
    ) -> Iterator[_T]: ...

    def lock_payment(self, conn: Connection, external_identifier: str) -> None: ...

    def time_limit(self, limit_ms: int) -> AbstractContextManager[None]: ...

    def health(self, *, min_free_bytes: int, lock_timeout_ms: int) -> LedgerHealth: ...

    def close(self) -> None: ...


def require_postgres() -> None:
    """:raises PostgresExtraMissingError: psycopg (the ``postgres`` extra) is not installed."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as err:
        raise PostgresExtraMissingError from err


def open_engine(
    target: str | os.PathLike[str] | Database,
    *,
    busy_timeout_ms: int,
    synchronous: str,
    write_lock: bool,
    check_same_thread: bool,
    create: bool = True,
    read_only: bool = False,
    pool_size: int = DEFAULT_POOL_SIZE,
    pool_name: str = "receiver",
) -> Engine:
    """Open ``target`` with its engine; the SQLite-only options are ignored on PostgreSQL
    (which is never created on open), and the pool's on SQLite (which has none)."""
    if is_postgres_url(target):
        require_postgres()
        from payhooks.storage.postgresql.engine import PostgresEngine

        return PostgresEngine(
            str(target),
            busy_timeout_ms=busy_timeout_ms,
            synchronous=synchronous,
            read_only=read_only,
            pool_size=pool_size,
            pool_name=pool_name,
        )
    return SQLiteEngine(
        target,
        busy_timeout_ms=busy_timeout_ms,
        synchronous=synchronous,
        write_lock=write_lock,
        check_same_thread=check_same_thread,
        create=create,
        read_only=read_only,
    )
