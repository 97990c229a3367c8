"""A PostgreSQL ledger's health, in one query that writes nothing.

A plain ``SELECT`` in autocommit takes no transaction id, so a load balancer asking every
second consumes none. It reads the schema's version (the migrations table), whether this
session's transactions are read-only (``default_transaction_read_only``, a standby), whether the
server is a standby in recovery, and whether the role may ``INSERT`` into ``deliveries``.
"""

from __future__ import annotations

from typing import Any

from payhooks.storage.health import LedgerHealth, check_schema
from payhooks.storage.postgresql.schema import SCHEMA_VERSION, schema_version

__all__ = ["check_health"]

_WRITABLE = """
SELECT current_setting('transaction_read_only'),
       pg_is_in_recovery(),
       to_regclass('deliveries') IS NOT NULL
           AND has_table_privilege('deliveries', 'INSERT')
"""


def check_health(conn: Any) -> LedgerHealth:
    """The health of the ledger ``conn`` (a psycopg connection in autocommit) reaches."""
    found = check_schema(lambda: schema_version(conn), SCHEMA_VERSION)
    if isinstance(found, LedgerHealth):
        return found
    version = found
    read_only, in_recovery, may_insert = conn.execute(_WRITABLE).fetchone()
    if in_recovery:
        return LedgerHealth("ledger_read_only", "The PostgreSQL server is a standby.", version)
    if read_only == "on":
        return LedgerHealth(
            "ledger_read_only", "This session's transactions are read-only.", version
        )
    if not may_insert:
        return LedgerHealth(
            "ledger_read_only", "This role may not insert into the ledger's tables.", version
        )
    return LedgerHealth.healthy(version)
