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

from payhooks.storage.postgresql.dialect import to_postgres

__all__ = ["PostgresConnection"]


class PostgresConnection:
    """The calls of ``sqlite3.Connection`` the table modules make, on a psycopg connection.

    :param conn: a connection checked out of the engine's pool, for one read or one write.
    """

    __slots__ = ("conn",)

    #: PostgreSQL gives a ``UNION ALL`` no order unless asked
    #: (:func:`payhooks.storage.reconciliation.select_rows` reads this).
    unordered_union = True

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        #: The psycopg connection: for tools and tests that need PostgreSQL's own calls.
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        """Run one statement; the cursor holds its rows and ``rowcount``."""
        return self.conn.execute(to_postgres(sql), tuple(params))

    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> psycopg.Cursor[Any]:
        """Run one statement for each parameter row (pipelined by psycopg)."""
        cursor = self.conn.cursor()
        cursor.executemany(to_postgres(sql), [tuple(row) for row in params])
        return cursor
