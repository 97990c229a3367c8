"""The service's own view of its transactions, as ``payhooks sync`` read it, and the drift.

``GET /v4/transactions`` is not signed like a notification, so what it says is kept apart from
the outcomes: one row per service ``transaction_id`` in ``service_transactions`` (the status
string as listed, the state the sync's map gave it, when it was first and last seen), and one
row per sync in ``sync_runs`` (its cursor after each committed page, so an interrupted sync
resumes there). Nothing here changes an outcome or settles a payment: the ``reconciliation``
view and the ``sync_drift`` view only *compare* the two views.

Drift, per listed transaction (:data:`DRIFT_KIND_SQL`, shared with the reconciliation):

- ``unexpected``: no payment names its ``external_identifier``;
- ``unknown_status``: the sync's map does not know its status string (kept, never dropped);
- ``missed_notification``: the service's state is past ``pending`` and further along than any
  notification told us about that transaction (none at all, typically);
- ``status_differs``: notifications told us about it, and the service says something else.

And per expected payment: ``missing_at_service``, no transaction at the service, no outcome,
registered before the latest *complete* sync's ``expected_before`` (its start minus the
configured age): only a sync that read the whole list can tell that something is absent.

The queries and writes are plain SQL (``INSERT ... ON CONFLICT ... DO UPDATE``,
``RETURNING``, ``CASE``, ``EXISTS``) that both engines run, PostgreSQL through its dialect
(:mod:`payhooks.storage.postgresql.dialect`); the tables' DDL and the view are turned into
PostgreSQL's spelling by its schema, as the other tables' are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from payhooks.storage.records import STATE_RANK, PaymentState
from payhooks.storage.sql import Connection, Cursor
from payhooks.storage.sync_rows import DriftKind

__all__ = [
    "DRIFT_KIND_SQL",
    "DRIFT_URGENCY",
    "DRIFT_VIEW_SQL",
    "EXPECTED_DRIFT_KIND_SQL",
    "LATEST_COMPLETE_THRESHOLD_SQL",
    "RUNS_TABLE_SQL",
    "TABLE_INDEX_SQL",
    "TABLE_SQL",
    "begin_run",
    "end_run",
    "latest_run",
    "record_page",
    "select_drift",
    "to_values",
]

TABLE_SQL: Final = """
    CREATE TABLE service_transactions (
        transaction_id TEXT NOT NULL PRIMARY KEY,
        external_identifier TEXT NOT NULL,
        -- The status string exactly as the service listed it.
        status TEXT NOT NULL,
        -- What the sync's status map made of it ('unknown' when the map lacks it), and its
        -- STATE_RANK, so SQL can tell a later state from an earlier one.
        state TEXT NOT NULL,
        state_rank INTEGER NOT NULL,
        currency TEXT,
        amount_minor INTEGER,
        first_seen_at TEXT NOT NULL,
        last_seen_at TEXT NOT NULL,
        sync_run INTEGER NOT NULL REFERENCES sync_runs (id)
    )"""

#: A listed identifier's transactions, by identifier: for the triggers that keep its
#: ``listed_identifiers`` row, and the identifiers only the list names.
TABLE_INDEX_SQL: Final = (
    "CREATE INDEX service_transactions_identifier "
    "ON service_transactions (external_identifier, transaction_id)"
)

RUNS_TABLE_SQL: Final = """
    CREATE TABLE sync_runs (
        id INTEGER PRIMARY KEY,
        started_at TEXT NOT NULL,
        -- Payments registered before this and still unseen are missing_at_service, once the
        -- run is complete: its start minus the configured age.
        expected_before TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'interrupted', 'complete')),
        -- The next_cursor of the last page committed: where a resumed run goes on.
        next_cursor TEXT,
        pages INTEGER NOT NULL DEFAULT 0,
        items INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        updated_at TEXT NOT NULL,
        finished_at TEXT
    )"""

_PENDING = PaymentState.PENDING.value
_UNKNOWN = PaymentState.UNKNOWN.value

# The drift of a listed transaction ``s`` whose identifier a payment names, against its
# rolled-up outcomes ``t`` (NULL when none): the arms of DRIFT_KIND_SQL after the first.
_EXPECTED_DRIFT_ARMS = f"""
        WHEN s.state = '{_UNKNOWN}' THEN 'unknown_status'
        WHEN s.state <> '{_PENDING}' AND s.state_rank > COALESCE(t.top_rank, -1)
            THEN 'missed_notification'
        WHEN t.transaction_id IS NOT NULL AND s.state <> COALESCE(t.lifecycle_state, '')
            THEN 'status_differs'
    END"""

#: One listed transaction ``s`` against its payment ``p`` and its rolled-up outcomes ``t``
#: (``LEFT JOIN``s: NULL when absent): its drift kind, or NULL when the two views agree.
DRIFT_KIND_SQL: Final = f"""CASE
        WHEN p.external_identifier IS NULL THEN 'unexpected'{_EXPECTED_DRIFT_ARMS}"""

#: The same for a transaction whose identifier a payment names, without reading ``payments``:
#: what :mod:`payhooks.storage.listed_identifiers` rolls up per identifier.
EXPECTED_DRIFT_KIND_SQL: Final = f"CASE{_EXPECTED_DRIFT_ARMS}"

#: The drift kinds of an expected payment's listed transactions, most urgent first: a payment
#: whose transactions drift in several ways is reported as the first (each kind is also the
#: name of the reconciliation state it gives).
DRIFT_URGENCY: Final = (
    DriftKind.MISSED_NOTIFICATION,
    DriftKind.UNKNOWN_STATUS,
    DriftKind.STATUS_DIFFERS,
)

#: The ``expected_before`` of the latest complete sync (NULL before the first).
LATEST_COMPLETE_THRESHOLD_SQL: Final = (
    "(SELECT r.expected_before FROM sync_runs AS r WHERE r.status = 'complete' "
    "ORDER BY r.id DESC LIMIT 1)"
)


def drift_view_sql(transactions: str = "transactions", identifiers: str = "identifiers") -> str:
    """``sync_drift``: one row per drift, listed transactions first, then missing payments."""
    return f"""CREATE VIEW sync_drift AS
SELECT * FROM (
    SELECT
        {DRIFT_KIND_SQL} AS kind,
        s.external_identifier AS external_identifier,
        s.transaction_id AS transaction_id,
        s.status AS service_status,
        s.state AS service_state,
        t.lifecycle_state AS ledger_state,
        s.last_seen_at AS seen_at
    FROM service_transactions AS s
    LEFT JOIN payments AS p ON p.external_identifier = s.external_identifier
    LEFT JOIN {transactions} AS t
        ON t.external_identifier = s.external_identifier AND t.transaction_id = s.transaction_id
) AS listed WHERE kind IS NOT NULL
UNION ALL
SELECT
    'missing_at_service', p.external_identifier, NULL, NULL, NULL, NULL, NULL
FROM payments AS p
WHERE p.created_at < {LATEST_COMPLETE_THRESHOLD_SQL}
  AND COALESCE(p.creation, '') <> 'refused'
  AND NOT EXISTS (SELECT 1 FROM {identifiers} AS i
                  WHERE i.external_identifier = p.external_identifier)
  AND NOT EXISTS (SELECT 1 FROM service_transactions AS s
                  WHERE s.external_identifier = p.external_identifier)"""  # noqa: S608


#: The view, as the schema creates it.
DRIFT_VIEW_SQL: Final = drift_view_sql()

#: The columns of ``sync_drift``, in order.
DRIFT_COLUMNS: Final = (
    "kind",
    "external_identifier",
    "transaction_id",
    "service_status",
    "service_state",
    "ledger_state",
    "seen_at",
)

_UPSERT = """
    INSERT INTO service_transactions (
        transaction_id, external_identifier, status, state, state_rank, currency, amount_minor,
        first_seen_at, last_seen_at, sync_run
    ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (transaction_id) DO UPDATE SET
        external_identifier = excluded.external_identifier,
        status = excluded.status,
        state = excluded.state,
        state_rank = excluded.state_rank,
        currency = excluded.currency,
        amount_minor = excluded.amount_minor,
        last_seen_at = excluded.last_seen_at,
        sync_run = excluded.sync_run"""

_RUN_COLUMNS = (
    "id, started_at, expected_before, status, next_cursor, pages, items, error, updated_at, "
    "finished_at"
)


def to_values(
    transaction_id: str,
    external_identifier: str,
    status: str,
    state: PaymentState,
    currency: str | None,
    amount_minor: int | None,
) -> tuple[Any, ...]:
    """One listed transaction as :func:`record_page` takes it (made before any lock)."""
    return (
        transaction_id,
        external_identifier,
        status,
        state.value,
        STATE_RANK[state],
        currency,
        amount_minor,
    )


def begin_run(conn: Connection, started_at: str, expected_before: str) -> int:
    """A new run, ``running``; its id."""
    run_id: int = conn.execute(
        "INSERT INTO sync_runs (started_at, expected_before, status, updated_at) "
        "VALUES (?, ?, 'running', ?) RETURNING id",
        (started_at, expected_before, started_at),
    ).fetchone()[0]
    return run_id


def record_page(
    conn: Connection,
    run_id: int,
    items: Iterable[tuple[Any, ...]],
    next_cursor: str | None,
    seen_at: str,
) -> int:
    """Upsert one page's transactions and move the run's cursor past it, in one transaction:
    a crash keeps both or neither, so resuming neither skips nor repeats a page's effect.
    How many items the page had."""
    rows = [(*values, seen_at, seen_at, run_id) for values in items]
    conn.executemany(_UPSERT, rows)
    conn.execute(
        "UPDATE sync_runs SET next_cursor = ?, pages = pages + 1, items = items + ?, "
        "updated_at = ? WHERE id = ?",
        (next_cursor, len(rows), seen_at, run_id),
    )
    return len(rows)


def end_run(conn: Connection, run_id: int, status: str, error: str | None, at: str) -> None:
    """Mark a run ``complete`` or ``interrupted`` (with why)."""
    conn.execute(
        "UPDATE sync_runs SET status = ?, error = ?, updated_at = ?, finished_at = ? WHERE id = ?",
        (status, error, at, at, run_id),
    )


def latest_run(conn: Connection) -> tuple[Any, ...] | None:
    """The newest run's row (:data:`_RUN_COLUMNS` order), or None before the first."""
    row: tuple[Any, ...] | None = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM sync_runs ORDER BY id DESC LIMIT 1"  # noqa: S608
    ).fetchone()
    return row


def select_drift(conn: Connection) -> Cursor:
    """A cursor over ``sync_drift`` (:data:`DRIFT_COLUMNS`), streamed by the caller: listed
    transactions first, then missing payments (on PostgreSQL, whose ``UNION ALL`` has no order
    unless asked, each by identifier too)."""
    sql = f"SELECT {', '.join(DRIFT_COLUMNS)} FROM sync_drift"  # noqa: S608
    if getattr(conn, "unordered_union", False):
        sql += " ORDER BY kind = 'missing_at_service', external_identifier, transaction_id"
    return conn.execute(sql)
