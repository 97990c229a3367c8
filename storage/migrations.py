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


def migrate(target: str | os.PathLike[str], *, connect_timeout_s: int = 10) -> tuple[int, int]:
    """Bring the ledger at ``target`` (a file path or a ``postgresql://`` URL) to this code's
    schema version.

    :returns: the version before and after.
    :raises StorageError: the database cannot be reached (``StorageUnavailableError``), it
        was migrated by a newer payhooks (``SchemaVersionError``), or psycopg is missing
        (``PostgresExtraMissingError``).
    """
    if not is_postgres_url(target):
        from sqlite_utils import Database

        from payhooks.storage.ledger import Ledger
        from payhooks.storage.sqlite.schema import schema_version

        path = os.fspath(target)
        before = 0
        if os.path.exists(path):
            probe = Database(path, execute_plugins=False)
            try:
                before = schema_version(probe)
            finally:
                probe.close()
        with Ledger(path) as ledger:
            return before, ledger.schema_version

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
