"""A pooled psycopg connection, as the table modules use it.

The table modules take a connection and call ``execute(sql, params)`` and ``executemany``,
then read the cursor's ``fetchone()``, ``fetchall()``, ``rowcount`` or rows, as ``sqlite3``
offers them. :class:`PostgresConnection` offers the same few calls over a psycopg connection,
each statement turned into PostgreSQL's spelling once (:func:`~.dialect.to_postgres`), so the
modules stay one text for both engines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from payhooks.storage.errors import ReadTimeLimitError
from payhooks.storage.postgresql.dialect import to_postgres
from payhooks.storage.read_limits import ReadDeadline

__all__ = ["PostgresConnection", "limit_statement"]


def limit_statement(conn: psycopg.Connection[Any], deadline: ReadDeadline) -> None:
    """Give the next statements of ``conn``'s transaction what is left of ``deadline`` as their
    ``statement_timeout``.

    :raises ReadTimeLimitError: nothing is left (``0`` would mean no timeout at all).
    """
    left = deadline.remaining_ms()
    if left <= 0:
        raise ReadTimeLimitError(deadline.limit_ms)
    conn.execute("SELECT set_config('statement_timeout', %s, true)", (f"{left}ms",))


class PostgresConnection:
    """The calls of ``sqlite3.Connection`` the table modules make, on a psycopg connection.

    :param conn: a connection checked out of the engine's pool, for one read or one write.
    :param deadline: a read's time limit (:meth:`payhooks.storage.Ledger.read_time_limit`):
        ``conn`` is inside a transaction, and each statement runs with what is left of the
        limit as its ``statement_timeout`` (``SET LOCAL``: it ends with the transaction), so
        several statements together never run past it.
    """

    __slots__ = ("conn", "deadline")

    #: PostgreSQL gives a ``UNION ALL`` no order unless asked
    #: (:func:`payhooks.storage.reconciliation.select_rows` reads this).
    unordered_union = True

    def __init__(self, conn: psycopg.Connection[Any], deadline: ReadDeadline | None = None) -> None:
        #: The psycopg connection: for tools and tests that need PostgreSQL's own calls.
        self.conn = conn
        #: The read's time limit, or None.
        self.deadline = deadline

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        """Run one statement; the cursor holds its rows and ``rowcount``.

        :raises ReadTimeLimitError: under a deadline already passed (the server's
            ``QueryCanceled`` for one that passes while the statement runs is the engine's).
        """
        if self.deadline is not None:
            limit_statement(self.conn, self.deadline)
        return self.conn.execute(to_postgres(sql), tuple(params))

    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> psycopg.Cursor[Any]:
        """Run one statement for each parameter row (pipelined by psycopg)."""
        cursor = self.conn.cursor()
        cursor.executemany(to_postgres(sql), [tuple(row) for row in params])
        return cursor
