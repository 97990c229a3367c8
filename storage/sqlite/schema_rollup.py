"""The finance rollup's tables on SQLite, part of the 0.1.0 migration (:mod:`.schema` lists them
among its tables); the same names and columns as on PostgreSQL.

Written only by the rollup's refresh (:mod:`payhooks.storage.reads.rollup`), never by the
receiver: rows opened and money paid per local hour of the rollup's zone (``hour``: the UTC
instant the hour starts; ``day``: its local date), the days computed and revised, the hours
still to compute, and the watermarks. docs/reconciliation.md describes each table.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ROLLUP_TABLES"]

#: In order: each table (no index of their own beyond the keys: a period is a range of ``hour``).
ROLLUP_TABLES: Final = (
    # Each listed transaction payhooks sync moved to another identifier: the one it left (whose
    # row changed too), appended by the sync's page, read by the rollup with the run's rows.
    """
    CREATE TABLE service_transaction_moves (
        id INTEGER PRIMARY KEY,
        sync_run INTEGER NOT NULL,
        transaction_id TEXT NOT NULL,
        external_identifier TEXT NOT NULL,
        moved_at TEXT NOT NULL
    )""",
    "CREATE INDEX service_transaction_moves_run ON service_transaction_moves (sync_run)",
    # The finance rollup (payhooks.storage.reads.rollup): written by its refresh only, never by
    # the receiver. Rows opened, and money paid, per local hour of the rollup's zone ('hour':
    # the UTC instant it starts; 'day': its local date).
    """
    CREATE TABLE finance_hours_opened (
        hour TEXT NOT NULL,
        day TEXT NOT NULL,
        currency TEXT NOT NULL,
        received_currency TEXT NOT NULL,
        state TEXT NOT NULL,
        drifting INTEGER NOT NULL,
        kind TEXT NOT NULL,
        count INTEGER NOT NULL,
        expected INTEGER NOT NULL,
        received INTEGER NOT NULL,
        home_received INTEGER NOT NULL,
        refunded INTEGER NOT NULL,
        charged_back INTEGER NOT NULL,
        PRIMARY KEY (hour, currency, received_currency, state, drifting, kind)
    ) WITHOUT ROWID""",
    """
    CREATE TABLE finance_hours_paid (
        hour TEXT NOT NULL,
        day TEXT NOT NULL,
        currency TEXT NOT NULL,
        state TEXT NOT NULL,
        count INTEGER NOT NULL,
        amount_minor INTEGER NOT NULL,
        PRIMARY KEY (hour, currency, state)
    ) WITHOUT ROWID""",
    # The same, summed by local day: what a period of whole days reads.
    """
    CREATE TABLE finance_days_opened (
        day TEXT NOT NULL,
        currency TEXT NOT NULL,
        received_currency TEXT NOT NULL,
        state TEXT NOT NULL,
        drifting INTEGER NOT NULL,
        kind TEXT NOT NULL,
        count INTEGER NOT NULL,
        expected INTEGER NOT NULL,
        received INTEGER NOT NULL,
        home_received INTEGER NOT NULL,
        refunded INTEGER NOT NULL,
        charged_back INTEGER NOT NULL,
        PRIMARY KEY (day, currency, received_currency, state, drifting, kind)
    ) WITHOUT ROWID""",
    """
    CREATE TABLE finance_days_paid (
        day TEXT NOT NULL,
        currency TEXT NOT NULL,
        state TEXT NOT NULL,
        count INTEGER NOT NULL,
        amount_minor INTEGER NOT NULL,
        PRIMARY KEY (day, currency, state)
    ) WITHOUT ROWID""",
    # Each local day computed: when, whether it had ended then, and when a later computation
    # changed it after it had ended (revised) and by what (revised_by: 'delivery', 'sync_run',
    # 'registration', 'creation'; revised_ref: its id).
    """
    CREATE TABLE finance_days (
        day TEXT NOT NULL PRIMARY KEY,
        computed_at TEXT NOT NULL,
        closed INTEGER NOT NULL,
        revised_at TEXT,
        revised_by TEXT,
        revised_ref TEXT
    ) WITHOUT ROWID""",
    # The local hours to compute again (hour: its key; keyed by its day first, so a period's
    # marks are a range of days): version grows with each mark, so a refresh that computed an
    # older version never clears a newer mark; changed_at, the oldest change waiting in it.
    """
    CREATE TABLE finance_rollup_dirty (
        hour TEXT NOT NULL,
        day TEXT NOT NULL,
        version INTEGER NOT NULL,
        marked_at TEXT NOT NULL,
        changed_at TEXT NOT NULL,
        cause TEXT NOT NULL,
        cause_ref TEXT NOT NULL,
        cause_at TEXT NOT NULL,
        PRIMARY KEY (day, hour)
    ) WITHOUT ROWID""",
    # Per source table, the id up to which its rows are marked; and the ids below it to look at
    # again (PostgreSQL's ids not committed yet, attempts still sending, sync runs going on).
    """
    CREATE TABLE finance_rollup_sources (
        source TEXT NOT NULL PRIMARY KEY,
        up_to INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """
    CREATE TABLE finance_rollup_pending (
        source TEXT NOT NULL,
        id INTEGER NOT NULL,
        seen TEXT NOT NULL,
        PRIMARY KEY (source, id)
    ) WITHOUT ROWID""",
    # The zone the rollup's hours and days are in, and the latest complete sync's horizon seen.
    """
    CREATE TABLE finance_rollup_state (
        id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
        zone TEXT NOT NULL,
        sync_horizon TEXT
    )""",
)
