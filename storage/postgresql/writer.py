"""The write protocol on PostgreSQL: a pooled connection, one transaction, savepoints inside.

A write, from start to return:

1. A connection from the process's pool (:mod:`.pools`), waiting at most the busy timeout.
2. ``BEGIN`` at READ COMMITTED, PostgreSQL's default. Idempotency is the unique constraints'
   (``INSERT ... ON CONFLICT``), which wait for a concurrent insert of the same key to commit
   or roll back and then decide; the statements that read after an upsert see what committed
   meanwhile. Two writers of one payment's row take turns on its transaction lock
   (``PostgresEngine.lock_payment``) before either reads what the row is computed from. So no
   write needs SERIALIZABLE and its retries, and nothing takes a lock file: several hosts
   write one database.
3. The statements (the table modules' functions), then ``COMMIT``; any exception rolls back.
   ``durable=False`` (or a ``NORMAL`` ledger) sets ``synchronous_commit = off`` for that
   transaction: the commit returns before the server's WAL flush, as a SQLite ``NORMAL`` or
   unsynced write does.

Inside a transaction already open on this thread (:meth:`Writer.write` nested:
:meth:`payhooks.storage.Ledger.transaction`) a write is a savepoint, undone alone when it
raises, unless that transaction was opened with ``savepoints=False``. Every ``psycopg``
error is raised as a :class:`~payhooks.storage.StorageError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from payhooks.storage.errors import NESTED_WRITE_FAILED, StorageError
from payhooks.storage.postgresql.connection import PostgresConnection
from payhooks.storage.postgresql.errors import translate_errors

__all__ = ["Writer"]


class Writer:
    """Makes one ledger's writes; see the module docstring.

    :param pool: returns the calling process's pool for the database (looked up on each write,
        so a ledger carried across ``fork()`` uses the child's pool, never the parent's).
    :param synchronous: ``"FULL"`` or ``"NORMAL"``.
    """

    __slots__ = ("_local", "_pool", "synchronous")

    def __init__(self, pool: Callable[[], ConnectionPool[Any]], *, synchronous: str) -> None:
        self._pool = pool
        self.synchronous = synchronous
        self._local = threading.local()

    def current(self) -> psycopg.Connection[Any] | None:
        """The connection of the transaction this thread has open, if any."""
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        return conn

    @contextmanager
    def write(
        self, *, durable: bool = True, savepoints: bool = True
    ) -> Iterator[PostgresConnection]:
        """One write transaction, or a savepoint of the one this thread has open; yields the
        connection to write through.

        ``savepoints=False`` makes the writes nested in this one join it without savepoints:
        each savepoint costs two round trips to the server (``SAVEPOINT``, ``RELEASE``), and a
        caller that never goes on after a failed write (the receiver) needs none. If a nested
        write raises, the transaction is rolled back at the end of the block even when the
        caller caught the error (PostgreSQL refuses every statement after it anyway).

        :raises StorageUnavailableError: no connection within the busy timeout, a lock held
            past it, the server gone; nothing is stored.
        :raises StorageError: a write nested without a savepoint failed and the block went on.
        """
        local = self._local
        open_conn = self.current()
        with translate_errors():
            if open_conn is not None:
                if local.joining:
                    try:
                        yield PostgresConnection(open_conn)
                    except BaseException:
                        local.failed = True
                        raise
                else:
                    with open_conn.transaction():  # nested: a savepoint
                        yield PostgresConnection(open_conn)
                return
            with self._pool().connection() as conn:
                local.conn, local.joining, local.failed = conn, not savepoints, False
                try:
                    with conn.transaction():
                        if not durable or self.synchronous != "FULL":
                            conn.execute("SET LOCAL synchronous_commit = off")
                        yield PostgresConnection(conn)
                        if local.failed:
                            raise StorageError(NESTED_WRITE_FAILED)
                finally:
                    local.conn, local.joining, local.failed = None, False, False
