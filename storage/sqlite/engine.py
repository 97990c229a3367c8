"""The SQLite engine: opening and setting up the connection, reading through it, closing it.

Everything the ledger does that is SQLite's alone, and not a write, is here: the pragmas
(busy timeout, foreign keys, WAL, ``synchronous``), the choice of how a ``FULL`` ledger makes
its commits durable, migrating on open, turning ``sqlite3`` errors into the ledger's as rows are
read. Writes go through :class:`~payhooks.storage.sqlite.writer.Writer`, the write protocol.

:class:`~payhooks.storage.Ledger` opens one :class:`SQLiteEngine` for a path or a
``sqlite_utils.Database``. The PostgreSQL engine (:mod:`payhooks.storage.postgresql.engine`,
for a ``postgresql://`` URL) offers the same few members: ``read()``, ``stream()``,
``writer.write()``, ``schema_version``, ``close()``; the table modules take either's
connection.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from sqlite_utils import Database

from payhooks.storage.errors import ReadTimeLimitError, SchemaBehindError, StorageError
from payhooks.storage.health import LedgerHealth
from payhooks.storage.read_limits import ReadDeadline
from payhooks.storage.sql import Connection, Cursor
from payhooks.storage.sqlite.errors import from_sqlite_error, translate_errors
from payhooks.storage.sqlite.health import check_health
from payhooks.storage.sqlite.opening import check_ledger, connect_read_only
from payhooks.storage.sqlite.schema import SCHEMA_VERSION, migrate
from payhooks.storage.sqlite.wal_sync import WalSync
from payhooks.storage.sqlite.write_lock import WriteLock
from payhooks.storage.sqlite.writer import Writer

__all__ = ["PROGRESS_STEPS", "SQLiteEngine", "configure"]

_T = TypeVar("_T")

#: How many virtual machine steps SQLite runs between two looks at a read's deadline: about a
#: tenth of a millisecond of work, so an interrupted read stops within a millisecond of it.
PROGRESS_STEPS = 1000


def configure(db: Database, *, busy_timeout_ms: int) -> None:
    """Per-connection settings: the busy timeout, foreign keys, WAL (persistent, set once).

    WAL cannot be switched on inside a transaction; a caller's database that is in one keeps its
    journal mode until a later open.
    """
    conn = db.conn
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA foreign_keys = ON")
    if not db.memory and not conn.in_transaction:
        _enable_wal(db, busy_timeout_ms)


# SQLITE_BUSY and SQLITE_LOCKED: another connection holds the lock.
_BUSY_CODES = frozenset({5, 6})


def _enable_wal(db: Database, busy_timeout_ms: int) -> None:
    """Switch the file to WAL, retrying while other connections hold it, up to the timeout.

    When several processes open a new file at once, the switch can fail with ``SQLITE_BUSY``
    straight away: SQLite does not wait on the busy handler for a journal-mode change. So the
    wait is done here, with the same budget as the busy timeout.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    pause = 0.001
    while True:
        try:
            if db.journal_mode != "wal":
                db.enable_wal()
            return
        except sqlite3.OperationalError as err:
            code = getattr(err, "sqlite_errorcode", 0) & 0xFF
            if code not in _BUSY_CODES or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _database_file(db: Database) -> str | None:
    """The path of ``db``'s main file; None for a database in memory or a temporary one."""
    for _, name, file in db.conn.execute("PRAGMA database_list"):
        if name == "main":
            return str(file) or None
    return None  # pragma: no cover - SQLite always lists main


def _wal_sync(db: Database, file: str | None) -> WalSync | None:
    """The :class:`WalSync` of a ledger's own file in WAL mode on a POSIX system: it watches
    the log after each commit and, for a ``FULL`` ledger, syncs it outside the write lock;
    None elsewhere (then SQLite's own ``FULL`` syncs inside the commit, and nobody watches)."""
    if file is None or os.name != "posix" or db.conn.in_transaction:
        return None
    (mode,) = db.conn.execute("PRAGMA journal_mode").fetchone()
    return WalSync(file) if str(mode).lower() == "wal" else None


def _check_read_only(db: Database, name: str) -> int:
    """The version of a file opened read-only, which is never migrated.

    :raises NotALedgerError: no payhooks schema at all.
    :raises SchemaBehindError: a schema older than this code's.
    """
    version = check_ledger(db, name)
    if version < SCHEMA_VERSION:
        raise SchemaBehindError(
            f"The ledger {name} has schema version {version} and this payhooks needs "
            f"{SCHEMA_VERSION}; opened read-only, it is not migrated: run `payhooks migrate` "
            "with a role that may write it."
        )
    return version


class SQLiteEngine:
    """One SQLite connection, set up and migrated for the ledger.

    :param path_or_database: a file path (opened here and closed by :meth:`close`), or a
        ``sqlite_utils.Database`` the caller owns and closes.
    :param busy_timeout_ms: how long a write waits for the locks.
    :param synchronous: ``"FULL"`` or ``"NORMAL"``, already checked by the ledger.
    :param write_lock: whether writes queue on the file's
        :class:`~payhooks.storage.sqlite.write_lock.WriteLock`.
    :param check_same_thread: ``sqlite3``'s guard for a file opened here; False lets another
        thread close it.
    :param create: False to open only an existing ledger: a file without the payhooks schema
        (another application's database) is refused with :class:`NotALedgerError` before
        anything is changed in it (no table, no WAL).
    :param read_only: open the file so that nothing is written to it (no WAL switch, no
        migration, ``query_only``); a schema behind is :class:`SchemaBehindError`.

    A connection this engine opened is closed again when setting it up or migrating fails.
    """

    __slots__ = (
        "_busy_timeout_ms",
        "_closed",
        "_conn",
        "_deadline",
        "database",
        "file",
        "name",
        "owns_database",
        "schema_version",
        "writer",
    )

    def __init__(
        self,
        path_or_database: str | os.PathLike[str] | Database,
        *,
        busy_timeout_ms: int,
        synchronous: str,
        write_lock: bool,
        check_same_thread: bool = True,
        create: bool = True,
        read_only: bool = False,
    ) -> None:
        owns = not isinstance(path_or_database, Database)
        #: The path opened, or ``"<database>"`` for a caller's database: for ``repr``.
        self.name = "<database>"
        file: str | None = None
        wal_sync: WalSync | None = None
        sync_commits = False
        with translate_errors():
            if isinstance(path_or_database, Database):
                db = path_or_database
            else:
                self.name = os.fspath(path_or_database)
                if read_only:
                    conn = connect_read_only(self.name, check_same_thread=check_same_thread)
                else:
                    conn = sqlite3.connect(self.name, check_same_thread=check_same_thread)
                db = Database(conn, execute_plugins=False)
            try:
                if read_only:
                    db.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                    db.conn.execute("PRAGMA query_only = ON")
                    version = _check_read_only(db, self.name)
                elif not create:
                    check_ledger(db, self.name)
                if not read_only:
                    configure(db, busy_timeout_ms=busy_timeout_ms)
                    file = _database_file(db)
                    # A caller's database may commit its own transactions, which nothing would
                    # sync (nor watch). The log is watched in either mode, synced by us under FULL.
                    wal_sync = _wal_sync(db, file) if owns else None
                    sync_commits = wal_sync is not None and synchronous == "FULL"
                    if not db.conn.in_transaction:  # SQLite refuses the change inside one
                        pragma = "NORMAL" if sync_commits else synchronous
                        db.conn.execute(f"PRAGMA synchronous = {pragma}")
                    version = migrate(db)
            except BaseException:
                if owns:
                    db.close()
                raise
        #: The ``sqlite_utils.Database`` written and read.
        self.database = db
        self._conn = db.conn
        #: Whether :meth:`close` closes the database (it was opened here).
        self.owns_database = owns
        #: How many schema migrations the file has (the code's ``SCHEMA_VERSION`` once open).
        self.schema_version = version
        #: The main file's path (None in memory, and for a file opened read-only).
        self.file = file
        self._busy_timeout_ms = busy_timeout_ms
        #: Makes every write: :meth:`Writer.write`.
        self.writer = Writer(
            db,
            busy_timeout_ms=busy_timeout_ms,
            write_lock=WriteLock(file) if write_lock and file is not None else None,
            wal_sync=wal_sync,
            sync_commits=sync_commits,
        )
        self._closed = False
        self._deadline: ReadDeadline | None = None

    #: Which engine this is.
    kind = "sqlite"

    @staticmethod
    def lock_payment(conn: Connection, external_identifier: str) -> None:
        """Nothing to take: SQLite runs one write transaction at a time (``BEGIN IMMEDIATE``)."""

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection, for reads outside a write; ``sqlite3`` errors become the ledger's.

        What :func:`~payhooks.storage.sqlite.errors.translate_errors` does, written out so
        that a read costs one context manager, as it did before the engine was split out.
        """
        try:
            yield self._conn
        except sqlite3.Error as err:
            raise self._error(err) from err

    #: The connection, for work that makes its own transactions (the finance rollup's
    #: refresh): a time limit never interrupts a statement inside one.
    session = read

    def _error(self, err: sqlite3.Error) -> StorageError:
        """The ledger's error for ``err``: an interrupt under a time limit is the limit's."""
        deadline = self._deadline
        interrupted = getattr(err, "sqlite_errorcode", None) == sqlite3.SQLITE_INTERRUPT
        if deadline is not None and interrupted:
            return ReadTimeLimitError(deadline.limit_ms)
        return from_sqlite_error(err)

    @contextmanager
    def time_limit(self, limit_ms: int) -> Iterator[None]:
        """Interrupt any read that runs on past ``limit_ms`` from now, until the block ends.

        A progress handler looks at the clock every :data:`PROGRESS_STEPS` steps and, once the
        deadline has passed, makes SQLite stop the statement (``SQLITE_INTERRUPT``), raised as
        :class:`ReadTimeLimitError`. A statement inside a transaction (a write) is never
        interrupted. Inside another limit that ends first, the outer one holds.
        """
        outer = self._deadline
        deadline = ReadDeadline(limit_ms)
        if outer is not None and outer.at <= deadline.at:
            yield
            return
        self._deadline = deadline
        if outer is None:
            self._conn.set_progress_handler(self._past_deadline, PROGRESS_STEPS)
        try:
            yield
        finally:
            self._deadline = outer
            if outer is None:
                self._conn.set_progress_handler(None, 0)

    def _past_deadline(self) -> int:
        """SQLite's progress handler: nonzero interrupts the running statement."""
        deadline = self._deadline
        if deadline is None or self._conn.in_transaction:
            return 0
        return 1 if time.monotonic() >= deadline.at else 0

    def stream(
        self,
        query: Callable[[Connection], Cursor],
        convert: Callable[[tuple[Any, ...]], _T],
    ) -> Iterator[_T]:
        """Run ``query(conn)`` (a table module's select) now, and yield its rows converted,
        straight from the cursor: never more than one row in memory; the cursor is closed when
        the caller stops early too."""
        with self.read() as conn:
            cursor = query(conn)
        return self._rows(cursor, convert)

    def stream_apart(
        self,
        query: Callable[[Connection], Cursor],
        convert: Callable[[tuple[Any, ...]], _T],
    ) -> Iterator[_T]:
        """:meth:`stream`: a SQLite ledger's connection is already its own (one per ledger,
        shared with no other thread), so a long read holds nothing anyone else waits for; in
        WAL mode it only keeps a checkpoint from passing its snapshot until it ends."""
        return self.stream(query, convert)

    def _rows(self, cursor: Cursor, convert: Callable[[tuple[Any, ...]], _T]) -> Iterator[_T]:
        try:
            try:
                for values in cursor:
                    yield convert(values)
            except sqlite3.Error as err:
                raise self._error(err) from err
        finally:
            with suppress(sqlite3.Error):
                cursor.close()

    def health(self, *, min_free_bytes: int, lock_timeout_ms: int) -> LedgerHealth:
        """:func:`~payhooks.storage.sqlite.health.check_health` on this connection."""
        with self.read() as conn:
            return check_health(
                conn,
                self.file,
                busy_timeout_ms=self._busy_timeout_ms,
                min_free_bytes=min_free_bytes,
                lock_timeout_ms=lock_timeout_ms,
            )

    def close(self) -> None:
        """Close the writer's descriptors and, when it was opened here, the connection, even
        when closing a descriptor fails. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self.writer.close()
        finally:
            if self.owns_database:
                with translate_errors():
                    self.database.close()
