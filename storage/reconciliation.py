"""The reconciliation, in SQL: the ``reconciliation`` view and the queries over it.

Finance tools read the view directly, and the ledger reads nothing else, so there is one
definition of every state. Python only streams the view's rows into
:class:`~payhooks.storage.rows.ReconciliationRow`.

How a payment's state is decided (docs/reconciliation.md's states, made precise):

- *Latest* means by ``paid_at``, ties broken by the outcome's id (the order of arrival).
- A *transaction* (one ``transaction_id``) has a *lifecycle state*: that of its highest-ranked
  outcome whose state is known (:data:`payhooks.storage.records.STATE_RANK`; ``failed`` and
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

Where it reads: no outcome. Each payment is joined, by primary key, to its identifier's one
row of ``identifiers``, which rolls up its rows of ``transactions``, which roll up each
transaction's outcomes (:mod:`payhooks.storage.rollup`: kept by triggers in the writing
transaction), and to its row of ``listed_identifiers`` when ``payhooks sync`` listed any of
its transactions: their most urgent drift, kept by triggers too
(:mod:`payhooks.storage.listed_identifiers`, migration 0011). Nothing in those rows depends on
what was registered, beyond whether something was: the view compares amounts and currencies
itself. The rare payment whose periods came in several
currencies reads its transactions for the amount in the other one. The expected arm walks
``payments`` by primary key, the unexpected one the partial index ``identifiers_unexpected``,
and the listed-only one the partial index ``listed_identifiers_unnamed``, so rows come out
without sorting or holding anything, expected payments first, then unexpected ones, each sorted
by identifier. A lookup of one identifier is pushed down into every arm as primary-key
searches.

The view is written so that SQLite flattens it into a plain query that reads it, one with no
aggregate, ``DISTINCT`` or ``ORDER BY`` over it (the report, :func:`row_for`,
:func:`state_for`; migration 0010): each column has the same affinity in every arm (a ``NULL``
cast to ``TEXT``, a column read through ``COALESCE`` where another arm computes it), and no arm
aggregates. Otherwise SQLite runs a
``UNION ALL`` view as a co-routine that computes and copies out every column of every row;
flattened, a query computes only the columns it names. ``bench.reconcile`` at 10^6 payments,
the report against the bare aggregate: never synced, 3.19x before the flattening and 2.48x
after it (with a guard, since replaced, that skipped the drift's search when nothing was
listed), 2.52x with ``listed_identifiers``; ``--synced`` (every transaction listed), 4.33x
before the flattening, 3.84x after it, 2.95x once each payment read its one
``listed_identifiers`` row instead of searching its listed transactions and their rolled-up
rows (summary 2.31x to 1.52x), and 2.68x once the identifiers only the list names were read
through a partial index of their own instead of searching ``payments`` and ``identifiers`` for
every listed transaction (summary 1.24x; migration 0012).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from payhooks.storage.currencies import from_minor_units
from payhooks.storage.records import STATE_RANK, PaymentState, ReconciliationState
from payhooks.storage.rows import PaymentKind, ReconciliationRow, SummaryRow
from payhooks.storage.service_transactions import LATEST_COMPLETE_THRESHOLD_SQL
from payhooks.storage.sql import Connection, Cursor
from payhooks.storage.times import to_text

__all__ = [
    "RECONCILIATION_VIEW_SQL",
    "ROW_COLUMNS",
    "reconciliation_view_sql",
    "row_for",
    "select_rows",
    "state_for",
    "summary",
    "to_row",
]

_SUCCEEDED = STATE_RANK[PaymentState.SUCCEEDED]
_R = ReconciliationState

# For an expected payment `p` and its identifier's row `i` (NULL columns when no outcome;
# the period columns are NULL too when nothing succeeded). Some period was paid in another
# currency:
_OTHER_CURRENCY_PAID = (
    "(i.period_currency_min <> p.currency OR i.period_currency_max <> p.currency)"
)
# The periods' currencies differ among themselves (rare): then the other currency and the
# amount in it are read from the identifier's transactions.
_MIXED_CURRENCIES = "i.period_currency_min <> i.period_currency_max"


def _expected_arm(identifiers: str, transactions: str, listed: str) -> str:
    foreign_periods = f"""
        FROM {transactions} AS x
        WHERE x.external_identifier = p.external_identifier
          AND x.period_currency <> p.currency"""
    state = f"""
    CASE
        WHEN i.periods > 0 AND p.kind = '{PaymentKind.TRANSACTION}' AND i.periods > 1
            THEN '{_R.DUPLICATE_PAYMENT}'
        WHEN i.periods > 0 AND {_OTHER_CURRENCY_PAID} THEN '{_R.CURRENCY_MISMATCH}'
        WHEN i.periods > 0 AND p.kind = '{PaymentKind.TRANSACTION}'
            AND i.period_total <> p.amount_minor THEN '{_R.AMOUNT_MISMATCH}'
        WHEN i.periods > 0 AND p.kind = '{PaymentKind.SUBSCRIPTION}' AND (
            i.first_period_amount <> p.amount_minor
            OR i.later_amount_min <> p.plan_amount_minor
            OR i.later_amount_max <> p.plan_amount_minor
        ) THEN '{_R.AMOUNT_MISMATCH}'
    ELSE CASE
        -- What the service's list shows for this payment's transactions (payhooks sync).
        WHEN d.drift IS NOT NULL THEN d.drift
        WHEN i.periods IS NULL OR i.periods = 0 THEN
            CASE
                WHEN i.latest_state = '{PaymentState.UNKNOWN}' THEN '{_R.UNKNOWN_STATUS}'
                WHEN i.lifecycle_state = '{PaymentState.FAILED}' THEN '{_R.FAILED}'
                WHEN i.lifecycle_state = '{PaymentState.CANCELLED}' THEN '{_R.CANCELLED}'
                WHEN i.external_identifier IS NOT NULL OR d.external_identifier IS NOT NULL
                    THEN '{_R.PENDING}'
                WHEN p.creation = 'refused' THEN '{_R.NOT_CREATED}'
                WHEN p.created_at < {LATEST_COMPLETE_THRESHOLD_SQL}
                    THEN '{_R.MISSING_AT_SERVICE}'
                ELSE '{_R.PENDING}'
            END
        WHEN i.latest_state = '{PaymentState.UNKNOWN}' THEN '{_R.UNKNOWN_STATUS}'
        WHEN i.top_rank = {_SUCCEEDED} THEN '{_R.PAID}'
        ELSE i.lifecycle_state
    END END"""
    return f"""
SELECT
    p.external_identifier AS external_identifier,
    p.kind AS kind,
    {state} AS state,
    p.currency AS currency,
    CASE WHEN p.kind = '{PaymentKind.SUBSCRIPTION}' AND i.periods > 1
        THEN p.amount_minor + p.plan_amount_minor * (i.periods - 1)
        ELSE p.amount_minor END AS expected_amount_minor,
    CAST(CASE
        WHEN i.period_currency_min IS NULL THEN NULL
        WHEN i.period_currency_min <> p.currency THEN i.period_currency_min
        WHEN i.period_currency_max = p.currency THEN p.currency
        ELSE (SELECT MIN(x.period_currency) {foreign_periods})
    END AS TEXT) AS received_currency,
    CASE
        WHEN {_MIXED_CURRENCIES} THEN (SELECT SUM(x.period_amount_minor) {foreign_periods})
        ELSE i.period_total
    END AS received_amount_minor,
    p.created_at AS opened_at,
    i.lifecycle_state AS lifecycle_state,
    COALESCE(i.periods, 0) AS periods_paid,
    COALESCE(i.transaction_ids, '[]') AS transaction_ids,
    COALESCE(i.unknown_outcomes, 0) AS unknown_outcomes,
    i.last_paid_at AS last_outcome_at
FROM payments AS p
LEFT JOIN {identifiers} AS i ON i.external_identifier = p.external_identifier
LEFT JOIN {listed} AS d ON d.external_identifier = p.external_identifier"""  # noqa: S608


def _unexpected_arm(identifiers: str) -> str:
    return f"""
SELECT
    i.external_identifier AS external_identifier,
    CAST(NULL AS TEXT) AS kind,
    '{_R.UNEXPECTED}' AS state,
    CAST(COALESCE(i.period_currency_min, i.min_currency) AS TEXT) AS currency,
    NULL AS expected_amount_minor,
    i.period_currency_min AS received_currency,
    CASE WHEN NOT {_MIXED_CURRENCIES} THEN i.period_total END AS received_amount_minor,
    i.first_paid_at AS opened_at,
    i.lifecycle_state AS lifecycle_state,
    COALESCE(i.periods, 0) AS periods_paid,
    COALESCE(i.transaction_ids, '[]') AS transaction_ids,
    COALESCE(i.unknown_outcomes, 0) AS unknown_outcomes,
    i.last_paid_at AS last_outcome_at
FROM {identifiers} AS i
WHERE NOT i.expected"""  # noqa: S608


def _listed_only_arm(listed: str) -> str:
    """Identifiers only the service's list names (``payhooks sync``): no payment, no outcome.
    ``unexpected`` too; ``currency`` is the list's when it gave a known one, else ``XXX``
    (ISO 4217's "no currency"), and nothing counts as received: the list is not signed. Found
    through ``listed_identifiers``' partial index of the rows nothing else names, so a ledger
    whose every payment is listed reads none of them here."""
    listed_transactions = (
        "FROM service_transactions AS s WHERE s.external_identifier = l.external_identifier"
    )
    return f"""
SELECT
    l.external_identifier AS external_identifier,
    CAST(NULL AS TEXT) AS kind,
    '{_R.UNEXPECTED}' AS state,
    CAST(COALESCE((SELECT MIN(s.currency) {listed_transactions}), 'XXX') AS TEXT) AS currency,
    NULL AS expected_amount_minor,
    CAST(NULL AS TEXT) AS received_currency,
    NULL AS received_amount_minor,
    CAST((SELECT MIN(s.first_seen_at) {listed_transactions}) AS TEXT) AS opened_at,
    CAST(NULL AS TEXT) AS lifecycle_state,
    0 AS periods_paid,
    '[]' AS transaction_ids,
    0 AS unknown_outcomes,
    CAST(NULL AS TEXT) AS last_outcome_at
FROM {listed} AS l
WHERE l.named = 0"""  # noqa: S608


def reconciliation_view_sql(
    name: str = "reconciliation",
    identifiers: str = "identifiers",
    transactions: str = "transactions",
    listed: str = "listed_identifiers",
) -> str:
    """The view's ``CREATE`` statement, over per-identifier and per-transaction rows.

    The ledger's view reads the stored tables (:mod:`payhooks.storage.rollup`); tests build the same
    view over the views that compute those rows from ``outcomes`` at query time, and compare.
    """
    return (
        f"CREATE VIEW {name} AS{_expected_arm(identifiers, transactions, listed)}"
        f"\nUNION ALL{_unexpected_arm(identifiers)}"
        f"\nUNION ALL{_listed_only_arm(listed)}"
    )


#: The view, as :func:`payhooks.storage.sqlite.schema.create_views` creates it. Columns:
#: :data:`ROW_COLUMNS`.
RECONCILIATION_VIEW_SQL = reconciliation_view_sql()

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

# What the ledger reads: the view's columns, except that kind, state and lifecycle state come
# as one text ("transaction/paid/succeeded"), looked up once in _NAMES. A report converts a
# million rows, and each column a row carries costs a Python object and each name a lookup.
_PACKED_NAMES = "COALESCE(kind, '') || '/' || state || '/' || COALESCE(lifecycle_state, '')"
_PACKED = frozenset({"kind", "state", "lifecycle_state"})
_READ_COLUMNS = (
    "external_identifier",
    _PACKED_NAMES,
    *(c for c in ROW_COLUMNS if c != "external_identifier" and c not in _PACKED),
)
_SELECT_ROWS = f"SELECT {', '.join(_READ_COLUMNS)} FROM reconciliation"  # noqa: S608

# Packed names -> (kind, state, lifecycle state): every combination, built once.
_NAMES: Mapping[str, tuple[PaymentKind | None, ReconciliationState, PaymentState | None]] = {
    f"{kind or ''}/{state}/{lifecycle or ''}": (kind, state, lifecycle)
    for kind in (None, *PaymentKind)
    for state in ReconciliationState
    for lifecycle in (None, *PaymentState)
}
_STATES: Mapping[str, ReconciliationState] = {s.value: s for s in ReconciliationState}

_new_row = tuple.__new__
_parse_time = datetime.fromisoformat  # what payhooks.storage.times.from_text does, without the call


def _transaction_ids(text: str) -> tuple[str, ...]:
    """The view's JSON array of ids, sorted (the SQL gives them in index order already)."""
    if text == "[]":
        return ()
    return tuple(sorted(json.loads(text)))


def to_row(values: tuple[Any, ...]) -> ReconciliationRow:
    """One row as :data:`_SELECT_ROWS` reads it, as a :class:`ReconciliationRow`.

    This runs once per row of a report, so it builds the tuple directly, reads the three names
    with one lookup, and parses the usual single-id array (``["ll-1"]``: two quotes, no
    escapes) without the JSON parser.
    """
    (
        external_identifier,
        names,
        currency,
        expected_amount_minor,
        received_currency,
        received_amount_minor,
        opened_at,
        periods_paid,
        transaction_ids,
        unknown_outcomes,
        last_outcome_at,
    ) = values
    kind, state, lifecycle_state = _NAMES[names]
    return _new_row(
        ReconciliationRow,
        (
            external_identifier,
            kind,
            state,
            currency,
            expected_amount_minor,
            received_currency,
            received_amount_minor,
            _parse_time(opened_at),
            lifecycle_state,
            periods_paid,
            (transaction_ids[2:-2],)
            if transaction_ids.count('"') == 2 and "\\" not in transaction_ids
            else _transaction_ids(transaction_ids),
            unknown_outcomes,
            None if last_outcome_at is None else _parse_time(last_outcome_at),
        ),
    )


# SQLite's plan walks each arm's index in order, so its rows come sorted without a sort (tests
# pin the plan). PostgreSQL's planner promises no order for a UNION ALL without ORDER BY, so
# its connection (``unordered_union``) asks for it: expected payments first, then unexpected
# ones (the only rows without a kind), each by identifier.
# SQLite's order, asked for: the view's arms in turn (identifiers only the service lists have
# no transaction ids), each by identifier.
_IN_ORDER = " ORDER BY kind IS NULL, (kind IS NULL AND transaction_ids = '[]'), external_identifier"


def select_rows(
    conn: Connection,
    *,
    state: ReconciliationState | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Cursor:
    """A cursor over the view's rows (tuples for :func:`to_row`), optionally filtered.

    ``since`` (inclusive) and ``until`` (exclusive) compare with ``opened_at``: when the payment
    was registered, or for an unexpected one its earliest ``paid_at``. Rows come expected
    payments first, then unexpected ones with outcomes, then identifiers only the service's
    list names, each sorted by ``external_identifier``.
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
    if getattr(conn, "unordered_union", False):
        sql += _IN_ORDER
    return conn.execute(sql, params)


def row_for(conn: Connection, external_identifier: str) -> ReconciliationRow | None:
    """The view's row for one identifier (index searches in both arms), or None."""
    values = conn.execute(
        _SELECT_ROWS + " WHERE external_identifier = ?", (external_identifier,)
    ).fetchone()
    return None if values is None else to_row(values)


def state_for(conn: Connection, external_identifier: str) -> ReconciliationState | None:
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


def summary(conn: Connection) -> list[SummaryRow]:
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
