"""A connection of its own, outside the process's pool, for one long read.

A stream that reads for minutes (the console's export of a million rows) would hold one of
the pool's few connections (:mod:`.pools`) for all that time, and a handful of them would
leave the receiver none: notifications would get 503. Such a read opens a connection for
itself, reads through a server-side cursor in a read-only transaction, and closes it; the
server sees one more client for that time, the receiver's pool none fewer.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeVar

import psycopg

from payhooks.storage.postgresql.dialect import to_postgres
from payhooks.storage.postgresql.errors import translate_errors

__all__ = ["APPLICATION_NAME", "DEDICATED_BATCH_ROWS", "dedicated_rows"]

_T = TypeVar("_T")

#: How many rows a dedicated stream fetches from its server-side cursor at a time.
DEDICATED_BATCH_ROWS: Final = 2000
#: How the server lists such a connection (``pg_stat_activity.application_name``), so an
#: operator tells a long export from the receiver's connections.
APPLICATION_NAME: Final = "payhooks long read"

_cursor_names = itertools.count(1)


def dedicated_rows(
    url: str,
    sql: str,
    params: tuple[Any, ...],
    convert: Callable[[tuple[Any, ...]], _T],
    *,
    busy_timeout_ms: int,
) -> Iterator[_T]:
    """Yield ``convert`` of each row of ``sql`` (SQLite's spelling, turned into PostgreSQL's),
    read on a connection opened for this stream alone and closed when the caller stops (or
    stops early): never one of the pool's.

    The transaction is read-only whatever the role may do: one snapshot, nothing written. The
    server lists the connection as :data:`APPLICATION_NAME`.
    Connecting waits at most the busy timeout (libpq's least is 2 s); every driver error is
    the ledger's :class:`~payhooks.storage.StorageError`.
    """
    timeout_s = max(2, math.ceil(busy_timeout_ms / 1000))
    with translate_errors():
        conn = psycopg.connect(
            url,
            connect_timeout=timeout_s,
            options=f"-c lock_timeout={int(busy_timeout_ms)}",
            application_name=APPLICATION_NAME,
        )
        try:
            conn.read_only = True
            with conn.cursor(name=f"payhooks_dedicated_{next(_cursor_names)}") as cursor:
                cursor.itersize = DEDICATED_BATCH_ROWS
                cursor.execute(to_postgres(sql), params)
                for values in cursor:
                    yield convert(values)
        finally:
            conn.close()  # the transaction, read-only, ends with it
