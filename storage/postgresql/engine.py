"""The PostgreSQL engine: a ``postgresql://`` URL, the process's connection pool, reads,
streams, and the schema check on open.

:class:`~payhooks.storage.Ledger` opens one :class:`PostgresEngine` for a URL; it offers the
members the SQLite engine does (``read()``, ``stream()``, ``writer.write()``,
``schema_version``, ``close()``), and the table modules run on either's connection.

Opening does not migrate: it checks the version and, when the database is behind, refuses with
:class:`~payhooks.storage.StorageUnavailableError` naming ``payhooks migrate``. On SQLite the
one host that opens the file migrates it; on PostgreSQL several hosts share the database, and
a schema change is a deploy step run once (by a role that may create tables, which receivers
need not have), before new code serves: receivers started first answer 503, so the service
retries rather than losing anything.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from payhooks.storage.errors import ReadTimeLimitError, SchemaBehindError
from payhooks.storage.health import LedgerHealth
from payhooks.storage.postgresql.connection import PostgresConnection, limit_statement
from payhooks.storage.postgresql.dedicated import dedicated_rows
from payhooks.storage.postgresql.dialect import to_postgres
from payhooks.storage.postgresql.errors import translate_errors
from payhooks.storage.postgresql.health import check_health
from payhooks.storage.postgresql.pools import DEFAULT_POOL_SIZE, pool_for
from payhooks.storage.postgresql.schema import SCHEMA_VERSION, schema_version
from payhooks.storage.postgresql.writer import Writer
from payhooks.storage.read_limits import ReadDeadline
from payhooks.storage.sql import Connection
from payhooks.storage.targets import redacted

__all__ = ["STREAM_BATCH_ROWS", "PostgresEngine"]

_T = TypeVar("_T")

#: How many rows a stream fetches from its server-side cursor at a time.
STREAM_BATCH_ROWS = 2000

_cursor_names = itertools.count(1)


class PostgresEngine:
    """The ledger's view of one PostgreSQL database; see the module docstring.

    :param url: a ``postgresql://`` URL (libpq's form: user, password, host, port, database
        and parameters such as ``sslmode``).
    :param busy_timeout_ms: how long a read or write waits for a connection, and a write for a
        row lock.
    :param synchronous: ``"FULL"`` or ``"NORMAL"``, already checked by the ledger.
    :param read_only: every transaction read-only (``default_transaction_read_only``), for a
        role that may only ``SELECT``; a pool of its own.
    :param pool_size: the most connections this process's pool for ``pool_name`` opens.
    :param pool_name: whose pool (``"receiver"``, ``"console"``): ledgers of one name share
        the process's pool, and another name never takes a connection from it.
    """

    __slots__ = (
        "_busy_timeout_ms",
        "_limits",
        "_pool_name",
        "_pool_size",
        "_read_only",
        "_url",
        "name",
        "schema_version",
        "writer",
    )

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int,
        synchronous: str,
        read_only: bool = False,
        pool_size: int = DEFAULT_POOL_SIZE,
        pool_name: str = "receiver",
    ) -> None:
        #: The URL without its password: for ``repr``.
        self.name = redacted(url)
        self._url, self._busy_timeout_ms, self._read_only = url, busy_timeout_ms, read_only
        self._pool_size, self._pool_name = pool_size, pool_name
        # Each thread's read time limit (a ledger may be used by several threads here).
        self._limits = threading.local()
        #: Makes every write: :meth:`Writer.write`.
        self.writer = Writer(self._pool, synchronous=synchronous)
        with self.read() as conn:
            version = schema_version(conn.conn)
        if version < SCHEMA_VERSION:
            raise SchemaBehindError(
                f"The ledger at {self.name} has schema version {version}, and this payhooks "
                f"needs {SCHEMA_VERSION}: run `payhooks migrate --database URL` first."
            )
        #: How many schema migrations the database has.
        self.schema_version = version

    #: Which engine this is.
    kind = "postgresql"

    @staticmethod
    def lock_payment(conn: Connection, external_identifier: str) -> None:
        """Hold one payment's lock until the transaction ends: a second writer of the same
        payment waits, then reads what the first committed (READ COMMITTED reads anew at each
        statement), so neither stores a row computed without the other's outcome."""
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (external_identifier,))

    def _pool(self) -> ConnectionPool[Any]:
        """The calling process's pool (:func:`~.pools.pool_for`: a dictionary lookup by process
        id, so a ledger carried across ``fork()`` opens the child's own)."""
        return pool_for(
            self._url,
            busy_timeout_ms=self._busy_timeout_ms,
            read_only=self._read_only,
            size=self._pool_size,
            name=self._pool_name,
        )

    @property
    def database(self) -> Any:
        """There is no ``sqlite_utils.Database`` on PostgreSQL."""
        raise AttributeError("a PostgreSQL ledger has no sqlite_utils Database")

    def _deadline(self) -> ReadDeadline | None:
        deadline: ReadDeadline | None = getattr(self._limits, "deadline", None)
        return deadline

    @contextmanager
    def time_limit(self, limit_ms: int) -> Iterator[None]:
        """Cancel any read of this thread that runs on past ``limit_ms`` from now, until the
        block ends: each read is a transaction whose statements get what is left as their
        ``statement_timeout``; the server's ``QueryCanceled`` is raised as
        :class:`ReadTimeLimitError`. A read inside a write transaction is not limited. Inside
        another limit that ends first, the outer one holds."""
        outer = self._deadline()
        deadline = ReadDeadline(limit_ms)
        if outer is not None and outer.at <= deadline.at:
            yield
            return
        self._limits.deadline = deadline
        try:
            yield
        finally:
            self._limits.deadline = outer

    @contextmanager
    def read(self) -> Iterator[PostgresConnection]:
        """A connection for reads: the open transaction's on this thread, else one borrowed
        from the pool (autocommit: each statement reads what is committed; under a time
        limit, in a transaction of its own whose statements the limit bounds)."""
        open_conn = self.writer.current()
        deadline = self._deadline()
        with translate_errors():
            if open_conn is not None:
                yield PostgresConnection(open_conn)
                return
            with self._pool().connection() as conn:
                if deadline is None:
                    yield PostgresConnection(conn)
                    return
                try:
                    with conn.transaction():
                        yield PostgresConnection(conn, deadline)
                except psycopg.errors.QueryCanceled as err:
                    raise ReadTimeLimitError(deadline.limit_ms) from err

    @contextmanager
    def session(self) -> Iterator[PostgresConnection]:
        """A pooled connection in autocommit, outside any time limit, for work that makes its
        own transactions (the finance rollup's refresh, which is not a person's read)."""
        with translate_errors(), self._pool().connection() as conn:
            yield PostgresConnection(conn)

    def stream(
        self,
        query: Callable[[Any], Any],
        convert: Callable[[tuple[Any, ...]], _T],
    ) -> Iterator[_T]:
        """Yield converted rows of ``query(conn)`` (a table module's select, which calls
        ``conn.execute`` once) from a server-side cursor, :data:`STREAM_BATCH_ROWS` at a time,
        so memory stays flat; the connection is held until the caller stops.

        The query is built now (so bad arguments raise here, as on SQLite) and run on the
        first row asked for. Inside a transaction of this thread, on its connection.
        """
        recorder = _Recorder()
        query(recorder)
        return self._rows(recorder.sql, recorder.params, convert)

    def _rows(
        self, sql: str, params: tuple[Any, ...], convert: Callable[[tuple[Any, ...]], _T]
    ) -> Iterator[_T]:
        with translate_errors():
            if self.writer.current() is not None:
                with self.read() as conn:
                    rows = conn.execute(sql, params).fetchall()
                yield from map(convert, rows)
                return
            deadline = self._deadline()
            with (
                self._pool().connection() as conn,
                conn.transaction(),
                conn.cursor(name=f"payhooks_stream_{next(_cursor_names)}") as cursor,
            ):
                if deadline is not None:  # each fetch: what was left when the stream began
                    limit_statement(conn, deadline)
                cursor.itersize = STREAM_BATCH_ROWS
                try:
                    cursor.execute(to_postgres(sql), params)
                    for values in cursor:
                        yield convert(values)
                except psycopg.errors.QueryCanceled as err:
                    if deadline is None:
                        raise
                    raise ReadTimeLimitError(deadline.limit_ms) from err

    def stream_apart(
        self,
        query: Callable[[Any], Any],
        convert: Callable[[tuple[Any, ...]], _T],
    ) -> Iterator[_T]:
        """:meth:`stream`, but on a connection opened for this stream alone
        (:func:`~.dedicated.dedicated_rows`), never one of the pool's, and outside any
        transaction of this thread: for a read that may take minutes."""
        recorder = _Recorder()
        query(recorder)
        return dedicated_rows(
            self._url, recorder.sql, recorder.params, convert, busy_timeout_ms=self._busy_timeout_ms
        )

    def health(self, *, min_free_bytes: int, lock_timeout_ms: int) -> LedgerHealth:
        """:func:`~payhooks.storage.postgresql.health.check_health`, on a connection had within
        ``lock_timeout_ms`` (the server's disk is its own business: ``min_free_bytes`` is not
        used)."""
        with translate_errors(), self._pool().connection(timeout=lock_timeout_ms / 1000) as conn:
            return check_health(conn)

    def close(self) -> None:
        """Nothing of its own to close: the pool is the process's (:mod:`.pools`)."""


class _Recorder:
    """Takes the one statement a stream's query runs, to be run when the rows are read."""

    __slots__ = ("params", "sql")

    unordered_union = True  # as PostgresConnection

    def __init__(self) -> None:
        self.sql = ""
        self.params: tuple[Any, ...] = ()

    def execute(self, sql: str, params: Any = ()) -> None:
        self.sql, self.params = sql, tuple(params)
