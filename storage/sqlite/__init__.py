"""The ledger on SQLite: everything that is SQLite's alone.

The rule of this folder: it holds the engine-specific machinery, and nothing above it knows
SQLite's locks, pragmas or durability tricks. :mod:`.engine` opens and sets up the connection
and reads through it; :mod:`.writer` is the write protocol (the flock queue of
:mod:`.write_lock`, ``BEGIN IMMEDIATE``, savepoints, commit, the log sync of :mod:`.wal_sync`);
:mod:`.schema` holds the schema, written out, one migration per release; :mod:`.errors`
turns ``sqlite3`` errors into the ledger's.
Modules here import the engine-neutral ones of :mod:`payhooks.storage` (errors, rows, the table
modules' SQL), never the other way round; only :class:`payhooks.storage.Ledger` chooses this
engine.

PostgreSQL (psycopg 3) is :mod:`payhooks.storage.postgresql`, beside this one, with the same
shape: an engine with ``read()``, ``stream()``, ``writer.write()``, ``schema_version`` and
``close()``, its own schema and migrations, its own error translation, and no lock file.
"""

from __future__ import annotations

from payhooks.storage.sqlite.backup import backup_ledger
from payhooks.storage.sqlite.engine import SQLiteEngine, configure
from payhooks.storage.sqlite.errors import from_sqlite_error, translate_errors
from payhooks.storage.sqlite.schema import MIGRATIONS, SCHEMA_VERSION, migrate, schema_version
from payhooks.storage.sqlite.wal_sync import WalReplacedError, WalSync
from payhooks.storage.sqlite.write_lock import WriteLock
from payhooks.storage.sqlite.writer import Writer

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLiteEngine",
    "WalReplacedError",
    "WalSync",
    "WriteLock",
    "Writer",
    "backup_ledger",
    "configure",
    "from_sqlite_error",
    "migrate",
    "schema_version",
    "translate_errors",
]
