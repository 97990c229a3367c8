"""One :class:`payhooks.storage.Ledger` per thread and process, opened on first use, closed with its
thread.

A SQLite connection must not be shared between threads, and must not cross a ``fork()``:
gunicorn can fork workers from a master that imported (and even used) the app. Opening a ledger
costs a connection and a schema-version check, too much for every request, so each thread keeps
its own for as long as it lives, and a thread that finds a ledger opened by another process
(its parent, before the fork) opens a fresh one.

Servers that start a thread per connection (werkzeug's threaded development server, gunicorn's
``gthread`` workers with short-lived threads) would otherwise leave one open connection behind
per finished thread, closed only whenever the garbage collector gets to it. Each thread's ledger
is held by a small object in the pool's :class:`threading.local`, and a :func:`weakref.finalize`
on the holder closes the ledger when the holder goes: as its thread ends, or when the pool itself
is collected. That may happen on another thread (a collection runs on whichever thread triggers
it), so the pool opens its SQLite ledgers with ``check_same_thread=False``: each ledger is still
used by its own thread alone, and only closing may happen elsewhere, once nothing holds it.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from pathlib import Path
from typing import Final
from zoneinfo import ZoneInfo

from payhooks.storage import DEFAULT_POOL_SIZE, Ledger, StorageError, is_postgres_url, redacted

UTC_ZONE: Final = ZoneInfo("UTC")

__all__ = ["LedgerPool"]

logger = logging.getLogger("payhooks")


def _close_ledger(ledger: Ledger, pid: int) -> None:
    """Close ``ledger`` if this is the process that opened it, on whichever thread.

    In a forked child the ledger is the parent's: closing it could checkpoint or remove WAL
    files the parent still uses, so it is left alone (its connection goes with the process).
    """
    if os.getpid() != pid:
        return
    try:
        ledger.close()
    except StorageError as err:  # pragma: no cover - closing a connection hardly fails
        logger.warning("payhooks: could not close a finished thread's ledger: %s", err.message)


class _ThreadLedger:
    """One thread's ledger, closed when the thread's local storage (this object) goes away."""

    __slots__ = ("__weakref__", "close", "ledger", "pid")

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.pid = os.getpid()
        finalizer = weakref.finalize(self, _close_ledger, ledger, self.pid)
        # At interpreter exit the threads' connections go with the process; running the
        # finalizers then would only race the threads still using them.
        finalizer.atexit = False
        #: Close the ledger now (once; later calls do nothing).
        self.close = finalizer


class LedgerPool:
    """Hands each thread its own ledger on one database file.

    :param path: the SQLite file, or a ``postgresql://`` URL: then each thread's ledger is
        light, and borrows connections from its process's one pool
        (:mod:`payhooks.storage.postgresql.pools`), so threads do not multiply connections.
    :param busy_timeout_ms: how long a write waits on a lock before the ledger gives up with
        :class:`payhooks.storage.StorageUnavailableError`.
    :param synchronous: each ledger's ``synchronous`` option (``"FULL"`` or ``"NORMAL"``).
    :param read_only: open each ledger read-only (:class:`~payhooks.storage.Ledger`'s
        ``read_only``): for people who only read, as the standalone console's viewers.
    :param pool_size: PostgreSQL: the most connections the process's pool for ``pool_name``
        opens (:class:`~payhooks.storage.Ledger`'s ``pool_size``).
    :param pool_name: PostgreSQL: whose pool (``"receiver"``, ``"console"``): two ledger
        pools of different names in one process never share connections.
    :param timezone: ``PAYHOOKS_TIMEZONE``: the zone each ledger's finance rollup is kept in,
        set once as the ledger opens (the receiver's lag metric, the console's finance page
        and ``payhooks rollup`` must all keep the same one).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int,
        synchronous: str = "FULL",
        read_only: bool = False,
        pool_size: int = DEFAULT_POOL_SIZE,
        pool_name: str = "receiver",
        timezone: ZoneInfo = UTC_ZONE,
    ) -> None:
        #: The database file (or URL) this pool opens.
        self.path: str | Path = path if is_postgres_url(path) else Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self.synchronous = synchronous
        self.read_only = read_only
        self.pool_size = pool_size
        self.pool_name = pool_name
        self.timezone = timezone
        self._local = threading.local()
        # Holders inherited across a fork are kept referenced, never closed or collected:
        # closing a connection the parent still uses could checkpoint or remove its WAL files.
        self._inherited: list[_ThreadLedger] = []

    def get(self) -> Ledger:
        """The calling thread's ledger, opened now if this thread (in this process) has none."""
        holder: _ThreadLedger | None = getattr(self._local, "holder", None)
        if holder is not None:
            if holder.pid == os.getpid():
                return holder.ledger
            self._inherited.append(holder)
        holder = _ThreadLedger(
            Ledger(
                self.path,
                busy_timeout_ms=self.busy_timeout_ms,
                synchronous=self.synchronous,
                check_same_thread=False,
                read_only=self.read_only,
                pool_size=self.pool_size,
                pool_name=self.pool_name,
            )
        )
        holder.ledger.finance.rollup.zone = self.timezone
        self._local.holder = holder
        return holder.ledger

    def close(self) -> None:
        """Close the calling thread's ledger, if it has one; the next :meth:`get` reopens."""
        holder: _ThreadLedger | None = getattr(self._local, "holder", None)
        if holder is not None:
            if holder.pid == os.getpid():
                holder.close()
            else:
                self._inherited.append(holder)
        self._local.holder = None

    def __repr__(self) -> str:
        shown = redacted(self.path) if isinstance(self.path, str) else str(self.path)
        return f"<LedgerPool {shown!r}>"
