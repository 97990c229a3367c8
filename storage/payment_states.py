"""The ``payment_states`` table: each payment's reconciliation row, kept in the transaction that
changes any of its inputs, and the signals each change owes.

:func:`refresh` is the one way a row changes: it loads the payment's inputs (what was
registered, its outcomes, the service's listed transactions, its refused and conflicting
deliveries), asks :func:`payhooks.storage.rules.reconcile`, stores the row (or deletes it when
nothing names the identifier any more), keeps each listed transaction's drift, and owes the
signals :func:`payhooks.storage.signal_rules.owed_signals` gives. Every write of an input calls it
before its commit, so finance's SQL reads one stored row per payment.

Two writers of one payment at once (PostgreSQL, several hosts) are serialised by the engine's
``lock_payment`` before anything is read, so the second reads what the first committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, Final

import payhooks.storage.owed_signals as owed_signals
from payhooks.storage.creation_attempts import LATEST_FINISHED_STATE
from payhooks.storage.records import PaymentState, ReconciliationState
from payhooks.storage.rows import DeliveryStatus, PaymentKind, ReconciliationRow
from payhooks.storage.rules import (
    Expectation,
    Inputs,
    ListedFact,
    OutcomeFact,
    Problems,
    reconcile,
    transaction_drift,
)
from payhooks.storage.signal_rules import owed_signals as decide_signals
from payhooks.storage.sql import Connection
from payhooks.storage.times import to_text

__all__ = ["COLUMNS", "LockPayment", "Refresh", "refresh", "refresh_missing"]

#: Takes the engine's lock on one payment for the rest of the transaction.
LockPayment = Callable[[Connection, str], None]
#: The ledger's :func:`refresh` with its lock: ``(conn, identifier, now, new_outcome_id=None)``
#: to the payment's state (None when nothing names it), for the ledger's parts.
Refresh = Callable[..., ReconciliationState | None]

#: The stored columns, in the order :func:`refresh` writes them: the row's fields, and when it
#: was written.
COLUMNS: Final = (*ReconciliationRow._fields, "updated_at")

_UPSERT = f"""
    INSERT INTO payment_states ({", ".join(COLUMNS)})
    VALUES ({", ".join("?" for _ in COLUMNS)})
    ON CONFLICT (external_identifier) DO UPDATE SET
    {", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])}"""  # noqa: S608 - constants only
# The same, leaving ``kind`` as stored: SQLite rewrites every index on a column the SET names,
# equal or not, so naming it would cost ``payment_states_order`` a page per delivery.
_UPSERT_SAME_KIND = _UPSERT.replace("kind = excluded.kind, ", "")

_LATEST_COMPLETE = (
    "SELECT expected_before FROM sync_runs WHERE status = 'complete' ORDER BY id DESC LIMIT 1"
)

#: Everything one payment's row depends on, in one read: a row per input, tagged, its values
#: in typed slots (each column holds one type on every branch, as PostgreSQL requires):
#: ``tag, id, number, number, text, text, text, text, text, text``. The payment's row carries
#: the ``expected_before`` of the latest complete sync.
_INPUTS = f"""
    SELECT 'payment', NULL, amount_minor, plan_amount_minor, kind, currency, created_at,
        {LATEST_FINISHED_STATE}, ({_LATEST_COMPLETE}), NULL
    FROM payments AS p WHERE external_identifier = ?
    UNION ALL SELECT 'outcome', id, amount_minor, delivery_id, transaction_id, state, currency,
        paid_at, NULL, NULL
    FROM outcomes WHERE external_identifier = ?
    UNION ALL SELECT 'listed', NULL, NULL, NULL, transaction_id, state, currency, first_seen_at,
        drift, ledger_state
    FROM service_transactions WHERE external_identifier = ?
    UNION ALL SELECT 'problem', id, NULL, NULL, status, error, NULL, NULL, NULL, NULL
    FROM deliveries WHERE external_identifier = ?
        AND status IN ('malformed_json', 'invalid_payload', 'conflicting_outcome')
    UNION ALL SELECT 'state', NULL, NULL, NULL, state, kind, NULL, NULL, NULL, NULL
    FROM payment_states WHERE external_identifier = ?
    ORDER BY 1, 2"""  # noqa: S608 - constants only


def _load(
    conn: Connection, identifier: str
) -> tuple[Inputs, list[tuple[Any, ...]], dict[int, int], tuple[str, str | None] | None]:
    """The payment's inputs; its listed transactions as stored (``transaction_id, state,
    currency, first_seen_at, drift, ledger_state``); each outcome's delivery; the stored
    ``(state, kind)``."""
    expectation, missing_before, before = None, None, None
    outcomes: list[OutcomeFact] = []
    delivery_of: dict[int, int] = {}
    listed: list[tuple[Any, ...]] = []
    problems: list[tuple[str, str | None]] = []
    for tag, ident, n1, n2, t1, t2, t3, t4, t5, t6 in conn.execute(_INPUTS, (identifier,) * 5):
        if tag == "outcome":
            outcomes.append(OutcomeFact(ident, t1, PaymentState(t2), n1, t3, t4))
            delivery_of[ident] = n2
        elif tag == "listed":
            listed.append((t1, t2, t3, t4, t5, t6))
        elif tag == "problem":
            problems.append((t1, t2))
        elif tag == "payment":
            expectation = Expectation(PaymentKind(t1), n1, t2, n2, t3, t4)
            missing_before = t5
        else:
            before = (t1, t2)
    facts = [
        ListedFact(tid, PaymentState(state), cur, seen) for tid, state, cur, seen, *_ in listed
    ]
    # A complete sync's cut-off matters only to a payment that nothing names.
    if outcomes or listed:
        missing_before = None
    inputs = Inputs(identifier, expectation, outcomes, facts, _problems(problems), missing_before)
    return inputs, listed, delivery_of, before


def _problems(rows: list[tuple[str, str | None]]) -> Problems:
    if not rows:
        return Problems()
    conflicting = sum(status == DeliveryStatus.CONFLICTING_OUTCOME for status, _ in rows)
    status, error = rows[-1]
    return Problems(len(rows) - conflicting, conflicting, _reason(status, error))


def _reason(status: str, error: str | None) -> str:
    """One line for finance: the status, and the message kept with it."""
    message = error or ""
    if error and error.startswith("{"):
        try:
            message = str(json.loads(error).get("message", error))
        except ValueError:
            message = error
    return f"{status}: {message}"[:300] if message else status


def _stored(value: object) -> object:
    """One field of a row as its column holds it: names as text, times as
    :func:`~payhooks.storage.times.to_text` writes them, the ids as a JSON array."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return to_text(value)
    if isinstance(value, tuple):
        return json.dumps(list(value), separators=(",", ":"), ensure_ascii=False)
    return value


def _values(row: ReconciliationRow, now: str) -> tuple[Any, ...]:
    return (*map(_stored, row), now)


def refresh(
    conn: Connection,
    identifier: str,
    *,
    now: str,
    lock: LockPayment,
    new_outcome_id: int | None = None,
) -> ReconciliationRow | None:
    """Recompute and store one payment's row, in the caller's write transaction, and owe the
    signals the change owes (``new_outcome_id``: the outcome this transaction just recorded).

    :returns: the row stored, or None when nothing names the identifier.
    """
    lock(conn, identifier)
    inputs, listed_rows, delivery_of, before_row = _load(conn, identifier)
    outcomes, expectation = inputs.outcomes, inputs.expectation
    row = reconcile(inputs)
    if row is None:
        conn.execute("DELETE FROM payment_states WHERE external_identifier = ?", (identifier,))
    else:
        values = _values(row, now)
        kept = before_row is not None and before_row[1] == values[1]
        conn.execute(_UPSERT_SAME_KIND if kept else _UPSERT, values)
    for item, stored in zip(inputs.listed, listed_rows, strict=True):
        kind, lifecycle = transaction_drift(item, outcomes, expected=expectation is not None)
        drift = None if kind is None else kind.value
        ledger_state = None if lifecycle is None else lifecycle.value
        if (drift, ledger_state) != (stored[4], stored[5]):
            conn.execute(
                "UPDATE service_transactions SET drift = ?, ledger_state = ? "
                "WHERE transaction_id = ?",
                (drift, ledger_state, item.transaction_id),
            )
    new_outcome = next((o for o in outcomes if o.id == new_outcome_id), None)
    # The state before matters only to a change that records no outcome (signal_rules).
    before = None
    if new_outcome_id is None and before_row is not None and row is not None:
        before = row._replace(state=ReconciliationState(before_row[0]))
    owed = decide_signals(before, row, inputs, new_outcome)
    if owed and row is not None:
        owed_signals.owe(conn, owed, delivery_of, row.state.value, now)
    return row


def refresh_missing(conn: Connection, *, now: str, lock: LockPayment) -> int:
    """After a complete sync: flag each payment that is now missing at the service (registered
    before the sync's ``expected_before``, nothing named it: no outcome, no listing, no flag
    yet); how many were refreshed. A flag goes with the outcome or listing that clears it,
    whose own refresh sees it."""
    found = conn.execute(_LATEST_COMPLETE).fetchone()
    if found is None:
        return 0
    rows = conn.execute(
        "SELECT p.external_identifier FROM payments AS p "
        "JOIN payment_states AS s ON s.external_identifier = p.external_identifier "
        "WHERE p.created_at < ? AND s.drift IS NULL AND s.transaction_ids = '[]' "
        "ORDER BY p.external_identifier",
        (found[0],),
    ).fetchall()
    for (identifier,) in rows:
        refresh(conn, identifier, now=now, lock=lock)
    return len(rows)
