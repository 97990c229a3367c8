"""The ledger on SQLite: what is SQLite's alone (the flock write queue, the WAL sync, the
schema and its migrations, the translation of ``sqlite3`` errors). Modules here import the
engine-neutral ones of :mod:`payhooks.storage`, never the other way round."""

from __future__ import annotations

from payhooks.storage.sqlite.errors import from_sqlite_error, translate_errors
from payhooks.storage.sqlite.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    TRIGGERS,
    VIEWS,
    configure,
    create_views,
    migrate,
    schema_version,
)
from payhooks.storage.sqlite.wal_sync import WalSync
from payhooks.storage.sqlite.write_lock import WriteLock

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TRIGGERS",
    "VIEWS",
    "WalSync",
    "WriteLock",
    "configure",
    "create_views",
    "from_sqlite_error",
    "migrate",
    "schema_version",
    "translate_errors",
]
