"""The write protocol on SQLite: how every one of the ledger's writes is made, and made durable.

A write, from start to return:

1. The file's :class:`~payhooks.storage.sqlite.write_lock.WriteLock` (``<file>.lock``), a
   ``flock`` queue whose waiters wake within a fraction of a millisecond of its release, up to
   the busy timeout. Without it (asked not to, a database in memory, no ``fcntl``, a folder
   where the lock file cannot be made) SQLite's busy handler does all the waiting.
2. ``BEGIN IMMEDIATE``: SQLite's own write lock, taken up front. A deferred transaction that
   reads first and writes later can fail at once with ``SQLITE_BUSY`` when another process
   wrote in between (WAL snapshots cannot be upgraded), without waiting on the busy timeout;
   taking the lock first makes the busy timeout the only wait. Only writers outside the flock
   queue (SQL tools, migrations) can hold it now, so it waits for what is left of the busy
   timeout.
3. The statements (the table modules' functions, given the connection), then ``COMMIT``; any
   exception rolls everything back instead.
4. Both locks released, then, for a ``FULL`` ledger on its own WAL file, the log synced to disk
   (:class:`~payhooks.storage.sqlite.wal_sync.WalSync`) before the call returns: the next writer
   commits meanwhile and concurrent syncs overlap, a group commit. A sync that fails raises
   :class:`~payhooks.storage.StorageUnavailableError`, since the write may not be on disk.

Inside a transaction already open (:meth:`Writer.write` nested, which is what
:meth:`payhooks.storage.Ledger.transaction` is, or the caller's own on a ``Database`` it passed
in) a write is a savepoint instead: undone alone when it raises, committed with the rest.

Every ``sqlite3`` error is raised as a :class:`~payhooks.storage.StorageError`. A PostgreSQL
engine has its own protocol (a pooled connection, a transaction, no lock file), in its own
package beside this one; the table modules run inside either.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from sqlite_utils import Database

from payhooks.storage.errors import NESTED_WRITE_FAILED, StorageError, StorageUnavailableError
from payhooks.storage.sqlite.errors import translate_errors
from payhooks.storage.sqlite.wal_sync import WalReplacedError, WalSync
from payhooks.storage.sqlite.write_lock import WriteLock

__all__ = ["Writer"]


@contextmanager
def _savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    """A savepoint inside the open transaction: undone alone when the block raises.

    One fixed name serves every level (SQLite releases and rolls back to the innermost of that
    name), so the statements stay in the connection's statement cache.
    """
    conn.execute("SAVEPOINT payhooks_write")
    try:
        yield
    except BaseException:
        # An error such as a full disk can end the whole transaction, savepoints included:
        # then there is nothing left to undo, and trying would hide the original error.
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK TO payhooks_write")
                conn.execute("RELEASE payhooks_write")
        raise
    conn.execute("RELEASE payhooks_write")


class Writer:
    """Makes one connection's writes; see the module docstring.

    :param db: the ledger's database (its connection is written through).
    :param busy_timeout_ms: the longest a write waits for the locks, both together.
    :param write_lock: the file's flock queue, or None for SQLite's busy handler alone.
    :param wal_sync: watches the log after each commit (and syncs it, with ``sync_commits``),
        or None when there is no log of the ledger's own to watch.
    :param sync_commits: sync the log after each durable commit (the ledger's ``FULL``);
        otherwise SQLite's own ``synchronous`` setting is all there is.
    """

    __slots__ = (
        "_busy_timeout_ms",
        "_conn",
        "_db",
        "_failed",
        "_joining",
        "sync_commits",
        "wal_sync",
        "write_lock",
    )

    def __init__(
        self,
        db: Database,
        *,
        busy_timeout_ms: int,
        write_lock: WriteLock | None,
        wal_sync: WalSync | None,
        sync_commits: bool = True,
    ) -> None:
        self._db = db
        self._conn = db.conn
        # Set while this writer's own transaction has nested writes join it without savepoints.
        self._joining = self._failed = False
        self._busy_timeout_ms = busy_timeout_ms
        self.write_lock = write_lock
        self.wal_sync = wal_sync
        self.sync_commits = sync_commits

    @contextmanager
    def write(
        self, *, durable: bool = True, savepoints: bool = True
    ) -> Iterator[sqlite3.Connection]:
        """One write transaction, or a savepoint of the one already open; yields the
        connection to write through.

        ``durable=False`` skips the ``FULL`` ledger's sync after the commit (for writes that
        acknowledge nothing: the next synced write takes them to disk with its own).
        ``savepoints=False`` makes the writes nested in this one join it without savepoints
        (:meth:`payhooks.storage.Ledger.transaction`): if one raises, the transaction is rolled
        back at the end of the block even when the caller caught the error.

        :raises StorageUnavailableError: the write lock was not free within the busy timeout,
            SQLite's lock neither, or the commit could not be synced; nothing is stored, except
            after a failed sync, where the commit may or may not be on disk.
        :raises StorageError: a write nested without a savepoint failed and the block went on.
        """
        conn = self._conn
        with translate_errors():
            if conn.in_transaction:
                if self._joining:
                    try:
                        yield conn
                    except BaseException:
                        self._failed = True
                        raise
                else:
                    with _savepoint(conn):
                        yield conn
                return
            waited = self._take_write_lock()
            try:
                self._begin(conn, waited)
                self._joining, self._failed = not savepoints, False
                try:
                    yield conn
                    if self._failed:
                        raise StorageError(NESTED_WRITE_FAILED)
                    conn.execute("COMMIT")
                except BaseException:
                    with suppress(sqlite3.Error):
                        self._db.rollback()  # a no-op when the error already ended it
                    raise
                finally:
                    self._joining = self._failed = False
            finally:
                if self.write_lock is not None:
                    self.write_lock.release()
        if self.wal_sync is not None:
            self._after_commit(self.wal_sync, sync=durable and self.sync_commits)

    def _take_write_lock(self) -> float | None:
        """Take the file's :class:`WriteLock` before SQLite's lock, so a waiting writer wakes
        as soon as the other one commits; the seconds it waited, or None when there is no
        such lock (then SQLite's busy handler does the waiting)."""
        if self.write_lock is None:
            return None
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        try:
            return self.write_lock.acquire(deadline)
        except TimeoutError as err:
            raise StorageUnavailableError(
                "Another writer held the ledger's write lock for longer than the busy "
                f"timeout ({self._busy_timeout_ms} ms)."
            ) from err

    def _begin(self, conn: sqlite3.Connection, waited: float | None) -> None:
        """``BEGIN IMMEDIATE``, waiting on SQLite's lock (held only by writers outside the write
        lock: SQL tools, migrations) for what is left of the busy timeout after ``waited``."""
        if not waited or waited < 0.001:
            conn.execute("BEGIN IMMEDIATE")
            return
        left = max(1, self._busy_timeout_ms - int(waited * 1000))
        conn.execute(f"PRAGMA busy_timeout = {left}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        finally:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")

    def _after_commit(self, wal_sync: WalSync, *, sync: bool) -> None:
        """Check that the commit went to the log at the path, and with ``sync`` put it on disk
        before the write returns (``FULL``), once both locks are released, so that the next
        writer commits meanwhile."""
        try:
            if sync:
                wal_sync.sync()
            else:
                wal_sync.check()
        except WalReplacedError as err:
            raise StorageUnavailableError(
                f"The ledger's write-ahead log {wal_sync.path} was deleted or replaced while "
                "open: a crash would lose every write since. Restart the process, and restore "
                "the log if it can be found."
            ) from err
        except OSError as err:
            raise StorageUnavailableError(
                f"The write was committed but could not be synced to disk ({err.strerror})."
            ) from err

    def close(self) -> None:
        """Close the lock file's and the log's descriptors (the connection is not this
        object's to close). Both are closed even when the first fails."""
        try:
            if self.write_lock is not None:
                self.write_lock.close()
        finally:
            if self.wal_sync is not None:
                self.wal_sync.close()
