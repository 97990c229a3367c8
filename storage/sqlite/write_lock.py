"""A write lock shared by every process on one ledger file, whose waiters wake promptly.

SQLite serializes writers itself, but a writer that finds the lock taken sleeps in SQLite's
busy handler in coarse steps (1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms, then 100 ms
each), however soon the lock is free again. A receiver's write holds the lock well under a
millisecond, so under load most of a waiter's time is spent asleep after the lock was
released, and the slowest answers wait tens of milliseconds for nothing.

:class:`WriteLock` is taken before ``BEGIN IMMEDIATE`` and released after the commit: an
exclusive ``flock`` on a sidecar file ``<database>.lock``. A waiter polls it without blocking,
sleeping a few tens of microseconds at first and never more than
:data:`MAX_PAUSE_SECONDS` (:data:`LONG_WAIT_PAUSE_SECONDS` once a wait grows unusually long),
so it takes the lock within a fraction of a millisecond of its release, and gives up at a
deadline (a blocking ``flock`` cannot). SQLite's own lock is still taken inside it, so a
writer that does not use this lock (a SQL tool) stays correctly serialized, only without the
prompt wake-up.

``flock`` locks belong to an open file description, so each :class:`WriteLock` (one per
ledger, one ledger per thread) excludes the others in its own process as well as in others,
and the kernel releases the lock of a process that dies. Where there is no ``fcntl`` (Windows),
or the sidecar file cannot be opened (a read-only folder), :meth:`WriteLock.acquire` answers
None and SQLite's handler does all the waiting, as before.
"""

from __future__ import annotations

import os
import time
from typing import Final

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_SUFFIX", "LONG_WAIT_PAUSE_SECONDS", "MAX_PAUSE_SECONDS", "WriteLock"]

#: The sidecar file beside the database: ``payhooks.db`` is locked through ``payhooks.db.lock``.
LOCK_SUFFIX: Final = ".lock"

#: The first pause of a waiter, doubled after each failed try.
FIRST_PAUSE_SECONDS: Final = 0.000_025
#: The longest pause while waiting: about the time one receiver's write holds the lock.
MAX_PAUSE_SECONDS: Final = 0.000_25
#: After this long, waiting is unusual (a long write, a stuck holder): poll less often.
LONG_WAIT_SECONDS: Final = 0.05
#: The longest pause once the wait is that long.
LONG_WAIT_PAUSE_SECONDS: Final = 0.002


class WriteLock:
    """The exclusive lock on ``<database>.lock``; see the module docstring.

    :param database: the ledger file's path.
    """

    __slots__ = ("_fd", "_held", "_pid", "_unusable", "path")

    def __init__(self, database: str | os.PathLike[str]) -> None:
        #: The sidecar lock file.
        self.path = os.fspath(database) + LOCK_SUFFIX
        self._fd: int | None = None
        self._pid = 0
        self._held = False
        self._unusable = fcntl is None

    def _descriptor(self) -> int | None:
        """This process's descriptor of the lock file, opened on first use (and again in a
        forked child: a descriptor inherited across ``fork`` shares its lock with the parent).
        None when the file cannot be opened."""
        if self._fd is not None and self._pid == os.getpid():
            return self._fd
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError:
            self._unusable = True
            return None
        # An inherited descriptor is left to the parent: closing it here would not release
        # the parent's lock, and unlocking it would.
        self._fd, self._pid = fd, os.getpid()
        return fd

    def acquire(self, deadline: float) -> float | None:
        """Take the lock, waiting until ``deadline`` (a :func:`time.monotonic` time).

        :returns: how many seconds it waited; None when the lock cannot be used here (no
            ``fcntl``, the file cannot be opened): the caller relies on SQLite alone.
        :raises TimeoutError: still held by another writer at the deadline.
        """
        fd = None if self._unusable else self._descriptor()
        if fd is None:
            return None
        if self._try(fd):
            return 0.0
        started = time.monotonic()
        pause = FIRST_PAUSE_SECONDS
        while not self._unusable:
            now = time.monotonic()
            if now >= deadline:
                raise TimeoutError(f"{self.path} is held by another writer")
            waited = now - started
            longest = MAX_PAUSE_SECONDS if waited < LONG_WAIT_SECONDS else LONG_WAIT_PAUSE_SECONDS
            time.sleep(min(pause, deadline - now))
            pause = min(pause * 2, longest)
            if self._try(fd):
                return time.monotonic() - started
        return None

    def _try(self, fd: int) -> bool:
        """One attempt without blocking; a file system that refuses ``flock`` altogether (some
        network file systems) makes the lock unusable rather than failing the write."""
        assert fcntl is not None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:
            self._unusable = True
            return False
        self._held = True
        return True

    def release(self) -> None:
        """Release the lock if this process holds it."""
        if self._held and self._fd is not None and self._pid == os.getpid():
            assert fcntl is not None
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._held = False

    def close(self) -> None:
        """Release and close this process's descriptor (the file stays for the others)."""
        self.release()
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = None

    def __repr__(self) -> str:
        return f"<WriteLock {self.path!r}>"
