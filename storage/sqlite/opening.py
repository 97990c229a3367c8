"""Opening a SQLite file without changing it: read-only connections, and what an existing file
holds, read before anything is written to it.

``payhooks migrate`` and the engine's existing-only open must refuse a file that is not a
ledger with its bytes (and its modification time) as they were, and the read-only ledger,
``payhooks backup`` and the commands that only read must work in a folder this process may not
write, where SQLite cannot create a WAL file's ``-shm`` index. Whether this process may write is
asked of the kernel with ``access(2)``, which answers for this process: root, and a file or
folder made immutable (``chattr +i``), included.
"""

from __future__ import annotations

import os
import sqlite3
from urllib.parse import quote

from sqlite_utils import Database

from payhooks.storage.errors import NotALedgerError
from payhooks.storage.sqlite.errors import translate_errors
from payhooks.storage.sqlite.schema import schema_version

__all__ = [
    "NOT_A_DATABASE",
    "check_ledger",
    "connect_read_only",
    "may_write",
    "read_existing_schema",
]

#: SQLITE_NOTADB: the file is not an SQLite database at all.
NOT_A_DATABASE = 26


def _folder(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))


def may_write(path: str) -> bool:
    """Whether this process may write ``path`` (when it exists) and create files beside it, as
    SQLite must (``-wal``, ``-shm``, the journal, payhooks' lock file)."""
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return False
    return os.access(_folder(path), os.W_OK | os.X_OK)


def connect_read_only(
    path: str, *, check_same_thread: bool = True, timeout_s: float = 5.0
) -> sqlite3.Connection:
    """Open ``path`` so that SQLite writes nothing to it (``mode=ro``).

    A WAL file opened read-only still needs its ``-shm`` index, which SQLite creates beside it.
    When this process may not write the folder, SQLite cannot create it; if no ``-wal`` is there
    either, no connection has the file open (the last one to close removes it), so it is opened
    ``immutable``, which needs no index and takes no lock: a copy made read-only, a backup on a
    read-only mount, a ledger in a folder only its owner may write while no receiver runs. A
    writer that starts while such a read is under way is not seen by it.
    """
    absolute = os.path.abspath(path)
    frozen = not os.access(_folder(absolute), os.W_OK) and not os.path.exists(absolute + "-wal")
    uri = f"file:{quote(absolute)}?mode=ro" + ("&immutable=1" if frozen else "")
    return sqlite3.connect(uri, uri=True, check_same_thread=check_same_thread, timeout=timeout_s)


def check_ledger(db: Database, name: str) -> int:
    """The schema version of ``db``, which must be a payhooks ledger.

    :raises NotALedgerError: ``db`` has no payhooks migration (or is not SQLite at all).
    """
    version = _version_or_zero(db)
    if version == 0:
        raise NotALedgerError(
            f"{name} is not a payhooks ledger (it holds no payhooks schema); nothing was changed "
            "in it."
        )
    return version


def _version_or_zero(db: Database) -> int:
    try:
        return schema_version(db)
    except sqlite3.DatabaseError as err:
        if getattr(err, "sqlite_errorcode", 0) & 0xFF != NOT_A_DATABASE:
            raise
        return 0


def read_existing_schema(path: str, *, busy_timeout_ms: int) -> int | None:
    """The payhooks schema version of the existing file at ``path``, read without writing a
    byte of it, in a folder this process may not write too; None when the file holds nothing
    at all (zero bytes, or a SQLite database without a table), so that making a ledger of it
    loses nothing.

    Where this process may write, a plain connection reads it (as the last connection, it
    removes the ``-wal`` and ``-shm`` it made on closing, which a read-only one cannot); where
    it may not, :func:`connect_read_only`.

    :raises NotALedgerError: not a SQLite database, or one that holds other tables and no
        payhooks schema.
    :raises SchemaVersionError: a newer payhooks migrated it.
    :raises StorageError: it cannot be read (``StorageUnavailableError`` when it may be later).
    """
    if os.path.getsize(path) == 0:
        return None
    with translate_errors():
        if may_write(path):
            conn = sqlite3.connect(path, timeout=busy_timeout_ms / 1000)
        else:
            conn = connect_read_only(path, timeout_s=busy_timeout_ms / 1000)
        try:
            db = Database(conn, execute_plugins=False)
            version = _version_or_zero(db)
            if version:
                return version
            if _is_database(db) and not db.conn.execute("SELECT 1 FROM sqlite_master").fetchone():
                return None
            return check_ledger(db, path)  # raises: no payhooks schema
        finally:
            conn.close()


def _is_database(db: Database) -> bool:
    try:
        db.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as err:
        if getattr(err, "sqlite_errorcode", 0) & 0xFF != NOT_A_DATABASE:
            raise
        return False
    return True
