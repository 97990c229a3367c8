"""Finance's questions of the ledger, grouped in SQL: ``Ledger.finance``.

A period's tiles, a chart's buckets, a filtered set of rows in pages, its totals and its CSV
stream. The SQL is :mod:`payhooks.storage.reads.finance_sql`; here its few grouped rows are folded
into figures per currency (never added across currencies) and checked arguments are turned
into its parameters.

Days, hours and weeks are the merchant's (a :class:`~zoneinfo.ZoneInfo` the caller passes,
``PAYHOOKS_TIMEZONE``, read once by the receiver's settings): a chart's buckets are ranges
between instants :func:`~payhooks.storage.reads.local_hours.bucket_starts` computes in that
zone. The rollup kept in that zone answers them from its hours or days; without it, each is
read through the same index-served range as a whole period (one query per bucket, in one read),
so a zone with a 30- or 45-minute offset or a day of 23 or 25 hours costs what UTC costs.

Two clocks select: money *paid* in a period (``received``, ``paid``, the chart's received
bars) by the ``paid_at`` of succeeded outcomes, which is what "what was paid yesterday" means;
everything about payments as rows (expected, pending, mismatches, refunds, drift) by when the
row was *opened*: a payment's registration, an unexpected payment's first ``paid_at``.
"""

from __future__ import annotations

import base64
import binascii
import json
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import date, datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import payhooks.storage.reads.finance_sql as finance_sql
from payhooks.storage.currencies import from_minor_units
from payhooks.storage.engines import Engine
from payhooks.storage.reads.finance_rows import (
    UNEXPECTED_KIND,
    BucketSize,
    ChartBucket,
    Figure,
    FilteredTotal,
    FinanceFilter,
    FinancePage,
    PeriodFigures,
    PeriodOverview,
    figure,
)
from payhooks.storage.reads.finance_sql import Group, Paid, PaidBucket
from payhooks.storage.reads.local_hours import bucket_starts, day_bounds
from payhooks.storage.reads.rollup import Rollup
from payhooks.storage.reads.rollup_reads import RollupPeriod, read_period, read_totals
from payhooks.storage.reconciliation import to_row
from payhooks.storage.records import MISMATCH_STATES, ReconciliationState
from payhooks.storage.rows import PaymentKind, ReconciliationRow
from payhooks.storage.times import Clock, to_text

__all__ = ["MAX_PAGE", "FinanceBook", "bucket_size_for"]

#: The most rows one page holds.
MAX_PAGE = 500
#: Up to this long a period is charted by the hour; up to :data:`_DAYS_UP_TO` by the day.
_HOURS_UP_TO = timedelta(days=1)
_DAYS_UP_TO = timedelta(days=62)
_UTC_ZONE = ZoneInfo("UTC")
_KINDS = frozenset({*(kind.value for kind in PaymentKind), UNEXPECTED_KIND})
_R = ReconciliationState
_REFUNDED = frozenset({_R.REFUNDED, _R.PARTIALLY_REFUNDED})
_Row = TypeVar("_Row", Group, Paid, PaidBucket)


def bucket_size_for(since: datetime, until: datetime) -> BucketSize:
    """By the hour for a day or less, by the day up to about two months, by the week beyond.

    Two times in one zone subtract as wall clocks: a day of 25 hours is one day.
    """
    span = until - since
    if span <= _HOURS_UP_TO:
        return BucketSize.HOUR
    return BucketSize.DAY if span <= _DAYS_UP_TO else BucketSize.WEEK


def _check_period(since: datetime, until: datetime) -> None:
    to_text(since, argument="since")
    to_text(until, argument="until")
    if until <= since:
        raise ValueError("until must be after since")


def check_filter(wanted: FinanceFilter) -> None:
    """:raises ValueError: naming the field that cannot be used."""
    if wanted.kind is not None and wanted.kind not in _KINDS:
        raise ValueError(f"kind must be one of {', '.join(sorted(_KINDS))}")
    if (wanted.amount_min_minor, wanted.amount_max_minor) != (None, None) and not wanted.currency:
        raise ValueError("an amount range needs a currency: amounts are never compared across")
    prefix = wanted.identifier_prefix
    if prefix is not None and (len(prefix) > 64 or "\x00" in prefix):
        raise ValueError("identifier_prefix must be at most 64 characters, without NUL")
    for name in ("registered_since", "registered_until", "paid_since", "paid_until"):
        moment = getattr(wanted, name)
        if moment is not None:
            to_text(moment, argument=name)


class _Money:
    """Counts and minor units per currency, folded from grouped rows."""

    def __init__(self) -> None:
        self.counts: defaultdict[str, int] = defaultdict(int)
        self.amounts: defaultdict[str, int] = defaultdict(int)

    def add(self, currency: str, count: int, amount: int) -> None:
        self.counts[currency] += count
        self.amounts[currency] += amount

    def figures(self) -> dict[str, Figure]:
        keys = sorted(set(self.counts) | set(self.amounts))
        return {c: figure(self.counts[c], self.amounts[c], c) for c in keys}


class FinanceBook:
    """Finance's aggregations: :meth:`figures`, :meth:`buckets`, :meth:`page`,
    :meth:`totals`, :meth:`rows`. Reads only.

    :param engine: the ledger's engine (its reads and its streams).
    """

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._read: Callable[[], AbstractContextManager[Any]] = engine.read
        self._engine = engine
        #: The period totals kept by local hour (:mod:`payhooks.storage.reads.rollup`): the
        #: figures below read them where they can, and their rows otherwise.
        self.rollup = Rollup(engine, clock)

    def figures(self, since: datetime, until: datetime, *, as_of_ok: bool = False) -> PeriodFigures:
        """The tiles of ``[since, until)``
        (:class:`~payhooks.storage.reads.finance_rows.PeriodFigures` says which time selects each).

        :param as_of_ok: the rollup may answer while changes still wait (``as_of`` says the
            time its figures hold), rather than every row of the period being read.
        :raises ValueError: a naive time, or ``until`` not after ``since``.
        """
        _check_period(since, until)
        span = (to_text(since), to_text(until))
        sql, params = finance_sql.opened_groups(since, until)
        with self._read() as conn:
            kept = read_period(
                self.rollup, conn, since, until, "''", with_paid=True, current_only=not as_of_ok
            )
            if kept is not None:
                return _figures(since, until, kept.groups, kept.by_bucket, kept.paid, kept.as_of)
            received = _read(conn, Paid, finance_sql.RECEIVED_SQL, span)
            paid = _read(conn, Paid, finance_sql.PAID_SQL, span)
            groups = _read(conn, Group, sql, params)
        return _figures(since, until, groups, received, paid)

    def overview(
        self,
        since: datetime,
        until: datetime,
        size: BucketSize | None = None,
        zone: ZoneInfo = _UTC_ZONE,
    ) -> PeriodOverview:
        """What the finance page shows of ``[since, until)`` above its rows: the tiles, the
        chart's buckets (see :meth:`buckets`) and the totals of every row opened in the
        period, from three reads rather than one per part (each of which would read every
        row of the period again).

        :raises ValueError: a naive time, or ``until`` not after ``since``.
        """
        size = size or bucket_size_for(since, until)
        starts = bucket_starts(since, until, size, zone)
        groups, by_bucket, paid, as_of = self._period(
            since, until, size, starts, zone, with_paid=True, current_only=False
        )
        return PeriodOverview(
            figures=_figures(since, until, groups, by_bucket, paid, as_of),
            buckets=_buckets(groups, by_bucket, starts),
            totals=_totals(groups),
            as_of=as_of,
        )

    def buckets(
        self,
        since: datetime,
        until: datetime,
        size: BucketSize | None = None,
        zone: ZoneInfo = _UTC_ZONE,
    ) -> list[ChartBucket]:
        """Expected (by registration) and received (by paid time) totals of ``[since, until)``
        per bucket and currency, oldest first; a bucket without either is left out. Buckets
        are :func:`bucket_starts`' in ``zone`` (a week starts on Monday there, the first one
        at ``since``), and each bucket's ``start`` is in ``zone``.

        :param size: the buckets' width; by default :func:`bucket_size_for` the period.
        """
        size = size or bucket_size_for(since, until)
        starts = bucket_starts(since, until, size, zone)
        groups, by_bucket, _paid, _as_of = self._period(
            since, until, size, starts, zone, with_paid=False, current_only=True
        )
        return _buckets(groups, by_bucket, starts)

    def _period(
        self,
        since: datetime,
        until: datetime,
        size: BucketSize,
        starts: list[datetime],
        zone: ZoneInfo,
        *,
        with_paid: bool,
        current_only: bool,
    ) -> RollupPeriod:
        """The rows opened in the period and the money paid in it, by bucket (each bucket's
        ``bucket`` the stored text of its start), and (``with_paid``) the part of that money
        whose payment is ``paid``: from the rollup when it is kept in ``zone`` and can answer
        (``current_only``: with current figures; its hours or days then fall into the
        buckets), else one index-served range per bucket, in one read."""
        _check_period(since, until)
        groups: list[Group] = []
        by_bucket: list[PaidBucket] = []
        with self._read() as conn:
            if zone.key == self.rollup.zone.key:
                kept = read_period(
                    self.rollup,
                    conn,
                    since,
                    until,
                    "hour" if size is BucketSize.HOUR else "day",
                    with_paid=with_paid,
                    current_only=current_only,
                )
                if kept is not None:
                    return _into_buckets(kept, starts, zone)
            for low, high in pairwise([*starts, until]):
                key = to_text(low)
                sql, params = finance_sql.opened_groups(low, high)
                groups += [g._replace(bucket=key) for g in _read(conn, Group, sql, params)]
                span = (key, to_text(high))
                found = _read(conn, PaidBucket, finance_sql.RECEIVED_BUCKETS_SQL, (0, *span))
                by_bucket += [b._replace(prefix=key) for b in found]
            span = (to_text(since), to_text(until))
            paid = _read(conn, Paid, finance_sql.PAID_SQL, span) if with_paid else []
        return RollupPeriod(groups, by_bucket, paid, None)

    def page(
        self, wanted: FinanceFilter, *, after: str | None = None, limit: int = 50
    ) -> FinancePage:
        """Up to ``limit`` filtered rows, newest opened first, those after ``after`` (the
        opaque cursor the previous page gave): rows that arrive meanwhile never shift a page.
        Each part of the set is read backwards along its index from the cursor
        (:func:`~payhooks.storage.reads.finance_sql.page_rows`), so a page costs about
        ``limit`` rows however long the period.

        :raises ValueError: a filter field that cannot be used, a ``limit`` outside 1 to
            :data:`MAX_PAGE`, an ``after`` that is not a cursor a page gave.
        """
        check_filter(wanted)
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be from 1 to {MAX_PAGE}")
        sql, params = finance_sql.page_rows(wanted, _cursor_key(after), limit + 1)
        with self._read() as conn:
            found = list(conn.execute(sql, params))
        more = len(found) > limit
        found = found[:limit]
        rows = [to_row(values[1:]) for values in found]
        return FinancePage(rows, _cursor(found[-1][0], found[-1][1]) if more else None)

    def totals(self, wanted: FinanceFilter, *, as_of_ok: bool = False) -> list[FilteredTotal]:
        """Per currency, over the whole filtered set (not one page): rows, expected and
        received; money that arrived in another currency counts in that currency.

        :param as_of_ok: the rollup may answer while changes still wait (the caller says so).
        """
        check_filter(wanted)
        sql, params = finance_sql.filtered_groups(wanted)
        with self._read() as conn:
            groups = read_totals(self.rollup, conn, wanted, as_of_ok=as_of_ok)
            if groups is None:
                groups = _read(conn, Group, sql, params)
        return _totals(groups)

    def rows(
        self, wanted: FinanceFilter, *, connection_apart: bool = False
    ) -> Iterator[ReconciliationRow]:
        """Every filtered row by identifier, streamed from a cursor (memory stays flat).

        :param connection_apart: read on a connection of the stream's own, for a read that may
            take minutes (an export of every row): on PostgreSQL one opened for it and closed
            at its end, never one of the process's pool, which the receiver needs; on SQLite
            the ledger's own, as always.
        """
        check_filter(wanted)
        sql, params = finance_sql.filtered_rows(wanted)
        stream = self._engine.stream_apart if connection_apart else self._engine.stream
        return stream(lambda conn: conn.execute(sql, params), to_row)


def _read(conn: Any, row: type[_Row], sql: str, params: Sequence[Any]) -> list[_Row]:
    """The few grouped rows of one query, each named by its columns."""
    return [row._make(values) for values in conn.execute(sql, params)]


def _figures(
    since: datetime,
    until: datetime,
    groups: Iterable[Group],
    received: Iterable[Paid | PaidBucket],
    paid: Iterable[Paid],
    as_of: datetime | None = None,
) -> PeriodFigures:
    """Folds a period's grouped rows and the money paid in it (buckets added up) into tiles."""
    tiles = {name: _Money() for name in ("expected", "mismatches", "pending", "refunded")}
    tiles |= {"charged_back": _Money(), "drift": _Money()}
    for g in groups:
        state, currency, count = _R(g.state), g.currency, g.rows
        money_in = g.money_in
        if g.registered:
            tiles["expected"].add(currency, count, g.expected)
        if state in MISMATCH_STATES:
            tiles["mismatches"].add(currency, count, 0)
            tiles["mismatches"].add(money_in, 0, g.received)
            if money_in != currency:
                tiles["mismatches"].add(currency, 0, g.home_received)
        if state is _R.PENDING:
            tiles["pending"].add(currency, count, g.expected)
        if state in _REFUNDED or g.refunded:
            tiles["refunded"].add(currency, count if state in _REFUNDED else 0, 0)
            tiles["refunded"].add(money_in, 0, g.refunded)
        if state is _R.CHARGED_BACK or g.charged_back:
            tiles["charged_back"].add(currency, count if state is _R.CHARGED_BACK else 0, 0)
            tiles["charged_back"].add(money_in, 0, g.charged_back)
        if g.drifts:
            tiles["drift"].add(currency, count, g.expected)
    return PeriodFigures(
        since=since,
        until=until,
        received=_by_currency(received),
        paid=_by_currency(paid),
        **{name: money.figures() for name, money in tiles.items()},
        as_of=as_of,
    )


def _by_currency(paid: Iterable[Paid | PaidBucket]) -> dict[str, Figure]:
    """Money paid per currency, summed over any buckets."""
    money = _Money()
    for row in paid:
        money.add(row.currency, row.transactions, row.amount_minor)
    return money.figures()


def _buckets(
    groups: Iterable[Group], received: Iterable[PaidBucket], starts: Sequence[datetime]
) -> list[ChartBucket]:
    """The registered rows' expected money (from the grouped rows opened in the period) and
    the money received, per bucket (named by the stored text of its start) and currency."""
    start_of = {to_text(start): start for start in starts}
    expected = [
        PaidBucket(g.bucket, g.currency, g.rows, g.expected) for g in groups if g.registered
    ]
    # Keyed by the stored text (UTC): two starts in one zone compare by their wall clocks,
    # which the hour the clocks show twice shares.
    cells: dict[tuple[str, str], list[int]] = {}
    for offset, found in ((0, expected), (2, received)):
        for bucket in found:
            cell = cells.setdefault((bucket.prefix, bucket.currency), [0, 0, 0, 0])
            cell[offset] += bucket.transactions
            cell[offset + 1] += bucket.amount_minor
    return [
        ChartBucket(start_of[key], currency, figure(e_n, e_a, currency), figure(r_n, r_a, currency))
        for (key, currency), (e_n, e_a, r_n, r_a) in sorted(cells.items())
    ]


def _totals(groups: Iterable[Group]) -> list[FilteredTotal]:
    """Per currency: rows and expected money where registered, received money (and what of it
    was refunded or charged back) in the currency it arrived in."""
    count: defaultdict[str, int] = defaultdict(int)
    unknown: defaultdict[str, int] = defaultdict(int)
    money = {name: defaultdict[str, int](int) for name in ("e", "r", "refunded", "back")}
    for g in groups:
        currency = g.currency
        money_in = g.money_in
        count[currency] += g.rows
        if g.state == _R.PARTIALLY_REFUNDED:
            unknown[currency] += g.rows
        money["e"][currency] += g.expected
        money["r"][money_in] += g.received
        money["refunded"][money_in] += g.refunded
        money["back"][money_in] += g.charged_back
        if money_in != currency:
            money["r"][currency] += g.home_received

    def major(name: str, currency: str) -> Decimal:
        return from_minor_units(money[name][currency], currency)

    return [
        FilteredTotal(
            c,
            count[c],
            major("e", c),
            major("r", c),
            refunded=major("refunded", c),
            charged_back=major("back", c),
            refunds_unknown=unknown[c],
        )
        for c in sorted(set(count) | set(money["r"]))
    ]


def _into_buckets(kept: RollupPeriod, starts: list[datetime], zone: ZoneInfo) -> RollupPeriod:
    """The rollup's rows by hour (the stored text of its start) or by local day, each named by
    the stored text of the bucket of ``starts`` it falls in."""
    keys = [to_text(start) for start in starts]

    def key(found: str) -> str:
        day = len(found) == len("2026-11-21")
        moment = to_text(day_bounds(date.fromisoformat(found), zone)[0]) if day else found
        return keys[max(bisect_right(keys, moment) - 1, 0)]

    groups = [g._replace(bucket=key(g.bucket)) for g in kept.groups]
    by_bucket = [b._replace(prefix=key(b.prefix)) for b in kept.by_bucket]
    return kept._replace(groups=groups, by_bucket=by_bucket)


def _cursor(opened_at: str, identifier: str) -> str:
    """The opaque cursor of the row opened at ``opened_at`` (stored text) with ``identifier``:
    URL-safe, and never an identifier a person might edit into another one."""
    return base64.urlsafe_b64encode(json.dumps([opened_at, identifier]).encode()).decode()


def _cursor_key(after: str | None) -> tuple[str, str] | None:
    """:raises ValueError: ``after`` is not a cursor :func:`_cursor` made."""
    if after is None:
        return None
    try:
        opened_at, identifier = json.loads(base64.urlsafe_b64decode(after.encode("ascii")))
        if not isinstance(opened_at, str) or not isinstance(identifier, str):
            raise TypeError(after)
        if to_text(datetime.fromisoformat(opened_at)) != opened_at:
            raise ValueError(opened_at)
        if not 1 <= len(identifier) <= 64 or "\x00" in identifier:
            raise ValueError(identifier)
    except (ValueError, TypeError, UnicodeError, binascii.Error) as err:
        raise ValueError("after is not a cursor a page of rows gave") from err
    return opened_at, identifier
