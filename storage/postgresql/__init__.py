"""The ledger on PostgreSQL (psycopg 3, the ``payhooks[postgres]`` extra): what is its alone.

The rule of this folder, as of ``sqlite/``: engine-specific machinery only, and nothing above it
knows PostgreSQL's pools, transactions or spellings. :mod:`.engine` checks the schema and reads;
:mod:`.pools` keeps one connection pool per process and database, safe across ``fork()``, and
:mod:`.dedicated` opens a connection of its own for a read too long to hold one of the pool's;
:mod:`.writer` is the write protocol (a transaction at READ COMMITTED, savepoints inside, no
lock file); :mod:`.schema` holds the schema, written out, one migration per release,
parallel to SQLite's; :mod:`.dialect` and :mod:`.connection` let the table modules
run their one SQL text here; :mod:`.errors` turns ``psycopg`` errors into the ledger's; and
:mod:`.copy` moves a SQLite ledger here. Only :class:`payhooks.storage.Ledger` chooses this
engine, for a ``postgresql://`` URL.
"""

from __future__ import annotations

from payhooks.storage.postgresql.engine import PostgresEngine
from payhooks.storage.postgresql.errors import from_postgres_error, translate_errors
from payhooks.storage.postgresql.pools import DEFAULT_POOL_SIZE, close_pools, pool_for
from payhooks.storage.postgresql.schema import MIGRATIONS, SCHEMA_VERSION, migrate, schema_version

__all__ = [
    "DEFAULT_POOL_SIZE",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "PostgresEngine",
    "close_pools",
    "from_postgres_error",
    "migrate",
    "pool_for",
    "schema_version",
    "translate_errors",
]
