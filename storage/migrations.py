"""Migrating a ledger, on either engine, and moving one to PostgreSQL: what ``payhooks
migrate`` and ``payhooks copy-ledger`` run.

A SQLite file is migrated whenever a ledger opens it (the one host that opens it does it under
SQLite's write lock). A PostgreSQL database is migrated only by :func:`migrate`, a deploy step:
several hosts share it, the receivers' role need not be allowed to create tables, and new code
must not change the schema under old receivers still serving. Running it again, or from
several hosts at once, is safe: PostgreSQL's migration takes ``pg_advisory_xact_lock`` and
re-reads what is applied under it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from payhooks.storage.engines import require_postgres
from payhooks.storage.errors import StorageUnavailableError
from payhooks.storage.rows import CopyReport
from payhooks.storage.targets import is_postgres_url, redacted
from payhooks.storage.times import system_clock, to_text

__all__ = ["CopyReport", "copy_ledger", "migrate"]


def copy_ledger(
    sqlite_path: str | os.PathLike[str], url: str, progress: Callable[[str], None] | None = None
) -> CopyReport:
    """Copy the SQLite ledger at ``sqlite_path`` into the empty PostgreSQL database at ``url``
    and check the copy (:mod:`payhooks.storage.postgresql.copy`; needs the ``postgres`` extra);
    ``progress`` is called with each table's name as its copy starts.

    :raises StorageError: the file or the server cannot be used, or the database already
        holds a ledger's rows; nothing is copied.
    :raises PostgresExtraMissingError: psycopg is not installed.
    """
    require_postgres()
    from payhooks.storage.postgresql.copy import copy_ledger as copy

    return copy(sqlite_path, url, progress)


def migrate(
    target: str | os.PathLike[str], *, connect_timeout_s: int = 10, busy_timeout_ms: int = 5000
) -> tuple[int, int]:
    """Bring the ledger at ``target`` (a file path or a ``postgresql://`` URL) to this code's
    schema version.

    A SQLite file that does not exist, or holds nothing at all (zero bytes, as ``touch`` leaves
    it, or a database without a table), becomes a new ledger. Any other file is read first
    without writing a byte of it: one that is not a ledger (not SQLite, or another
    application's tables) is refused, and a current ledger is left as it is, so that neither
    needs a folder this process may write.

    :returns: the version before and after.
    :raises StorageError: the database cannot be reached or written
        (``StorageUnavailableError``), it is not a payhooks ledger (``NotALedgerError``), it
        was migrated by a newer payhooks (``SchemaVersionError``), or psycopg is missing
        (``PostgresExtraMissingError``). Nothing was changed in a SQLite file then.
    """
    if not is_postgres_url(target):
        return _migrate_file(os.fspath(target), busy_timeout_ms)

    require_postgres()
    import psycopg

    from payhooks.storage.postgresql import schema
    from payhooks.storage.postgresql.errors import translate_errors

    url = str(target)
    with translate_errors():
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout_s)
        except psycopg.OperationalError as err:
            raise psycopg.OperationalError(f"cannot connect to {redacted(url)}: {err}") from err
        with conn:
            before = schema.schema_version(conn)
            after = schema.migrate(conn, now=to_text(system_clock()))
    return before, after


def _migrate_file(path: str, busy_timeout_ms: int) -> tuple[int, int]:
    from payhooks.storage.ledger import Ledger
    from payhooks.storage.sqlite.opening import may_write, read_existing_schema
    from payhooks.storage.sqlite.schema import SCHEMA_VERSION

    before = (
        read_existing_schema(path, busy_timeout_ms=busy_timeout_ms)
        if os.path.exists(path)
        else None
    )
    if before == SCHEMA_VERSION:
        return before, before
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise StorageUnavailableError(f"Cannot make a ledger at {path}: its folder does not exist.")
    if not may_write(path):
        what = "make a ledger" if before is None else "migrate the ledger"
        raise StorageUnavailableError(
            f"Cannot {what} at {path}: this process may not write it or its folder (SQLite "
            "writes its -wal and -shm files beside it); nothing was changed."
        )
    with Ledger(path, busy_timeout_ms=busy_timeout_ms) as ledger:
        return before or 0, ledger.schema_version
