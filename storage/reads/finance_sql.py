"""The SQL of finance's aggregations, one text both engines run (``?`` placeholders; every
text column compares bytewise on both, ``COLLATE "C"`` on PostgreSQL).

Every range is served by an index, so a period costs what it holds, not what the ledger holds:

- rows *opened* in a period: the payments registered in it (``payments_created``), joined to
  their stored row by primary key, and the unexpected rows opened in it (few: read through
  the partial index ``payment_states_unexpected``; ``payment_states_order`` cannot serve them
  once the planner has statistics, which say its first column, ``kind IS NULL``, holds half
  of a ledger's rows per value, and a scan of every payment per page followed);
- money *paid* in a period: the succeeded outcomes by ``paid_at`` (``outcomes_paid``, partial
  on ``state = 'succeeded'`` and holding the currency, amount and state, so the sum never reads the
  table).

Times are stored as UTC ISO 8601 text, so the hour of a time is its first 13 characters and
its day its first 10: buckets are grouped on a prefix, the same on both engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from payhooks.storage.reads.finance_rows import UNEXPECTED_KIND, FinanceFilter
from payhooks.storage.records import MISMATCH_STATES
from payhooks.storage.times import to_text
from payhooks.storage.views import RECONCILIATION_COLUMNS

__all__ = [
    "PAID_BUCKETS_SQL",
    "PAID_SQL",
    "RECEIVED_BUCKETS_SQL",
    "RECEIVED_SQL",
    "Group",
    "Paid",
    "PaidBucket",
    "filtered_groups",
    "filtered_rows",
    "next_prefix",
    "opened_groups",
    "page_rows",
]

_COLUMNS: Final = ", ".join(f"r.{column}" for column in RECONCILIATION_COLUMNS)
_SUCCEEDED: Final = "o.state = 'succeeded'"
# Spelled as ``payment_states_unexpected``'s condition, so that both engines read the unexpected
# rows through that partial index rather than scanning the table.
_UNEXPECTED: Final = "r.kind IS NULL"


class Paid(NamedTuple):
    """A row of :data:`RECEIVED_SQL` and :data:`PAID_SQL`."""

    currency: str
    transactions: int
    amount_minor: int


class PaidBucket(NamedTuple):
    """A row of :data:`RECEIVED_BUCKETS_SQL`: :class:`Paid` in the bucket ``prefix`` names."""

    prefix: str
    currency: str
    transactions: int
    amount_minor: int


class Group(NamedTuple):
    """A row of :func:`opened_groups` and :func:`filtered_groups`: the rows alike in the first
    six columns (``drifts``: 0 or 1; ``kind``: ``''`` for rows nobody registered), counted,
    their money summed. The finance rollup stores them by hour (its ``finance_hours_opened``)."""

    bucket: str
    currency: str
    received_currency: str | None
    state: str
    drifts: int
    kind: str
    rows: int
    expected: int
    received: int
    home_received: int
    refunded: int
    charged_back: int

    @property
    def registered(self) -> bool:
        """Whether somebody registered these rows (they have an expected amount)."""
        return bool(self.kind)

    @property
    def money_in(self) -> str:
        """The currency their money arrived in."""
        return self.received_currency or self.currency


#: Succeeded transactions paid in ``[?, ?)``, per currency (:class:`Paid`; the sums of
#: :data:`RECEIVED_BUCKETS_SQL`'s buckets; a period without a chart reads this).
RECEIVED_SQL: Final = f"""
SELECT o.currency, COUNT(*), CAST(SUM(o.amount_minor) AS BIGINT)
FROM outcomes AS o
WHERE {_SUCCEEDED} AND o.paid_at >= ? AND o.paid_at < ?
GROUP BY o.currency"""  # noqa: S608 - constants only

#: Of those, the ones whose payment's row is ``paid``.
PAID_SQL: Final = f"""
SELECT o.currency, COUNT(*), CAST(SUM(o.amount_minor) AS BIGINT)
FROM outcomes AS o
JOIN payment_states AS s ON s.external_identifier = o.external_identifier
WHERE {_SUCCEEDED} AND o.paid_at >= ? AND o.paid_at < ? AND s.state = 'paid'
GROUP BY o.currency"""  # noqa: S608 - constants only

#: Received money per bucket (the first ``?`` characters of ``paid_at``), currency and the
#: state of the payment's row: the finance rollup's ``finance_hours_paid``, whose sums over
#: every state are :data:`RECEIVED_SQL`'s and over ``paid`` :data:`PAID_SQL`'s.
PAID_BUCKETS_SQL: Final = f"""
SELECT substr(o.paid_at, 1, ?) AS bucket, o.currency, COALESCE(s.state, ''), COUNT(*),
    CAST(SUM(o.amount_minor) AS BIGINT)
FROM outcomes AS o
LEFT JOIN payment_states AS s ON s.external_identifier = o.external_identifier
WHERE {_SUCCEEDED} AND o.paid_at >= ? AND o.paid_at < ?
GROUP BY 1, 2, 3"""  # noqa: S608 - constants only

#: Received money per bucket (the first ``?`` characters of ``paid_at``) and currency
#: (:class:`PaidBucket`).
RECEIVED_BUCKETS_SQL: Final = f"""
SELECT substr(o.paid_at, 1, ?) AS bucket, o.currency, COUNT(*),
    CAST(SUM(o.amount_minor) AS BIGINT)
FROM outcomes AS o
WHERE {_SUCCEEDED} AND o.paid_at >= ? AND o.paid_at < ?
GROUP BY 1, 2"""  # noqa: S608 - constants only


def next_prefix(prefix: str) -> str | None:
    """The smallest text above every text that starts with ``prefix`` (byte order, which is
    code point order in UTF-8): ``prefix`` with its last character raised by one. None when
    nothing is above (every character is the last code point)."""
    while prefix:
        last = ord(prefix[-1]) + 1
        if last == 0xD800:  # surrogates are no text: the next code point is U+E000
            last = 0xE000
        if last <= 0x10FFFF:
            return prefix[:-1] + chr(last)
        prefix = prefix[:-1]
    return None


def _range(column: str, since: Any, until: Any, params: list[Any]) -> list[str]:
    found = []
    if since is not None:
        found.append(f"{column} >= ?")
        params.append(to_text(since, argument="since"))
    if until is not None:
        found.append(f"{column} < ?")
        params.append(to_text(until, argument="until"))
    return found


def _keyset(key: str, identifier: str, after: tuple[str, str], params: list[Any]) -> list[str]:
    """Rows before ``after`` (an opened time and an identifier) in newest-first order: the
    first condition bounds the index's range, the second breaks ties."""
    params.extend((after[0], after[0], after[1]))
    return [f"{key} <= ?", f"({key} < ? OR {identifier} < ?)"]


def _row_conditions(wanted: FinanceFilter, after: str | None, params: list[Any]) -> list[str]:
    """The conditions on ``r`` (the reconciliation view) every part shares."""
    conditions: list[str] = []
    if wanted.states:
        conditions.append(f"r.state IN ({', '.join('?' for _ in wanted.states)})")
        params.extend(sorted(state.value for state in wanted.states))
    if wanted.needs_person:
        names = ", ".join(f"'{state.value}'" for state in sorted(MISMATCH_STATES))
        conditions.append(f"(r.state IN ({names}) OR r.drift IS NOT NULL)")
    if wanted.currency is not None:
        conditions.append("r.currency = ?")
        params.append(wanted.currency)
    if wanted.kind is not None and wanted.kind != UNEXPECTED_KIND:
        conditions.append("r.kind = ?")
        params.append(wanted.kind)
    if wanted.paid_since is not None or wanted.paid_until is not None:
        paid = _range("o.paid_at", wanted.paid_since, wanted.paid_until, params)
        conditions.append(
            "r.external_identifier IN (SELECT o.external_identifier FROM outcomes AS o "  # noqa: S608 - constants only
            f"WHERE {_SUCCEEDED} AND {' AND '.join(paid)})"
        )
    amount = "COALESCE(r.expected_amount_minor, r.received_amount_minor)"
    if wanted.amount_min_minor is not None:
        conditions.append(f"{amount} >= ?")
        params.append(wanted.amount_min_minor)
    if wanted.amount_max_minor is not None:
        conditions.append(f"{amount} <= ?")
        params.append(wanted.amount_max_minor)
    if wanted.identifier_prefix:
        conditions.append("r.external_identifier >= ?")
        params.append(wanted.identifier_prefix)
        above = next_prefix(wanted.identifier_prefix)
        if above is not None:
            conditions.append("r.external_identifier < ?")
            params.append(above)
    if after is not None:
        conditions.append("r.external_identifier > ?")
        params.append(after)
    return conditions


def _parts(
    wanted: FinanceFilter, after: str | None, *, keyset: tuple[str, str] | None = None
) -> tuple[list[str], list[Any]]:
    """The SELECTs (of the view's columns, as ``r``) whose UNION ALL is the filtered set.

    With a registration range, two: the payments registered in it, found through
    ``payments.created_at``, and the unexpected rows opened in it. Without one, the view
    itself. ``keyset`` (a page of :func:`page_rows`) takes the two parts whatever the range,
    each led by its opened time (the column its index orders by) and taking the rows opened
    before that cursor.
    """
    kind = wanted.kind
    params: list[Any] = []
    paged = keyset is not None
    if not paged and wanted.registered_since is None and wanted.registered_until is None:
        conditions = _row_conditions(wanted, after, params)
        if kind == UNEXPECTED_KIND:
            conditions.insert(0, _UNEXPECTED)
        where = " WHERE " + " AND ".join(conditions) if conditions else ""
        return [f"SELECT {_COLUMNS} FROM reconciliation AS r{where}"], params  # noqa: S608
    parts: list[str] = []
    since, until = wanted.registered_since, wanted.registered_until
    if kind != UNEXPECTED_KIND:
        conditions = _range("p.created_at", since, until, params)
        conditions += _row_conditions(wanted, after, params)
        if keyset is not None and keyset != _FIRST:
            conditions += _keyset("p.created_at", "p.external_identifier", keyset, params)
        lead = "p.created_at, " if paged else ""
        parts.append(
            f"SELECT {lead}{_COLUMNS} FROM payments AS p JOIN reconciliation AS r "  # noqa: S608
            "ON r.external_identifier = p.external_identifier"
            + (" WHERE " + " AND ".join(conditions) if conditions else "")
        )
    if kind is None or kind == UNEXPECTED_KIND:
        conditions = [_UNEXPECTED, *_range("r.opened_at", since, until, params)]
        conditions += _row_conditions(wanted, after, params)
        if keyset is not None and keyset != _FIRST:
            conditions += _keyset("r.opened_at", "r.external_identifier", keyset, params)
        lead = "r.opened_at, " if paged else ""
        parts.append(
            f"SELECT {lead}{_COLUMNS} FROM reconciliation AS r WHERE "  # noqa: S608
            + " AND ".join(conditions)
        )
    return parts, params


#: :func:`page_rows`' cursor of the first page: no row is skipped.
_FIRST: Final = ("", "")


def page_rows(
    wanted: FinanceFilter, after: tuple[str, str] | None, limit: int
) -> tuple[str, Sequence[Any]]:
    """At most ``limit`` filtered rows, newest opened first (then by identifier, descending),
    opened before ``after`` (the stored opened time and the identifier of the last row of the
    previous page); each row led by its opened time.

    Keyset pagination: each part reads its own index backwards (``payments_created``, whose
    entries end with the identifier on SQLite; ``payment_states_unexpected``) and stops after
    ``limit`` rows, so a page of a 90-day period reads about ``limit`` rows rather than
    sorting the period's every row.
    """
    parts, params = _parts(wanted, None, keyset=after or _FIRST)
    # The limit is written out (an int, checked by the caller): each part has its own.
    order = f" ORDER BY 1 DESC, 2 DESC LIMIT {int(limit)}"
    limited = [
        f"SELECT * FROM ({part}{order}) AS part{index}"  # noqa: S608 - constants and an int
        for index, part in enumerate(parts)
    ]
    return " UNION ALL ".join(limited) + order, params


def filtered_rows(
    wanted: FinanceFilter, *, after: str | None = None, limit: int | None = None
) -> tuple[str, Sequence[Any]]:
    """The filtered rows by identifier, after ``after``, at most ``limit`` of them."""
    parts, params = _parts(wanted, after)
    sql = " UNION ALL ".join(parts) + " ORDER BY 1"  # the identifier, in every part
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return sql, params


def filtered_groups(wanted: FinanceFilter) -> tuple[str, Sequence[Any]]:
    """The filtered set's money grouped by currency and received currency (:class:`Group` s;
    the bucket is ``''``)."""
    parts, params = _parts(wanted, None)
    return _grouped(" UNION ALL ".join(parts)), params


def opened_groups(since: Any, until: Any, width: int = 0) -> tuple[str, Sequence[Any]]:
    """The rows opened in ``[since, until)`` as :class:`Group` s, bucketed by the first
    ``width`` characters of when each was opened (none: ``''``).

    One read gives a period's row tiles, its chart's expected bars and its unfiltered totals.
    """
    parts, params = _parts(FinanceFilter(registered_since=since, registered_until=until), None)
    return _grouped(" UNION ALL ".join(parts), "substr(f.opened_at, 1, ?)"), [width, *params]


def _grouped(rows_sql: str, bucket: str = "''") -> str:
    """Grouped by position (``GROUP BY 1, ...``): PostgreSQL takes a bucket's ``?`` as the
    same expression only there."""
    return f"""
SELECT {bucket}, f.currency, f.received_currency, f.state,
    CASE WHEN f.drift IS NULL THEN 0 ELSE 1 END, COALESCE(f.kind, ''),
    COUNT(*), CAST(SUM(COALESCE(f.expected_amount_minor, 0)) AS BIGINT),
    CAST(SUM(COALESCE(f.received_amount_minor, 0)) AS BIGINT),
    CAST(SUM(f.home_received_amount_minor) AS BIGINT),
    CAST(SUM(f.refunded_amount_minor) AS BIGINT),
    CAST(SUM(f.charged_back_amount_minor) AS BIGINT)
FROM ({rows_sql}) AS f
GROUP BY 1, 2, 3, 4, 5, 6"""  # noqa: S608 - constants only
