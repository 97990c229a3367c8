"""The reconciliation, in SQL: the ``reconciliation`` view and the queries over it.

Finance tools read the view directly, and the ledger reads nothing else, so there is one
definition of every state. Python only streams the view's rows into
:class:`~storage.rows.ReconciliationRow`.

How a payment's state is decided (DESIGN.md "Reconciliation states", made precise):

- *Latest* means by ``paid_at``, ties broken by the outcome's id (the order of arrival).
- A *transaction* (one ``transaction_id``) has a *lifecycle state*: that of its highest-ranked
  outcome whose state is known (:data:`storage.records.STATE_RANK`; ``failed`` and
  ``cancelled`` share a rank, and between them the latest decides). ``unknown`` never lowers
  it, and the order of arrival never moves it back: a late ``pending`` after ``succeeded``
  changes nothing.
- A transaction *succeeded* when any of its outcomes is ``succeeded`` or later (a refund or
  chargeback implies the payment went through). Its amount and currency are those of its
  lowest-ranked such outcome: the ``succeeded`` one when it has arrived, else the first step
  after it (two outcomes of one rank, which only a custom status map can give: the first
  stored). A succeeded transaction is a *period*: a subscription's billing period, or the one
  payment of a transaction.
- No period yet: when the latest outcome of the payment is ``unknown`` (a status code the map
  does not know, or a provider status that disagrees), it is ``unknown_status``. Otherwise the
  transaction with the latest outcome decides: its lifecycle state ``pending``, ``failed`` or
  ``cancelled`` is the payment's. So a failed or cancelled attempt followed by a retry (a new
  transaction) still ``pending`` is ``pending`` again; none at all is ``pending``.
- With periods, in this order, money problems first: a transaction-kind payment with two or
  more periods is ``duplicate_payment``; a period in another currency gives
  ``currency_mismatch``; an amount that differs gives ``amount_mismatch`` (a transaction: its
  one period against ``amount_minor``; a subscription: the first period by ``paid_at``
  against ``amount_minor`` and every later one against ``plan_amount_minor``). Then, when the
  latest outcome is ``unknown``, ``unknown_status`` (an unmapped dispute or refund code after
  a success must not pass as ``paid``). Otherwise the furthest lifecycle state of any period
  decides: ``succeeded`` is ``paid``, and ``refund_pending``, ``partially_refunded``,
  ``refunded``, ``charged_back`` are reported as such, amounts kept; for a subscription a
  chargeback on one period is not hidden by the next being paid. A mismatch stays a mismatch
  after a refund; ``lifecycle_state`` tells them apart.
- ``lifecycle_state`` is what the state was read from, with unknown codes left out: with
  periods, the furthest state of any period; without, the lifecycle state of the transaction
  with the latest known outcome (``unknown`` when every outcome is unknown; None when there
  is none). Unknown outcomes are counted in ``unknown_outcomes`` whatever they decide.
- Amounts: ``expected_amount_minor`` is the registered amount, for a subscription plus the plan
  amount for every period after the first; ``received_amount_minor`` sums the periods (those in
  the other currency, when some were paid in one).
- An outcome whose ``external_identifier`` no payment names is ``unexpected``, one row per
  such identifier (all its outcomes together). Nothing is stored about the state itself: once
  the payment is registered the same outcomes reconcile against it.
- ``opened_at``, which ``reconcile(since=, until=)`` filters, is when the payment was
  registered, or for an unexpected identifier its earliest ``paid_at``.

Streaming: each arm walks an index in ``external_identifier`` order (payments by primary key,
outcomes by ``outcomes_reconciliation``), so the view aggregates without sorting or holding
rows, and rows come out expected payments first, then unexpected ones, each sorted by
identifier. A lookup of one identifier is pushed down into both arms as index searches.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from storage.currencies import from_minor_units
from storage.records import STATE_RANK, PaymentState, ReconciliationState
from storage.rows import PaymentKind, ReconciliationRow, SummaryRow
from storage.times import to_text

__all__ = [
    "RECONCILIATION_VIEW_SQL",
    "ROW_COLUMNS",
    "row_for",
    "select_rows",
    "state_for",
    "summary",
    "to_row",
]

_SUCCEEDED = STATE_RANK[PaymentState.SUCCEEDED]
_UNKNOWN = STATE_RANK[PaymentState.UNKNOWN]
_CLOSED = STATE_RANK[PaymentState.CANCELLED]
_PENDING = STATE_RANK[PaymentState.PENDING]

# An outcome's place in time as fixed-width text that sorts the same way: paid_at padded to 32
# characters (stored times share one shape, storage.times, and none is longer; a pad sorts
# below every character of a time), then the id in 20 digits. A state written after it
# starts at character 53, so one reference to an aggregate of such keys reads its state.
_KEY_WIDTH = 52
_WHEN = "printf('%-32s%020d', o.paid_at, o.id)"


def _state_after(key: str) -> str:
    """The state name written after a ``_WHEN``-shaped key."""
    return f"substr({key}, {_KEY_WIDTH + 1})"


# Aggregates over one payment's outcomes `o`. `period.one` is 1 on a period outcome, else NULL.
# SQLite computes an aggregate that appears several times once, so the expressions below are
# spelled out wherever they are needed instead of going through a subquery layer (except
# those holding a subquery, which SQLite cannot tell are equal: they appear once per column).
_TOP_RANK = "MAX(o.state_rank)"
_PERIODS = "COUNT(period.one)"
_PERIOD_TOTAL = "SUM(period.one * o.amount_minor)"

# The latest outcome's state.
_LATEST_STATE = _state_after(f"MAX({_WHEN} || o.state)")

# Without periods, the lifecycle state of the transaction with the latest known outcome. Each
# pending, failed or cancelled outcome that is its transaction's lifecycle outcome (the
# highest (rank, paid_at, id) of its known outcomes: an index range of its own transaction)
# carries its transaction's latest known time; the latest of those names the state.
_TRANSACTION_LATEST = f"""(
    SELECT CASE
        WHEN MAX(printf('%02d%-32s%020d', x.state_rank, x.paid_at, x.id))
            = printf('%02d', o.state_rank) || {_WHEN}
        THEN MAX(printf('%-32s%020d', x.paid_at, x.id))
    END
    FROM outcomes AS x
    WHERE x.external_identifier = o.external_identifier
      AND x.transaction_id = o.transaction_id
      AND x.state_rank >= {_PENDING}
)"""  # noqa: S608 - here and below, SQL built from constants only
_DECIDING_STATE = _state_after(
    f"MAX(CASE WHEN o.state_rank BETWEEN {_PENDING} AND {_CLOSED} "
    f"THEN {_TRANSACTION_LATEST} || o.state END)"
)


def _furthest_case() -> str:
    """``CASE <top rank> ...``: the state of a payment's furthest rank, once it has periods.

    From :data:`STATE_RANK`; the ranks from ``succeeded`` on must name one state each.
    """
    arms = []
    for state, rank in sorted(STATE_RANK.items(), key=lambda item: item[1]):
        if rank < _SUCCEEDED:
            continue
        if [other for other, r in STATE_RANK.items() if r == rank] != [state]:
            raise RuntimeError(  # pragma: no cover - guards a future edit of STATE_RANK
                f"STATE_RANK gives {state} a rank it shares; the view cannot tell them apart"
            )
        arms.append(f"WHEN {rank} THEN '{state}'")
    return f"CASE {_TOP_RANK} " + " ".join(arms) + " END"


_FURTHEST_STATE = _furthest_case()

_LIFECYCLE_STATE = f"""
    CASE
        WHEN {_PERIODS} > 0 THEN {_FURTHEST_STATE}
        ELSE COALESCE(
            {_DECIDING_STATE},
            CASE WHEN COUNT(o.id) > 0 THEN '{PaymentState.UNKNOWN}' END
        )
    END"""

# True for the one outcome of a transaction that makes it a period: its lowest-ranked outcome
# at or past `succeeded` (ties: the lowest id). A join condition, so it is evaluated once per
# outcome; the search is an index range of the outcome's own transaction.
_IS_PERIOD = f"""
    o.state_rank >= {_SUCCEEDED}
    AND NOT EXISTS (
        SELECT 1 FROM outcomes AS earlier
        WHERE earlier.external_identifier = o.external_identifier
          AND earlier.transaction_id = o.transaction_id
          AND earlier.state_rank BETWEEN {_SUCCEEDED} AND o.state_rank
          AND (earlier.state_rank < o.state_rank OR earlier.id < o.id)
    )"""  # noqa: S608

# Columns both arms compute the same way.
_SHARED_COLUMNS = f"""
    {_LIFECYCLE_STATE} AS lifecycle_state,
    {_PERIODS} AS periods_paid,
    json_group_array(DISTINCT o.transaction_id) FILTER (WHERE o.id IS NOT NULL)
        AS transaction_ids,
    COUNT(CASE WHEN o.state_rank = {_UNKNOWN} THEN 1 END) AS unknown_outcomes,
    MAX(o.paid_at) AS last_outcome_at"""

# For expected payments: a period paid in another currency, and the first period's amount.
_OTHER_CURRENCY = "MIN(CASE WHEN period.one = 1 AND o.currency <> p.currency THEN o.currency END)"
_FIRST_PERIOD = (
    "MIN(CASE WHEN period.one = 1 AND p.plan_amount_minor IS NOT NULL "
    "THEN o.paid_at || ' ' || o.amount_minor END)"
)
_FIRST_AMOUNT = f"CAST(substr({_FIRST_PERIOD}, instr({_FIRST_PERIOD}, ' ') + 1) AS INTEGER)"
_PERIODS_OFF_PLAN = "COUNT(CASE WHEN o.amount_minor <> p.plan_amount_minor THEN period.one END)"

_R = ReconciliationState
_EXPECTED_STATE = f"""
    CASE
        WHEN {_PERIODS} = 0 THEN
            CASE
                WHEN {_LATEST_STATE} = '{PaymentState.UNKNOWN}' THEN '{_R.UNKNOWN_STATUS}'
                ELSE CASE {_DECIDING_STATE}
                    WHEN '{PaymentState.FAILED}' THEN '{_R.FAILED}'
                    WHEN '{PaymentState.CANCELLED}' THEN '{_R.CANCELLED}'
                    ELSE '{_R.PENDING}'
                END
            END
        WHEN p.kind = '{PaymentKind.TRANSACTION}' AND {_PERIODS} > 1
            THEN '{_R.DUPLICATE_PAYMENT}'
        WHEN {_OTHER_CURRENCY} IS NOT NULL THEN '{_R.CURRENCY_MISMATCH}'
        WHEN p.kind = '{PaymentKind.TRANSACTION}' AND {_PERIOD_TOTAL} <> p.amount_minor
            THEN '{_R.AMOUNT_MISMATCH}'
        WHEN p.kind = '{PaymentKind.SUBSCRIPTION}' AND (
            {_FIRST_AMOUNT} <> p.amount_minor
            OR {_PERIODS_OFF_PLAN} - ({_FIRST_AMOUNT} <> p.plan_amount_minor) > 0
        ) THEN '{_R.AMOUNT_MISMATCH}'
        WHEN {_LATEST_STATE} = '{PaymentState.UNKNOWN}' THEN '{_R.UNKNOWN_STATUS}'
        WHEN {_TOP_RANK} = {_SUCCEEDED} THEN '{_R.PAID}'
        ELSE {_FURTHEST_STATE}
    END"""

_EXPECTED_ARM = f"""
SELECT
    p.external_identifier AS external_identifier,
    p.kind AS kind,
    {_EXPECTED_STATE} AS state,
    p.currency AS currency,
    CASE WHEN p.kind = '{PaymentKind.SUBSCRIPTION}' AND {_PERIODS} > 1
        THEN p.amount_minor + p.plan_amount_minor * ({_PERIODS} - 1)
        ELSE p.amount_minor END AS expected_amount_minor,
    CASE WHEN {_PERIODS} = 0 THEN NULL
        ELSE COALESCE({_OTHER_CURRENCY}, p.currency) END AS received_currency,
    CASE WHEN {_OTHER_CURRENCY} IS NULL THEN {_PERIOD_TOTAL}
        ELSE SUM(CASE WHEN o.currency <> p.currency THEN period.one * o.amount_minor END)
        END AS received_amount_minor,
    p.created_at AS opened_at,
    {_SHARED_COLUMNS}
FROM payments AS p
LEFT JOIN outcomes AS o ON o.external_identifier = p.external_identifier
LEFT JOIN (SELECT 1 AS one) AS period ON {_IS_PERIOD}
GROUP BY p.external_identifier"""  # noqa: S608

_PERIOD_CURRENCY = "CASE WHEN period.one = 1 THEN o.currency END"
_UNEXPECTED_ARM = f"""
SELECT
    o.external_identifier AS external_identifier,
    NULL AS kind,
    '{_R.UNEXPECTED}' AS state,
    COALESCE(MIN({_PERIOD_CURRENCY}), MIN(o.currency)) AS currency,
    NULL AS expected_amount_minor,
    MIN({_PERIOD_CURRENCY}) AS received_currency,
    CASE WHEN MIN({_PERIOD_CURRENCY}) = MAX({_PERIOD_CURRENCY})
        THEN {_PERIOD_TOTAL} END AS received_amount_minor,
    MIN(o.paid_at) AS opened_at,
    {_SHARED_COLUMNS}
FROM outcomes AS o
LEFT JOIN (SELECT 1 AS one) AS period ON {_IS_PERIOD}
WHERE NOT EXISTS (
    SELECT 1 FROM payments AS p WHERE p.external_identifier = o.external_identifier
)
GROUP BY o.external_identifier"""  # noqa: S608

#: The view, as created by the schema migrations. Columns: see :data:`ROW_COLUMNS`.
RECONCILIATION_VIEW_SQL = (
    f"CREATE VIEW reconciliation AS{_EXPECTED_ARM}\nUNION ALL{_UNEXPECTED_ARM}"
)

#: The view's columns, in the order :func:`select_rows` returns them.
ROW_COLUMNS = (
    "external_identifier",
    "kind",
    "state",
    "currency",
    "expected_amount_minor",
    "received_currency",
    "received_amount_minor",
    "opened_at",
    "lifecycle_state",
    "periods_paid",
    "transaction_ids",
    "unknown_outcomes",
    "last_outcome_at",
)

_SELECT_ROWS = f"SELECT {', '.join(ROW_COLUMNS)} FROM reconciliation"  # noqa: S608

# Enum lookups by value, cheaper than calling the enum per row of a million-row report.
_KINDS: Mapping[str | None, PaymentKind | None] = {None: None, **{k.value: k for k in PaymentKind}}
_STATES: Mapping[str, ReconciliationState] = {s.value: s for s in ReconciliationState}
_LIFECYCLE: Mapping[str | None, PaymentState | None] = {
    None: None,
    **{s.value: s for s in PaymentState},
}


_new_row = tuple.__new__
_parse_time = datetime.fromisoformat  # what storage.times.from_text does, without the call


def _transaction_ids(text: str) -> tuple[str, ...]:
    """The view's JSON array of ids, sorted (the SQL gives them in index order already)."""
    if text == "[]":
        return ()
    return tuple(sorted(json.loads(text)))


def to_row(values: tuple[Any, ...]) -> ReconciliationRow:
    """One tuple of :data:`ROW_COLUMNS` as a :class:`ReconciliationRow`.

    This runs once per row of a report, so it builds the tuple directly and parses the usual
    single-id array (``["ll-1"]``: two quotes, no escapes) without the JSON parser.
    """
    (
        external_identifier,
        kind,
        state,
        currency,
        expected_amount_minor,
        received_currency,
        received_amount_minor,
        opened_at,
        lifecycle_state,
        periods_paid,
        transaction_ids,
        unknown_outcomes,
        last_outcome_at,
    ) = values
    return _new_row(
        ReconciliationRow,
        (
            external_identifier,
            _KINDS[kind],
            _STATES[state],
            currency,
            expected_amount_minor,
            received_currency,
            received_amount_minor,
            _parse_time(opened_at),
            _LIFECYCLE[lifecycle_state],
            periods_paid,
            (transaction_ids[2:-2],)
            if transaction_ids.count('"') == 2 and "\\" not in transaction_ids
            else _transaction_ids(transaction_ids),
            unknown_outcomes,
            None if last_outcome_at is None else _parse_time(last_outcome_at),
        ),
    )


def select_rows(
    conn: sqlite3.Connection,
    *,
    state: ReconciliationState | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> sqlite3.Cursor:
    """A cursor over the view's rows (tuples of :data:`ROW_COLUMNS`), optionally filtered.

    ``since`` (inclusive) and ``until`` (exclusive) compare with ``opened_at``: when the payment
    was registered, or for an unexpected one its earliest ``paid_at``. Rows come expected
    payments first, then unexpected ones, each sorted by ``external_identifier``.
    """
    conditions: list[str] = []
    params: list[str] = []
    if state is not None:
        conditions.append("state = ?")
        params.append(ReconciliationState(state).value)
    if since is not None:
        conditions.append("opened_at >= ?")
        params.append(to_text(since, argument="since"))
    if until is not None:
        conditions.append("opened_at < ?")
        params.append(to_text(until, argument="until"))
    sql = _SELECT_ROWS
    if conditions:
        sql += " WHERE " + " AND ".join(conditions)
    return conn.execute(sql, params)


def row_for(conn: sqlite3.Connection, external_identifier: str) -> ReconciliationRow | None:
    """The view's row for one identifier (index searches in both arms), or None."""
    values = conn.execute(
        _SELECT_ROWS + " WHERE external_identifier = ?", (external_identifier,)
    ).fetchone()
    return None if values is None else to_row(values)


def state_for(conn: sqlite3.Connection, external_identifier: str) -> ReconciliationState | None:
    """Only the state of one identifier, or None when neither a payment nor an outcome names it."""
    found = conn.execute(
        "SELECT state FROM reconciliation WHERE external_identifier = ?", (external_identifier,)
    ).fetchone()
    return None if found is None else _STATES[found[0]]


_SUMMARY_SQL = """
SELECT
    currency,
    state,
    COUNT(*),
    COALESCE(SUM(expected_amount_minor), 0),
    COALESCE(SUM(CASE WHEN received_currency = currency THEN received_amount_minor END), 0)
FROM reconciliation
GROUP BY currency, state
ORDER BY currency, state"""


def summary(conn: sqlite3.Connection) -> list[SummaryRow]:
    """Counts and totals per currency and state, grouped in SQL (a few dozen rows at most)."""
    return [
        SummaryRow(
            currency=currency,
            state=_STATES[state],
            count=count,
            expected_amount_minor=expected,
            received_amount_minor=received,
            expected_total=from_minor_units(expected, currency),
            received_total=from_minor_units(received, currency),
        )
        for currency, state, count, expected, received in conn.execute(_SUMMARY_SQL)
    ]
