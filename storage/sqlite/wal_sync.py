"""Syncing the write-ahead log after the write lock is released: group commit for ``FULL``.

With SQLite's ``PRAGMA synchronous = FULL`` every commit syncs the write-ahead log (WAL) to
disk *while holding the write lock*, so writers queue behind each other's syncs: a sync takes
longer than everything else a receiver's write does, and under load the lock is held mostly
for it. The ledger's ``FULL`` keeps the same promise, that a write is on disk before the call
that made it returns, in another order: it commits with ``PRAGMA synchronous = NORMAL``
(nothing synced at commit), releases the lock, and then syncs the WAL itself with
:func:`os.fdatasync` (:class:`WalSync`). The next writer commits meanwhile, and the syncs of
several writers overlap (the file system flushes them together), as in a database's group
commit.

Why it keeps the promise: the WAL is written in order, and a sync flushes everything written
to the file before it, so when :meth:`WalSync.sync` returns, this commit (and every earlier
one) is on disk; SQLite recovers committed frames from the WAL after a crash. A WAL that a
checkpoint has meanwhile copied into the database and restarted is no loss either: in
``NORMAL`` mode SQLite syncs the WAL before a checkpoint and the database after it. The one
difference from SQLite's own ``FULL``: another connection may *read* a commit a moment before
it is on disk. Nothing is acknowledged before it is, and a later commit that read it is synced
together with it (it comes after it in the same file).

Used by a ledger that opened its file itself (a caller's own database may commit its own
transactions, which nothing would sync), on POSIX systems, with the file in WAL mode;
elsewhere the ledger sets SQLite's ``FULL``.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["WAL_SUFFIX", "WalSync"]

#: SQLite's write-ahead log beside the database: ``payhooks.db-wal``.
WAL_SUFFIX: Final = "-wal"

_sync = getattr(os, "fdatasync", os.fsync)  # fdatasync where there is one, as SQLite does


class WalSync:
    """Syncs one database's write-ahead log to disk; see the module docstring.

    :param database: the database file's path.
    """

    __slots__ = ("_fd", "_inode", "_pid", "database", "path")

    def __init__(self, database: str | os.PathLike[str]) -> None:
        #: The database file, synced instead when it has no WAL (it is not in WAL mode).
        self.database = os.fspath(database)
        #: The write-ahead log.
        self.path = self.database + WAL_SUFFIX
        self._fd: int | None = None
        self._inode: tuple[int, int] | None = None
        self._pid = 0

    def sync(self) -> None:
        """Flush the WAL, as it is now, to disk.

        :raises OSError: the sync failed: what was committed may not be on disk.
        """
        try:
            identity = os.stat(self.path)
        except FileNotFoundError:
            # No WAL (the file left WAL mode): what was committed is in the database itself.
            database = os.open(self.database, os.O_RDONLY)
            try:
                _sync(database)
            finally:
                os.close(database)
            return
        current = self._fd
        if (
            current is None
            or self._inode != (identity.st_dev, identity.st_ino)
            or self._pid != os.getpid()
        ):
            current = self._reopen()
        _sync(current)

    def _reopen(self) -> int:
        """Open the WAL (again: it was replaced, or this is a forked child)."""
        self.close()
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        opened = os.fstat(fd)
        self._fd, self._inode, self._pid = fd, (opened.st_dev, opened.st_ino), os.getpid()
        return fd

    def close(self) -> None:
        """Close this process's descriptor of the WAL."""
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = None
        self._inode = None

    def __repr__(self) -> str:
        return f"<WalSync {self.path!r}>"
