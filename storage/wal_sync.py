"""Syncing the write-ahead log after the write lock is released: group commit for ``FULL``.

With SQLite's ``PRAGMA synchronous = FULL`` every commit syncs the write-ahead log (WAL) to
disk *while holding the write lock*, so writers queue behind each other's syncs: a sync takes
longer than everything else a receiver's write does, and under load the lock is held mostly
for it. The ledger's ``FULL`` keeps the same promise, that a write is on disk before the call
that made it returns, in another order: it commits with ``PRAGMA synchronous = NORMAL``
(nothing synced at commit), takes a ticket (:class:`~storage.commit_counters.CommitCounters`),
releases the lock, and then makes sure the WAL is synced up to its ticket (:class:`WalSync`).
The next writer commits meanwhile.

That is a group commit, as databases do it. One writer at a time syncs (an ``flock`` on its
descriptor of the WAL): it reads the newest ticket, syncs with :func:`os.fdatasync`, and
publishes the ticket as synced. The writers that committed meanwhile wait for that lock, and
each finds, on getting it, that a sync begun after its commit has already covered it: it
returns without a sync of its own. Under load one sync serves several commits, and the
machine spends far less time in the kernel flushing.

Why it keeps the promise: the WAL is written in order, and a sync flushes everything written
to the file before it, so when a sync begun after a commit returns, that commit (and every
earlier one) is on disk; SQLite recovers committed frames from the WAL after a crash. A WAL
that a checkpoint has meanwhile copied into the database and restarted is no loss either: in
``NORMAL`` mode SQLite syncs the WAL before a checkpoint and the database after it, and it
deletes the WAL only after such a checkpoint. The one difference from SQLite's own ``FULL``:
another connection may *read* a commit a moment before it is on disk. Nothing is acknowledged
before it is, and a later commit that read it is synced together with it (it comes after it in
the same file).

Used by a ledger that opened its file itself (a caller's own database may commit its own
transactions, which nothing would sync), on POSIX systems, with the file in WAL mode;
elsewhere the ledger sets SQLite's ``FULL``. Without the shared counters (no write lock, or a
lock file that cannot be mapped) every writer syncs after each of its commits, which is just as
safe and only slower.
"""

from __future__ import annotations

import os
from typing import Final

from storage.commit_counters import CommitCounters

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows (where the ledger never makes a WalSync)
    fcntl = None  # type: ignore[assignment]

__all__ = ["WAL_SUFFIX", "WalSync"]

#: SQLite's write-ahead log beside the database: ``payhooks.db-wal``.
WAL_SUFFIX: Final = "-wal"

_sync = getattr(os, "fdatasync", os.fsync)  # fdatasync where there is one, as SQLite does


class WalSync:
    """Syncs one database's write-ahead log to disk; see the module docstring.

    :param database: the database file's path.
    :param counters: the file holding the shared commit counters (the ledger's lock file,
        ``<database>.lock``); None, or a file that cannot be mapped: no group commit, every
        :meth:`sync` syncs.
    """

    __slots__ = (
        "_counters",
        "_counters_path",
        "_counters_pid",
        "_fd",
        "_inode",
        "_pid",
        "database",
        "path",
    )

    def __init__(
        self, database: str | os.PathLike[str], *, counters: str | os.PathLike[str] | None = None
    ) -> None:
        #: The database file, synced instead when it has no WAL (it is not in WAL mode).
        self.database = os.fspath(database)
        #: The write-ahead log.
        self.path = self.database + WAL_SUFFIX
        self._counters_path = None if counters is None else os.fspath(counters)
        self._counters: CommitCounters | None = None
        self._counters_pid = 0
        self._fd: int | None = None
        self._inode: tuple[int, int] | None = None
        self._pid = 0

    def ticket(self) -> int | None:
        """The ticket of the commit just made, for :meth:`sync`. Call it right after the
        commit, while still holding the ledger's write lock (tickets must follow commit order,
        one at a time). None when there are no shared counters."""
        counters = self._shared_counters()
        return None if counters is None else counters.next_ticket()

    def sync(self, ticket: int | None = None) -> bool:
        """Return once the WAL is on disk up to the commit that took ``ticket`` (None: as the
        WAL is now).

        :returns: True when this call synced; False when another writer's sync, begun after
            that commit, had already covered it.
        :raises OSError: the sync failed: what was committed may not be on disk.
        """
        counters = self._shared_counters()
        if ticket is None or counters is None or fcntl is None:
            self._sync_now()
            return True
        if counters.synced() >= ticket:
            return False
        fd = self._descriptor()
        if fd is None:  # no WAL: the commits are in the database file itself
            self._sync_database()
            return True
        # One syncing writer at a time: those that committed meanwhile wait here, and most of
        # them find their ticket covered when they get the lock.
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if counters.synced() >= ticket:
                return False
            # Read before the sync: every commit up to it is in the log. At least our own: this
            # sync begins after our commit whatever the shared count says.
            newest = max(counters.committed(), ticket)
            if self._replaced():
                # The WAL was replaced meanwhile (a change of journal mode, say): sync what is
                # there now, and publish nothing. `fd` stays open while it is locked.
                self._sync_path()
                return True
            _sync(fd)
            counters.mark_synced(newest)
            return True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _sync_now(self) -> None:
        fd = self._descriptor()
        if fd is None:
            self._sync_database()
        else:
            _sync(fd)

    def _sync_database(self) -> None:
        database = os.open(self.database, os.O_RDONLY)
        try:
            _sync(database)
        finally:
            os.close(database)

    def _sync_path(self) -> None:
        """Sync the WAL found at its path now (or the database, without one), through a
        descriptor of its own."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._sync_database()
            return
        try:
            _sync(fd)
        finally:
            os.close(fd)

    def _replaced(self) -> bool:
        """True when the WAL at the path is no longer the file this process has open."""
        try:
            identity = os.stat(self.path)
        except FileNotFoundError:
            return True
        return self._inode != (identity.st_dev, identity.st_ino)

    def _descriptor(self) -> int | None:
        """This process's descriptor of the current WAL, reopened when the file was replaced
        or the process forked; None when there is no WAL. Never called while :meth:`sync`
        holds the lock on the descriptor (reopening closes it)."""
        try:
            identity = os.stat(self.path)
        except FileNotFoundError:
            return None
        current = self._fd
        if (
            current is None
            or self._inode != (identity.st_dev, identity.st_ino)
            or self._pid != os.getpid()
        ):
            current = self._reopen()
        return current

    def _shared_counters(self) -> CommitCounters | None:
        if self._counters_path is None:
            return None
        if self._counters is None or self._counters_pid != os.getpid():
            self._drop_counters()
            try:
                self._counters = CommitCounters(self._counters_path)
            except OSError:
                self._counters_path = None  # not mappable here: sync every commit
                return None
            self._counters_pid = os.getpid()
        return self._counters

    def _drop_counters(self) -> None:
        if self._counters is not None and self._counters_pid == os.getpid():
            self._counters.close()
        self._counters = None

    def _reopen(self) -> int:
        """Open the WAL (again: it was replaced, or this is a forked child)."""
        self._close_descriptor()
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        opened = os.fstat(fd)
        self._fd, self._inode, self._pid = fd, (opened.st_dev, opened.st_ino), os.getpid()
        return fd

    def _close_descriptor(self) -> None:
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = None
        self._inode = None

    def close(self) -> None:
        """Close this process's descriptor of the WAL and its map of the counters."""
        self._close_descriptor()
        self._drop_counters()

    def __repr__(self) -> str:
        return f"<WalSync {self.path!r}>"
