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

It also watches that the log at the path is still the one SQLite writes to (:meth:`WalSync.check`,
after every commit, ``NORMAL`` ledgers too). SQLite deletes the log only when its last
connection closes, and the ledger's own stays open, so a log that disappears or is replaced
while the ledger is open was removed by someone else: SQLite goes on writing to the unlinked
file, and a crash would lose every commit since. The write then fails
(:class:`WalReplacedError`), and the receiver answers 503 rather than acknowledge it.
"""

from __future__ import annotations

import errno
import os
from typing import Final

__all__ = ["WAL_SUFFIX", "WalReplacedError", "WalSync"]

#: SQLite's write-ahead log beside the database: ``payhooks.db-wal``.
WAL_SUFFIX: Final = "-wal"

_sync = getattr(os, "fdatasync", os.fsync)  # fdatasync where there is one, as SQLite does


class WalReplacedError(OSError):
    """The write-ahead log at the path is not the one this process opened: deleted or replaced
    while the ledger had it open."""


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

        :raises WalReplacedError: the log was deleted or replaced (see :meth:`check`).
        :raises OSError: the sync failed: what was committed may not be on disk.
        """
        current = self._current()
        if current is not None:
            _sync(current)
            return
        # No WAL yet (the file left WAL mode): what was committed is in the database itself.
        database = os.open(self.database, os.O_RDONLY)
        try:
            _sync(database)
        finally:
            os.close(database)

    def check(self) -> None:
        """Make sure the log at the path is the one this process opened first.

        :raises WalReplacedError: it was deleted, or another file took its place.
        """
        self._current()

    def _current(self) -> int | None:
        """This process's descriptor of the log (opened on first use); None while there is no
        log at all."""
        mine = self._fd is not None and self._pid == os.getpid()
        try:
            identity = os.stat(self.path)
        except FileNotFoundError:
            if mine:
                raise WalReplacedError(
                    errno.ESTALE, "the write-ahead log was deleted while the ledger had it open"
                ) from None
            return None
        if not mine:
            return self._reopen()
        if self._inode != (identity.st_dev, identity.st_ino):
            raise WalReplacedError(
                errno.ESTALE, "the write-ahead log was replaced while the ledger had it open"
            )
        return self._fd

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
