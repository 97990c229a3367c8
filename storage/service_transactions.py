"""The service's own view of its transactions, as ``payhooks sync`` read it, and the drift.

``GET /v4/transactions`` is not signed like a notification, so what it says is kept apart from
the outcomes: one row per service ``transaction_id`` in ``service_transactions`` (the status
string as listed, the state the sync's map gave it, when it was first and last seen), and one
row per sync in ``sync_runs`` (its cursor after each committed page, so an interrupted sync
resumes there). Nothing here changes an outcome or settles a payment: the list only raises
flags. Its drift, decided by :mod:`payhooks.storage.rules` and stored on each listed
transaction and each payment's row:

- ``unexpected``: no payment names its ``external_identifier``;
- ``unknown_status``: the sync's map does not know its status string (kept, never dropped);
- ``missed_notification``: the service's state is past ``pending`` and further along than any
  notification told us about that transaction (none at all, typically);
- ``status_differs``: notifications told us about it, and the service says something else.

And per expected payment: ``missing_at_service``, no transaction at the service, no outcome,
registered before the latest *complete* sync's ``expected_before`` (its start minus the
configured age): only a sync that read the whole list can tell that something is absent.

The statements are plain SQL both engines run (PostgreSQL with ``%s`` placeholders:
:mod:`payhooks.storage.postgresql.dialect`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from payhooks.storage.records import STATE_RANK, PaymentState
from payhooks.storage.sql import Connection, Cursor
from payhooks.storage.sync_rows import DriftKind

__all__ = [
    "DRIFT_COLUMNS",
    "begin_run",
    "end_run",
    "latest_run",
    "record_page",
    "select_drift",
    "to_values",
    "touched_identifiers",
]

#: The columns of ``sync_drift`` (:data:`payhooks.storage.views.SYNC_DRIFT_VIEW_SQL`), in order.
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

# A transaction listed under another identifier than before: the one it leaves, for the
# finance rollup (payhooks.storage.reads.rollup_marks), which reads each run's moves.
_MOVED = """
    INSERT INTO service_transaction_moves (sync_run, moved_at, transaction_id, external_identifier)
    SELECT ?, ?, transaction_id, external_identifier FROM service_transactions
    WHERE transaction_id = ? AND external_identifier <> ?"""

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


def touched_identifiers(conn: Connection, items: Iterable[tuple[Any, ...]]) -> list[str]:
    """The identifiers a page's items (from :func:`to_values`) change: those it names, and any
    of its transactions was listed under before; sorted, the order their locks are taken in."""
    identifiers = set()
    for item in items:
        identifiers.add(item[1])
        before = conn.execute(
            "SELECT external_identifier FROM service_transactions WHERE transaction_id = ?",
            (item[0],),
        ).fetchone()
        if before is not None:
            identifiers.add(before[0])
    return sorted(identifiers)


def record_page(
    conn: Connection,
    run_id: int,
    items: Iterable[tuple[Any, ...]],
    unstorable: Iterable[tuple[str | None, str | None, str]],
    next_cursor: str | None,
    seen_at: str,
) -> int:
    """Upsert one page's transactions, note its unstorable items (``(transaction_id,
    external_identifier, reason)``, each None where it cannot be stored), and move the run's
    cursor past it, in one transaction: a crash keeps all or nothing, so resuming neither skips
    nor repeats a page's effect. How many items the page had."""
    rows = [(*values, seen_at, seen_at, run_id) for values in items]
    conn.executemany(_MOVED, [(run_id, seen_at, row[0], row[1]) for row in rows])
    conn.executemany(_UPSERT, rows)
    refused = [(run_id, *item, seen_at) for item in unstorable]
    conn.executemany(
        "INSERT INTO sync_unstorable_items (sync_run, transaction_id, external_identifier, "
        "reason, seen_at) VALUES (?, ?, ?, ?, ?)",
        refused,
    )
    conn.execute(
        "UPDATE sync_runs SET next_cursor = ?, pages = pages + 1, items = items + ?, "
        "updated_at = ? WHERE id = ?",
        (next_cursor, len(rows) + len(refused), seen_at, run_id),
    )
    return len(rows) + len(refused)


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


def select_drift(conn: Connection, limit: int | None = None) -> Cursor:
    """A cursor over ``sync_drift`` (:data:`DRIFT_COLUMNS`), streamed by the caller: listed
    transactions first, then missing payments, each by identifier; the first ``limit``."""
    sql = (
        f"SELECT {', '.join(DRIFT_COLUMNS)} FROM sync_drift "  # noqa: S608
        "ORDER BY kind = 'missing_at_service', external_identifier, transaction_id"
    )
    if limit is None:
        return conn.execute(sql)
    return conn.execute(sql + " LIMIT ?", (limit,))


def count_drift(conn: Connection) -> dict[DriftKind, int]:
    """The rows of ``sync_drift`` per kind."""
    rows = conn.execute("SELECT kind, COUNT(*) FROM sync_drift GROUP BY kind")
    return {DriftKind(kind): int(count) for kind, count in rows}
