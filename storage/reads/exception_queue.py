"""The exceptions queue's reads: the mismatched payments counted in SQL, and only the rows a
page lists.

A first sync can list a million transactions nobody expected; the queue must not read them all
to show 500. So the counts per state, per age bucket and per currency the money arrived in are
one ``GROUP BY`` (the partial index ``payment_states_mismatches`` holds only the mismatched
rows), and the rows listed are the oldest opened, ``LIMIT``-ed, read in the order of
``payment_states_mismatches_opened``. Both engines run the same text: times are stored as UTC
ISO 8601 text, which compares in time order byte by byte (``COLLATE "C"`` on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from payhooks.storage.records import MISMATCH_STATES, ReconciliationState
from payhooks.storage.sql import Connection
from payhooks.storage.times import to_text
from payhooks.storage.views import RECONCILIATION_COLUMNS

__all__ = ["MismatchCount", "count_mismatches", "select_mismatches"]

#: The mismatched states, in the order the partial indexes name them (SQLite uses a partial
#: index only for a query that repeats its condition as written).
_STATES_SQL = ", ".join(f"'{state.value}'" for state in sorted(MISMATCH_STATES))


class MismatchCount(NamedTuple):
    """How many mismatched payments are in one state, one age bucket and one currency of money
    received (the currency it arrived in; the expected one when nothing arrived), and the
    money: the sum of ``received_amount_minor`` (None when none of them received any)."""

    state: ReconciliationState
    #: The index of the age bucket in the thresholds asked for (0: the youngest).
    age: int
    currency: str
    payments: int
    received_amount_minor: int | None


def count_mismatches(
    conn: Connection, now: datetime, ages: Sequence[timedelta]
) -> list[MismatchCount]:
    """The mismatched payments grouped by state, age and currency.

    :param ages: the ages each bucket starts at, youngest first (the first is 0): a payment
        opened at ``opened_at`` is in the last bucket whose start ``now - opened_at`` reaches;
        one opened after ``now``, in the first.
    """
    cases = []
    params: list[Any] = []
    for index in range(len(ages) - 1, 0, -1):
        cases.append(f"WHEN opened_at <= ? THEN {index}")
        params.append(to_text(now - ages[index], argument="now"))
    age = f"CASE {' '.join(cases)} ELSE 0 END" if cases else "0"
    sql = (
        f"SELECT state, {age}, COALESCE(received_currency, currency), COUNT(*), "  # noqa: S608
        "CAST(SUM(received_amount_minor) AS BIGINT) FROM payment_states "
        f"WHERE state IN ({_STATES_SQL}) GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    )
    return [
        MismatchCount(
            ReconciliationState(state),
            int(bucket),
            currency,
            int(count),
            None if received is None else int(received),
        )
        for state, bucket, currency, count, received in conn.execute(sql, params)
    ]


def select_mismatches(conn: Connection, limit: int) -> list[tuple[Any, ...]]:
    """The ``limit`` mismatched rows opened first (the reconciliation view's columns), ties in
    the reconciliation's own order."""
    sql = (
        f"SELECT {', '.join(RECONCILIATION_COLUMNS)} FROM reconciliation "  # noqa: S608
        f"WHERE state IN ({_STATES_SQL}) "
        "ORDER BY opened_at, kind IS NULL, external_identifier LIMIT ?"
    )
    return list(conn.execute(sql, (limit,)))
