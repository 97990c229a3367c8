"""The statements SQLite's past migrations ran, frozen as they were the day each was written.

A migration must create what it created then, whatever the code says now, so its SQL lives here
and never changes; :mod:`payhooks.storage.sqlite.schema` runs it, and PostgreSQL's migrations of
the same names turn it into their own spelling. Tests check that the latest delivery statuses
are :class:`~payhooks.storage.rows.DeliveryStatus`.
"""

from __future__ import annotations

from payhooks.storage.errors import StorageError
from payhooks.storage.limits import MAX_AMOUNT_MINOR
from payhooks.storage.rows import PaymentKind, ReturnKind

__all__ = [
    "DELIVERIES_STATUS_INDEX",
    "DELIVERIES_V2",
    "INITIAL_SCHEMA",
    "MOVE_OWED_SIGNALS",
    "MOVE_SIGNALS_TO_DELIVERIES",
    "OWED_SIGNALS_V5",
    "OWED_SIGNALS_V7_INDEX",
    "PUT_BACK_V1_DELIVERIES",
    "SET_ASIDE_V1_DELIVERIES",
    "UNMOVABLE_OWED_SIGNALS",
    "V2_DELIVERY_STATUSES",
    "V9_INDEXES",
    "refuse_unmovable_owed_signals",
]


def _quoted(values: object) -> str:
    return ", ".join(f"'{value}'" for value in values)  # type: ignore[attr-defined]


# A migration creates what it created the day it was written, so each one names the delivery
# statuses of its time; tests check that the latest list is DeliveryStatus.
_V1_DELIVERY_STATUSES = (
    "received",
    "processed",
    "duplicate",
    "malformed_json",
    "invalid_payload",
    "processing_error",
)
V2_DELIVERY_STATUSES = (*_V1_DELIVERY_STATUSES, "conflicting_outcome")


DELIVERIES_STATUS_INDEX = "CREATE INDEX deliveries_status ON deliveries (status, id)"

#: The first schema's statements; PostgreSQL's migration 0001 runs them in its own spelling.
INITIAL_SCHEMA = (
    f"""
    CREATE TABLE payments (
        external_identifier TEXT NOT NULL PRIMARY KEY
            CHECK (length(external_identifier) BETWEEN 1 AND 64),
        kind TEXT NOT NULL CHECK (kind IN ({_quoted(PaymentKind)})),
        amount_minor INTEGER NOT NULL CHECK (amount_minor BETWEEN 0 AND {MAX_AMOUNT_MINOR}),
        currency TEXT NOT NULL CHECK (length(currency) = 3),
        plan_amount_minor INTEGER
            CHECK (plan_amount_minor BETWEEN 0 AND {MAX_AMOUNT_MINOR}),
        created_at TEXT NOT NULL,
        description TEXT,
        metadata TEXT,
        CHECK ((kind = 'subscription') = (plan_amount_minor IS NOT NULL))
    ) WITHOUT ROWID""",
    f"""
    CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY,
        dedupe_key TEXT NOT NULL UNIQUE,
        received_at TEXT NOT NULL,
        headers TEXT NOT NULL,
        body BLOB NOT NULL,
        status TEXT NOT NULL DEFAULT 'received'
            CHECK (status IN ({_quoted(_V1_DELIVERY_STATUSES)})),
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 1,
        outcome_id INTEGER REFERENCES outcomes (id),
        signal_error TEXT,
        updated_at TEXT NOT NULL
    )""",
    DELIVERIES_STATUS_INDEX,
    f"""
    CREATE TABLE outcomes (
        id INTEGER PRIMARY KEY,
        delivery_id INTEGER NOT NULL REFERENCES deliveries (id),
        transaction_id TEXT NOT NULL,
        external_identifier TEXT NOT NULL,
        flow TEXT NOT NULL,
        provider TEXT,
        provider_reference TEXT,
        provider_status TEXT,
        payment_status TEXT NOT NULL,
        state TEXT NOT NULL,
        -- STATE_RANK[state] when written, so the reconciliation index can order a
        -- transaction's outcomes by lifecycle; a change to STATE_RANK needs a migration.
        state_rank INTEGER NOT NULL,
        amount TEXT NOT NULL,
        currency TEXT NOT NULL CHECK (length(currency) = 3),
        amount_minor INTEGER NOT NULL CHECK (amount_minor BETWEEN 0 AND {MAX_AMOUNT_MINOR}),
        paid_at TEXT NOT NULL,
        extra TEXT NOT NULL DEFAULT '{{}}',
        recorded_at TEXT NOT NULL,
        UNIQUE (transaction_id, payment_status)
    )""",
    # Covers everything the reconciliation reads from outcomes, in the order it groups them:
    # the view scans it without touching the table, and looks up one payment or one
    # transaction by its prefix.
    """
    CREATE INDEX outcomes_reconciliation ON outcomes (
        external_identifier, transaction_id, state_rank, state, paid_at, currency, amount_minor
    )""",
    "CREATE INDEX outcomes_delivery ON outcomes (delivery_id)",
    """
    CREATE TABLE rejected_deliveries (
        id INTEGER PRIMARY KEY,
        received_at TEXT NOT NULL,
        remote_addr TEXT,
        reason TEXT NOT NULL,
        body BLOB NOT NULL,
        body_size INTEGER NOT NULL
    )""",
    f"""
    CREATE TABLE returns (
        id INTEGER PRIMARY KEY,
        external_identifier TEXT NOT NULL,
        returned_at TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ({_quoted(ReturnKind)})),
        result_code TEXT
    )""",
    "CREATE INDEX returns_external_identifier ON returns (external_identifier, returned_at)",
)


DELIVERIES_V2 = f"""
    CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY,
        dedupe_key TEXT NOT NULL UNIQUE,
        -- The delivery whose dedupe_key this one arrived under with other bytes; this one is
        -- then stored under '<dedupe_key>#<body_sha256>'.
        reused_key_of INTEGER REFERENCES deliveries (id),
        received_at TEXT NOT NULL,
        headers TEXT NOT NULL,
        body BLOB NOT NULL,
        body_sha256 TEXT NOT NULL CHECK (length(body_sha256) = 64),
        status TEXT NOT NULL DEFAULT 'received'
            CHECK (status IN ({_quoted(V2_DELIVERY_STATUSES)})),
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 1,
        outcome_id INTEGER REFERENCES outcomes (id),
        signal_error TEXT,
        updated_at TEXT NOT NULL
    )"""

# The columns 0001 gave deliveries, copied across by 0002.
_V1_DELIVERY_COLUMNS = (
    "id, dedupe_key, received_at, headers, body, status, error, attempts, outcome_id, "
    "signal_error, updated_at"
)


SET_ASIDE_V1_DELIVERIES = f"""
    CREATE TEMP TABLE payhooks_deliveries_v1 AS
    SELECT {_V1_DELIVERY_COLUMNS} FROM main.deliveries"""  # noqa: S608 - constants only
PUT_BACK_V1_DELIVERIES = f"""
    INSERT INTO main.deliveries ({_V1_DELIVERY_COLUMNS}, body_sha256)
    SELECT {_V1_DELIVERY_COLUMNS}, payhooks_sha256(body)
    FROM temp.payhooks_deliveries_v1 ORDER BY id"""  # noqa: S608 - constants only


#: Migration 0005's statements, as it wrote them (0007 moved the rows onto ``outcomes`` and
#: dropped the table); PostgreSQL's 0005 runs them in its own spelling.
OWED_SIGNALS_V5 = (
    """
    CREATE TABLE owed_signals (
        id INTEGER PRIMARY KEY,
        outcome_id INTEGER NOT NULL REFERENCES outcomes(id),
        delivery_id INTEGER NOT NULL REFERENCES deliveries(id),
        signal TEXT NOT NULL,
        reconciliation TEXT NOT NULL,
        owed_at TEXT NOT NULL,
        sent_at TEXT,
        UNIQUE (outcome_id, signal)
    )""",
    "CREATE INDEX owed_signals_unsent ON owed_signals (delivery_id) WHERE sent_at IS NULL",
)


# The owed signals of each outcome as 0007 stores them: its names in the order they were owed,
# the state of the first, and sent only when every one was (a partly sent outcome stays owed:
# sending again is allowed, losing one is not). The names are JSON text as
# payhooks.storage.owed_signals writes them; SQLite 3.40 has no ORDER BY inside an aggregate,
# so the rows are ordered before they are grouped, and min(id) gives the bare column its row.
MOVE_OWED_SIGNALS = """
    UPDATE outcomes SET signals = moved.signals, signals_reconciliation = moved.reconciliation,
        signals_sent_at = moved.sent_at
    FROM (
        SELECT outcome_id, min(id), reconciliation, json_group_array(signal) AS signals,
            CASE WHEN count(*) = count(sent_at) THEN max(sent_at) END AS sent_at
        FROM (SELECT * FROM owed_signals ORDER BY outcome_id, id)
        GROUP BY outcome_id
    ) AS moved
    WHERE outcomes.id = moved.outcome_id"""

#: The index migration 0007 made of the outcomes whose signals were owed (0009 moved the signals
#: onto the delivery that records the outcome, with an index of its own).
OWED_SIGNALS_V7_INDEX = (
    "CREATE INDEX outcomes_signals_owed ON outcomes (delivery_id) "
    "WHERE signals IS NOT NULL AND signals_sent_at IS NULL"
)

#: Migration 0009's move of the owed signals from each outcome to the delivery that recorded it
#: (the same text on both engines).
MOVE_SIGNALS_TO_DELIVERIES = """
    UPDATE deliveries SET signals = o.signals, signals_reconciliation = o.signals_reconciliation,
        signals_sent_at = o.signals_sent_at
    FROM outcomes AS o
    WHERE o.delivery_id = deliveries.id AND o.id = deliveries.outcome_id
        AND o.signals IS NOT NULL"""

#: The indexes migration 0009 made: the deliveries whose signals are still owed (by the outcome
#: that marking them sent names), and the deliveries by status, but for ``processed``.
V9_INDEXES = (
    "CREATE INDEX deliveries_signals_owed ON deliveries (outcome_id) "
    "WHERE signals IS NOT NULL AND signals_sent_at IS NULL",
    "CREATE INDEX deliveries_status ON deliveries (status, id) WHERE status <> 'processed'",
)

#: What migration 0009 cannot move: signals still owed by an outcome whose delivery points at
#: another outcome (only ``record_outcome`` called twice on one delivery makes one).
UNMOVABLE_OWED_SIGNALS = """
    SELECT count(*) FROM outcomes AS o
    WHERE o.signals IS NOT NULL AND o.signals_sent_at IS NULL AND NOT EXISTS (
        SELECT 1 FROM deliveries AS d WHERE d.id = o.delivery_id AND d.outcome_id = o.id)"""


def refuse_unmovable_owed_signals(count: int) -> None:
    """Fail migration 0009, which then changes nothing, when ``count`` outcomes owe signals it
    cannot move (:data:`UNMOVABLE_OWED_SIGNALS`): dropping them would break at least once."""
    if count:
        raise StorageError(
            f"{count} outcomes owe signals that migration 0009 cannot move to their delivery "
            "(it points at another outcome); send them with the payhooks that wrote them "
            "(flask payhooks signals --send), then upgrade."
        )
