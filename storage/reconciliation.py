"""Reading the reconciliation: the ``reconciliation`` view's rows, one payment's, and the totals.

The rows are stored (:mod:`payhooks.storage.payment_states`, decided by
:mod:`payhooks.storage.rules`); here they are only read and turned into
:class:`~payhooks.storage.rows.ReconciliationRow` and :class:`~payhooks.storage.rows.SummaryRow`.

Totals follow docs/reconciliation.md: money is added up in the currency it arrived in (a
``currency_mismatch`` payment's money counts in its own currency, never in the expected one),
and refunds and charge-backs are shown beside what was received, and netted.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from payhooks.storage.currencies import from_minor_units
from payhooks.storage.records import PaymentState, ReconciliationState
from payhooks.storage.rows import PaymentKind, ReconciliationRow, SummaryRow
from payhooks.storage.sql import Connection, Cursor
from payhooks.storage.sync_rows import DriftKind
from payhooks.storage.times import to_text
from payhooks.storage.views import RECONCILIATION_COLUMNS

__all__ = ["row_for", "select_rows", "state_for", "summary", "to_row"]

_SELECT = f"SELECT {', '.join(RECONCILIATION_COLUMNS)} FROM reconciliation"  # noqa: S608
_ORDER = " ORDER BY kind IS NULL, external_identifier"


# Each named value once, looked up by its text: a report turns a million rows, and a dictionary
# lookup costs less than an enum's constructor.
_KINDS: dict[str | None, PaymentKind | None] = {None: None, **{k.value: k for k in PaymentKind}}
_STATES = {s.value: s for s in ReconciliationState}
_LIFECYCLES: dict[str | None, PaymentState | None] = {
    None: None,
    **{s.value: s for s in PaymentState},
}
_DRIFTS: dict[str | None, DriftKind | None] = {None: None, **{d.value: d for d in DriftKind}}
_parse_time = datetime.fromisoformat
_new_row = tuple.__new__


def _transaction_ids(text: str) -> tuple[str, ...]:
    """The stored JSON array of ids; the usual one id (``["ll-1"]``: two quotes, no escape)
    without the JSON parser."""
    if text == "[]":
        return ()
    if text.count('"') == 2 and "\\" not in text:
        return (text[2:-2],)
    return tuple(json.loads(text))


def to_row(values: tuple[Any, ...]) -> ReconciliationRow:
    """One row of the view (:data:`~payhooks.storage.views.RECONCILIATION_COLUMNS` order)."""
    (identifier, kind, state, currency, expected, received_currency, received, opened_at,
     lifecycle, periods, transaction_ids, unknown, last_outcome_at, drift, refunded,
     charged_back, net, refused, conflicting, latest_problem, home_received) = values  # fmt: skip
    return _new_row(  # the named tuple's own constructor costs more than the tuple's
        ReconciliationRow,
        (
            identifier,
            _KINDS[kind],
            _STATES[state],
            currency,
            expected,
            received_currency,
            received,
            _parse_time(opened_at),
            _LIFECYCLES[lifecycle],
            periods,
            _transaction_ids(transaction_ids),
            unknown,
            None if last_outcome_at is None else _parse_time(last_outcome_at),
            _DRIFTS[drift],
            refunded,
            charged_back,
            net,
            refused,
            conflicting,
            latest_problem,
            home_received,
        ),
    )


def select_rows(
    conn: Connection,
    *,
    states: frozenset[ReconciliationState] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    paid_since: datetime | None = None,
    paid_until: datetime | None = None,
) -> Cursor:
    """A cursor over the view's rows (tuples for :func:`to_row`): expected payments first, then
    the identifiers nobody expected, each by ``external_identifier``.

    :param states: only rows in one of these states.
    :param since: only rows opened at or after this time (inclusive); ``until``: before it.
    :param paid_since: only payments with a ``succeeded`` outcome whose ``paid_at`` is at or
        after this time; ``paid_until``: before it (one outcome meets both). Money that arrived
        in the window, whatever became of it later.
    """
    conditions: list[str] = []
    params: list[str] = []
    if states:
        conditions.append(f"state IN ({', '.join('?' for _ in states)})")
        params.extend(sorted(s.value for s in states))
    if since is not None:
        conditions.append("opened_at >= ?")
        params.append(to_text(since, argument="since"))
    if until is not None:
        conditions.append("opened_at < ?")
        params.append(to_text(until, argument="until"))
    if paid_since is not None or paid_until is not None:
        paid = [f"state = '{PaymentState.SUCCEEDED.value}'"]
        if paid_since is not None:
            paid.append("paid_at >= ?")
            params.append(to_text(paid_since, argument="paid_since"))
        if paid_until is not None:
            paid.append("paid_at < ?")
            params.append(to_text(paid_until, argument="paid_until"))
        conditions.append(
            "external_identifier IN (SELECT external_identifier FROM outcomes WHERE "  # noqa: S608 - constants only
            + " AND ".join(paid)
            + ")"
        )
    sql = _SELECT + (" WHERE " + " AND ".join(conditions) if conditions else "") + _ORDER
    return conn.execute(sql, params)


def row_for(conn: Connection, external_identifier: str) -> ReconciliationRow | None:
    """One identifier's row, or None."""
    values = conn.execute(
        _SELECT + " WHERE external_identifier = ?", (external_identifier,)
    ).fetchone()
    return None if values is None else to_row(values)


def state_for(conn: Connection, external_identifier: str) -> ReconciliationState | None:
    """One identifier's state, or None when nothing names it."""
    found = conn.execute(
        "SELECT state FROM payment_states WHERE external_identifier = ?", (external_identifier,)
    ).fetchone()
    return None if found is None else ReconciliationState(found[0])


# Each row counts once where it was expected; money that arrived in another currency is added
# to that currency's row of the same state (count 0, nothing expected).
_SUMMARY_SQL = """
SELECT currency, state, CAST(SUM(n) AS BIGINT), CAST(SUM(expected) AS BIGINT),
    CAST(SUM(received) AS BIGINT), CAST(SUM(refunded) AS BIGINT),
    CAST(SUM(charged_back) AS BIGINT)
FROM (
    SELECT currency, state, 1 AS n, COALESCE(expected_amount_minor, 0) AS expected,
        CASE WHEN received_currency = currency THEN COALESCE(received_amount_minor, 0)
            ELSE home_received_amount_minor END AS received,
        CASE WHEN received_currency = currency THEN refunded_amount_minor ELSE 0 END
            AS refunded,
        CASE WHEN received_currency = currency THEN charged_back_amount_minor ELSE 0 END
            AS charged_back
    FROM payment_states
    UNION ALL
    SELECT received_currency, state, 0, 0, received_amount_minor, refunded_amount_minor,
        charged_back_amount_minor
    FROM payment_states
    WHERE received_currency <> currency AND received_amount_minor IS NOT NULL
) AS money
GROUP BY currency, state
ORDER BY currency, state"""


def summary(conn: Connection) -> list[SummaryRow]:
    """Counts and totals per currency and state, grouped in SQL (a few dozen rows at most)."""
    return [
        SummaryRow(
            currency=currency,
            state=ReconciliationState(state),
            count=count,
            expected_amount_minor=expected,
            received_amount_minor=received,
            expected_total=from_minor_units(expected, currency),
            received_total=from_minor_units(received, currency),
            refunded_amount_minor=refunded,
            charged_back_amount_minor=charged_back,
        )
        for currency, state, count, expected, received, refunded, charged_back in conn.execute(
            _SUMMARY_SQL
        )
    ]
