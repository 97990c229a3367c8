"""One psycopg connection pool per process, database and purpose, shared by that process's
ledgers of that purpose.

A receiver keeps one :class:`~payhooks.storage.Ledger` per thread
(:class:`payhooks.receiver.ledgers.LedgerPool`); on PostgreSQL those ledgers are light, and
each borrows a connection from the process's one pool for each read or write (or for a whole
:meth:`~payhooks.storage.Ledger.transaction`). So a process holds at most its pool's size
(``PAYHOOKS_POSTGRES_POOL_SIZE``, :data:`DEFAULT_POOL_SIZE` unless set) connections however
many threads it runs, and the server sees workers times that, not threads.

A pool is named for whom it serves (``"receiver"``, ``"console"``): a console mounted in the
receiver's process opens a pool of its own on the same database, so people paging through
the console never hold the connections a notification needs to be stored.

A pool must not cross a ``fork()``: its connections' sockets would be shared with the parent,
and its worker threads do not survive. gunicorn ``--preload`` forks workers from a master
that may have used the ledger, so pools are kept per process id, as the SQLite engine checks
its lock file's: a child finds none of its own and opens one. The parent's pool is kept
referenced in the child, never closed or collected there: closing a connection sends the
server a goodbye on the socket the parent still uses.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from payhooks.storage.errors import StorageUnavailableError
from payhooks.storage.limits import DEFAULT_POOL_SIZE

__all__ = ["DEFAULT_POOL_SIZE", "close_pools", "pool_for"]

_lock = threading.Lock()
_pools: dict[tuple[int, str, int, bool, str, int], ConnectionPool[Any]] = {}
# Pools inherited across a fork: referenced forever, never closed in the child.
_inherited: list[ConnectionPool[Any]] = []


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # the parent's may have been held by another thread
    _inherited.extend(_pools.values())
    _pools.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def pool_for(
    url: str,
    *,
    busy_timeout_ms: int,
    read_only: bool = False,
    size: int = DEFAULT_POOL_SIZE,
    name: str = "receiver",
) -> ConnectionPool[Any]:
    """This process's pool for ``url`` and ``name`` (whom it serves), opened on first use with
    at most ``size`` connections.

    With ``read_only``, its connections start every transaction read-only
    (``default_transaction_read_only``): the server refuses any write, whatever the role may do.

    Connections are in autocommit (the writer opens each transaction itself), with
    ``lock_timeout`` set to the busy timeout: a write waiting on another's row lock gives up
    then, as a SQLite write does. A checkout waits at most the busy timeout too.

    The first connection is made here, outside the pool: a URL that cannot be used (a wrong
    host, password or database) raises its cause now, rather than a checkout timeout after
    the pool's retries.
    """
    key = (os.getpid(), url, busy_timeout_ms, read_only, name, size)
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            options = f"-c lock_timeout={int(busy_timeout_ms)}"
            if read_only:
                options += " -c default_transaction_read_only=on"
            kwargs = {"autocommit": True, "options": options}
            timeout_s = max(2, math.ceil(busy_timeout_ms / 1000))  # libpq's least is 2
            try:
                psycopg.connect(url, connect_timeout=timeout_s, **kwargs).close()  # type: ignore[arg-type]
            except psycopg.OperationalError as err:  # no server, no such database, refused login
                cause = " ".join(str(err).split())
                raise StorageUnavailableError(f"Cannot connect to PostgreSQL: {cause}") from err
            pool = ConnectionPool(
                url,
                min_size=1,
                max_size=size,
                kwargs=kwargs,
                timeout=busy_timeout_ms / 1000,
                check=ConnectionPool.check_connection,
                name=f"payhooks-{name}-{os.getpid()}",
                open=False,
            )
            pool.open(wait=False)
            _pools[key] = pool
        return pool


def close_pools(url: str | None = None) -> None:
    """Close this process's pools, or only those of ``url`` (a process done with a database,
    and tests, which drop theirs)."""
    with _lock:
        keys = [key for key in _pools if url is None or key[1] == url]
        pools = [_pools.pop(key) for key in keys]
    for pool in pools:
        pool.close()
