"""The finance rollup's SQL: its own tables, and what it reads of the ledger's.

One text for both engines (``?`` placeholders), but for the few lines where they differ, named
per engine in :data:`PAYMENTS_ID` and :class:`Horizon`. The figures themselves are never
computed here: an hour is computed by finance's own SQL
(:func:`payhooks.storage.reads.finance_sql.opened_groups`,
:data:`~payhooks.storage.reads.finance_sql.PAID_BUCKETS_SQL`), and these statements store and
sum its rows.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = [
    "BUILD_HOURS",
    "CHANGED_TIMES",
    "CHANGES",
    "DAYS",
    "DAY_SUMS_OPENED",
    "DAY_SUMS_PAID",
    "HOURS_OPENED",
    "HOURS_PAID",
    "INSERT_OPENED",
    "INSERT_PAID",
    "MARK_DIRTY",
    "OPENED_COLUMNS",
    "PAYMENTS_ID",
    "SPAN",
    "SUM_DAY_OPENED",
    "SUM_DAY_PAID",
    "opened_sums",
    "paid_sums",
]

#: The stored columns of ``finance_hours_opened`` after ``hour, day``.
OPENED_COLUMNS: Final = (
    "currency, received_currency, state, drifting, kind, count, expected, received, "
    "home_received, refunded, charged_back"
)
INSERT_OPENED: Final = (
    f"INSERT INTO finance_hours_opened (hour, day, {OPENED_COLUMNS}) "  # noqa: S608 - constants
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_PAID: Final = (
    "INSERT INTO finance_hours_paid (hour, day, currency, state, count, amount_minor) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
#: A day's rows summed again from its stored hours (``[?, ?)``: the day's range of hours),
#: once its old rows are deleted.
SUM_DAY_OPENED: Final = f"""
INSERT INTO finance_days_opened (day, {OPENED_COLUMNS})
SELECT day, currency, received_currency, state, drifting, kind, SUM(count), SUM(expected),
    SUM(received), SUM(home_received), SUM(refunded), SUM(charged_back)
FROM finance_hours_opened WHERE hour >= ? AND hour < ?
GROUP BY day, currency, received_currency, state, drifting, kind"""  # noqa: S608 - constants
SUM_DAY_PAID: Final = """
INSERT INTO finance_days_paid (day, currency, state, count, amount_minor)
SELECT day, currency, state, SUM(count), SUM(amount_minor)
FROM finance_hours_paid WHERE hour >= ? AND hour < ?
GROUP BY day, currency, state"""
#: The stored rows of the hours in ``[?, ?)``, to compare with a new computation.
HOURS_OPENED: Final = (
    f"SELECT hour, day, {OPENED_COLUMNS} FROM finance_hours_opened "  # noqa: S608 - constants
    "WHERE hour >= ? AND hour < ?"
)
HOURS_PAID: Final = (
    "SELECT hour, day, currency, state, count, amount_minor FROM finance_hours_paid "
    "WHERE hour >= ? AND hour < ?"
)
#: One day's stored day rows, shaped as its hours' (the day twice: as the hour, as the day).
DAY_SUMS_OPENED: Final = f"SELECT day, day, {OPENED_COLUMNS} FROM finance_days_opened WHERE day = ?"  # noqa: S608
DAY_SUMS_PAID: Final = (
    "SELECT day, day, currency, state, count, amount_minor FROM finance_days_paid WHERE day = ?"
)

#: Mark a local hour (its key, its day) to compute again: a new version, the oldest change
#: waiting, the newest's cause (but an hour the build marked stays the build's until computed:
#: it was never computed).
MARK_DIRTY: Final = """
INSERT INTO finance_rollup_dirty (hour, day, version, marked_at, changed_at, cause, cause_ref,
    cause_at)
VALUES (?, ?, 1, ?, ?, ?, ?, ?)
ON CONFLICT (day, hour) DO UPDATE SET version = finance_rollup_dirty.version + 1,
    marked_at = excluded.marked_at,
    changed_at = CASE WHEN excluded.changed_at < finance_rollup_dirty.changed_at
        THEN excluded.changed_at ELSE finance_rollup_dirty.changed_at END,
    cause = CASE WHEN finance_rollup_dirty.cause = 'build' THEN 'build' ELSE excluded.cause END,
    cause_ref = CASE WHEN finance_rollup_dirty.cause = 'build' THEN ''
        ELSE excluded.cause_ref END,
    cause_at = excluded.cause_at"""

#: The id of a registration, in the order registrations committed: SQLite's rowid,
#: PostgreSQL's ``payments.id`` (``payhooks_ordered_id``).
PAYMENTS_ID: Final = {"sqlite": "rowid", "postgresql": "id"}

#: The rows each source appended after an id, in id order: ``id, identifier, at, cause,
#: reference, pending`` (``pending``: 1 for an attempt still sending, which changes nothing
#: until it ends). ``{id}`` is the id column; ``{where}`` selects the rows.
CHANGES: Final = {
    "outcomes": (
        "SELECT id, external_identifier, recorded_at, 'delivery', CAST(delivery_id AS TEXT), 0 "
        "FROM outcomes AS t WHERE {where} ORDER BY id LIMIT ?"
    ),
    "payments": (
        "SELECT {id}, external_identifier, created_at, 'registration', external_identifier, 0 "
        "FROM payments AS t WHERE {where} ORDER BY {id} LIMIT ?"
    ),
    "creation_attempts": (
        "SELECT id, external_identifier, COALESCE(finished_at, started_at), 'creation', "
        "external_identifier, CASE WHEN state = 'sending' THEN 1 ELSE 0 END "
        "FROM creation_attempts AS t WHERE {where} ORDER BY id LIMIT ?"
    ),
}

#: Every time that places a payment in an hour: its registration, each outcome's ``paid_at``
#: (an unexpected row opens at one of them), each listed transaction's first sighting (where a
#: row only the service's list names opens). ``{marks}``: the identifiers' placeholders.
CHANGED_TIMES: Final = """
SELECT external_identifier, created_at FROM payments WHERE external_identifier IN ({marks})
UNION ALL SELECT external_identifier, paid_at FROM outcomes
WHERE external_identifier IN ({marks})
UNION ALL SELECT external_identifier, first_seen_at FROM service_transactions
WHERE external_identifier IN ({marks})"""

#: Every UTC hour (13 characters) holding a row finance reads: a registration, an unexpected
#: row's opening, a succeeded outcome's payment (each through its index, as the page does).
BUILD_HOURS: Final = """
SELECT DISTINCT substr(created_at, 1, 13) FROM payments
UNION SELECT DISTINCT substr(opened_at, 1, 13) FROM payment_states WHERE kind IS NULL
UNION SELECT DISTINCT substr(paid_at, 1, 13) FROM outcomes WHERE state = 'succeeded'"""

#: Stored hours in ``[?, ?)``; stored days in ``[?, ?]``.
SPAN: Final = "hour >= ? AND hour < ?"
DAYS: Final = "day >= ? AND day <= ?"


class Horizon(NamedTuple):
    """PostgreSQL's transaction horizon of a snapshot (SQLite commits ids in order)."""

    xmin: int
    xmax: int


HORIZON_SQL: Final = (
    "SELECT CAST(pg_snapshot_xmin(pg_current_snapshot()) AS TEXT), "
    "CAST(pg_snapshot_xmax(pg_current_snapshot()) AS TEXT)"
)


def opened_sums(bucket: str, conditions: list[str], *, by_day: bool = False) -> str:
    """``finance_hours_opened`` (``by_day``: ``finance_days_opened``) summed as
    :class:`~payhooks.storage.reads.finance_sql.Group` rows, by ``bucket`` (``hour``, ``day``
    or ``''``)."""
    where = " WHERE " + " AND ".join(conditions) if conditions else ""
    table = "finance_days_opened" if by_day else "finance_hours_opened"
    return f"""
SELECT {bucket}, currency, NULLIF(received_currency, ''), state, drifting, kind,
    CAST(SUM(count) AS BIGINT), CAST(SUM(expected) AS BIGINT), CAST(SUM(received) AS BIGINT),
    CAST(SUM(home_received) AS BIGINT), CAST(SUM(refunded) AS BIGINT),
    CAST(SUM(charged_back) AS BIGINT)
FROM {table}{where}
GROUP BY 1, 2, 3, 4, 5, 6"""  # noqa: S608 - constants only


def paid_sums(bucket: str | None, *, paid_only: bool = False, by_day: bool = False) -> str:
    """``finance_hours_paid`` in ``[?, ?)`` summed by currency (and ``bucket``, when given:
    :class:`~payhooks.storage.reads.finance_sql.PaidBucket` rows, else
    :class:`~payhooks.storage.reads.finance_sql.Paid`), of every state (received) or, with
    ``paid_only``, of the payments ``paid``; ``by_day``: ``finance_days_paid``, its days
    ``[?, ?]``."""
    state = " AND state = 'paid'" if paid_only else ""
    table, span = ("finance_days_paid", DAYS) if by_day else ("finance_hours_paid", SPAN)
    head, by = ("", "1") if bucket is None else (f"{bucket}, ", "1, 2")
    return f"""
SELECT {head}currency, CAST(SUM(count) AS BIGINT), CAST(SUM(amount_minor) AS BIGINT)
FROM {table} WHERE {span}{state}
GROUP BY {by}"""  # noqa: S608 - constants only
