"""One :class:`storage.Ledger` per thread and process, opened on first use.

A SQLite connection must not be shared between threads, and must not cross a ``fork()``:
gunicorn can fork workers from a master that imported (and even used) the app. Opening a ledger
costs a connection and a schema-version check, too much for every request, so each thread keeps
its own for as long as it lives, and a thread that finds a ledger opened by another process
(its parent, before the fork) opens a fresh one.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from storage import Ledger

__all__ = ["LedgerPool"]


class LedgerPool:
    """Hands each thread its own ledger on one database file.

    :param path: the SQLite file.
    :param busy_timeout_ms: how long a write waits on a lock before the ledger gives up with
        :class:`storage.StorageUnavailableError`.
    """

    def __init__(self, path: str | Path, *, busy_timeout_ms: int) -> None:
        #: The database file this pool opens.
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        # Ledgers inherited across a fork are kept referenced, never closed or collected: closing
        # a connection the parent still uses could checkpoint or remove its WAL files.
        self._inherited: list[Ledger] = []

    def get(self) -> Ledger:
        """The calling thread's ledger, opened now if this thread (in this process) has none."""
        pid = os.getpid()
        ledger: Ledger | None = getattr(self._local, "ledger", None)
        if ledger is not None and getattr(self._local, "pid", None) == pid:
            return ledger
        if ledger is not None:
            self._inherited.append(ledger)
        ledger = Ledger(self.path, busy_timeout_ms=self.busy_timeout_ms)
        self._local.ledger = ledger
        self._local.pid = pid
        return ledger

    def close(self) -> None:
        """Close the calling thread's ledger, if it has one; the next :meth:`get` reopens."""
        ledger: Ledger | None = getattr(self._local, "ledger", None)
        if ledger is not None and getattr(self._local, "pid", None) == os.getpid():
            ledger.close()
        self._local.ledger = None

    def __repr__(self) -> str:
        return f"<LedgerPool {str(self.path)!r}>"
