"""The finance rollup's tables on PostgreSQL, part of the 0.1.0 migration (:mod:`.schema` lists them
among its tables); the same names and columns as on SQLite.

Written only by the rollup's refresh (:mod:`payhooks.storage.reads.rollup`), never by the
receiver: rows opened and money paid per local hour of the rollup's zone (``hour``: the UTC
instant the hour starts; ``day``: its local date), the days computed and revised, the days
still to compute, and the watermarks. docs/reconciliation.md describes each table.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ORDERED_IDS", "ROLLUP_TABLES"]

#: Before ``payments``: its ``id`` column's default, the order registrations were made in (the
#: rollup's watermark). The id is taken once the transaction has an id of its own, so a
#: transaction holding an id not committed yet is always one a snapshot names as running.
ORDERED_IDS: Final = (
    """
    CREATE FUNCTION payhooks_ordered_id(sequence regclass) RETURNS bigint LANGUAGE sql
    VOLATILE AS $$
        SELECT CASE WHEN pg_current_xact_id() IS NULL THEN NULL ELSE nextval(sequence) END
    $$""",
    "CREATE SEQUENCE payments_id_seq",
)

#: In order: each table (no index of their own beyond the keys: a period is a range of ``hour``).
ROLLUP_TABLES: Final = (
    """
    CREATE TABLE finance_hours_opened (
        hour TEXT COLLATE "C" NOT NULL,
        day TEXT COLLATE "C" NOT NULL,
        currency TEXT COLLATE "C" NOT NULL,
        received_currency TEXT COLLATE "C" NOT NULL,
        state TEXT COLLATE "C" NOT NULL,
        drifting BIGINT NOT NULL,
        kind TEXT COLLATE "C" NOT NULL,
        count BIGINT NOT NULL,
        expected BIGINT NOT NULL,
        received BIGINT NOT NULL,
        home_received BIGINT NOT NULL,
        refunded BIGINT NOT NULL,
        charged_back BIGINT NOT NULL,
        PRIMARY KEY (hour, currency, received_currency, state, drifting, kind)
    )""",
    """
    CREATE TABLE finance_hours_paid (
        hour TEXT COLLATE "C" NOT NULL,
        day TEXT COLLATE "C" NOT NULL,
        currency TEXT COLLATE "C" NOT NULL,
        state TEXT COLLATE "C" NOT NULL,
        count BIGINT NOT NULL,
        amount_minor BIGINT NOT NULL,
        PRIMARY KEY (hour, currency, state)
    )""",
    """
    CREATE TABLE finance_days (
        day TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        computed_at TEXT COLLATE "C" NOT NULL,
        closed BIGINT NOT NULL,
        revised_at TEXT COLLATE "C",
        revised_by TEXT COLLATE "C",
        revised_ref TEXT COLLATE "C"
    )""",
    """
    CREATE TABLE finance_rollup_dirty (
        day TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        version BIGINT NOT NULL,
        marked_at TEXT COLLATE "C" NOT NULL,
        changed_at TEXT COLLATE "C" NOT NULL,
        cause TEXT COLLATE "C" NOT NULL,
        cause_ref TEXT COLLATE "C" NOT NULL,
        cause_at TEXT COLLATE "C" NOT NULL
    )""",
    """
    CREATE TABLE finance_rollup_sources (
        source TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        up_to BIGINT NOT NULL
    )""",
    """
    CREATE TABLE finance_rollup_pending (
        source TEXT COLLATE "C" NOT NULL,
        id BIGINT NOT NULL,
        seen TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (source, id)
    )""",
    """
    CREATE TABLE finance_rollup_state (
        id BIGINT NOT NULL PRIMARY KEY CHECK (id = 1),
        zone TEXT COLLATE "C" NOT NULL,
        sync_horizon TEXT COLLATE "C"
    )""",
)
