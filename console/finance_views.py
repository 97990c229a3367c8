"""The finance page: a period's tiles against the previous period, the chart, the rows; its
export of exactly the rows its filters select is an action (:mod:`.export_views`).

Every figure is per currency. The reads are :attr:`payhooks.storage.Ledger.finance`'s, each one
grouped in SQL over an index-backed range; the page reads one page of rows (by cursor), then
the tiles, the chart and the totals of the whole filtered set: over a long period of a large
ledger those stop at the console's time limit (:mod:`.limits`), and the page shows its rows
and says where it stopped counting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Final
from zoneinfo import ZoneInfo

from flask import render_template, request

from payhooks.console.access import console_ledger, current_access
from payhooks.console.chart import bucket_label, chart_series, draw_chart, utc_offset
from payhooks.console.finance_query import KINDS, PERIODS, parse_finance_query
from payhooks.console.limits import counted
from payhooks.console.query import BadQuery
from payhooks.storage import MISMATCH_STATES, ReconciliationState, StorageError, from_minor_units
from payhooks.storage.reads import Figure, FinanceFilter, bucket_size_for

if TYPE_CHECKING:
    from payhooks.storage.reads.finance_rows import PeriodFigures, PeriodOverview
    from payhooks.storage.reads.rollup import RevisedDay, Rollup

__all__ = [
    "PAID_TRANSACTIONS",
    "PAYMENTS",
    "REFRESH_BUDGET_S",
    "TILES",
    "Tile",
    "TileLine",
    "compare",
    "reconciliation",
]

#: What a tile counts, one and many: payments (rows, an unexpected payment's included), or
#: succeeded transactions, which for a subscription are its periods.
PAYMENTS: Final = ("payment", "payments")
PAID_TRANSACTIONS: Final = ("payment or period", "payments or periods")

#: The tiles, in order: the name of a
#: :class:`~payhooks.storage.reads.finance_rows.PeriodFigures` field, its heading, what its
#: amount is, and what its count counts.
TILES: Final = (
    ("expected", "Expected", "registered in the period", PAYMENTS),
    ("received", "Received", "paid in the period (a subscription: each period)", PAID_TRANSACTIONS),
    (
        "paid",
        "Paid",
        "paid in the period, matching what was expected",
        PAID_TRANSACTIONS,
    ),
    ("mismatches", "Mismatches", "opened in the period, the money they received", PAYMENTS),
    ("pending", "Pending", "registered in the period, expected", PAYMENTS),
    (
        "refunded",
        "Refunded",
        "opened in the period, refunded in part or whole; the amount refunded in full "
        "(a partial refund's amount is unknown)",
        PAYMENTS,
    ),
    ("charged_back", "Charged back", "opened in the period, the amount charged back", PAYMENTS),
    ("drift", "Drift", "opened in the period, the service's list disagrees", PAYMENTS),
)
_ZERO = Figure(0, 0, Decimal(0))
#: How long the page lets the rollup's refresh run before it reads (seconds).
REFRESH_BUDGET_S: Final = 0.05


@dataclass(frozen=True, slots=True)
class Tile:
    """One tile: its heading, what its amount is, what its count counts (one, many), and a
    line per currency."""

    heading: str
    meaning: str
    unit: tuple[str, str]
    lines: list[TileLine]

    def counted(self, count: int) -> str:
        """``count`` with what it counts: ``1 payment``, ``3 payments or periods``."""
        return f"{count} {self.unit[0] if count == 1 else self.unit[1]}"


@dataclass(frozen=True, slots=True)
class TileLine:
    """One currency's line of a tile: now, and the change against the previous period."""

    currency: str
    count: int
    amount: Decimal
    count_change: int
    amount_change: Decimal


def compare(now: Mapping[str, Figure], before: Mapping[str, Figure]) -> list[TileLine]:
    """One line per currency of either period, by currency."""
    lines = []
    for currency in sorted(set(now) | set(before)):
        current, previous = now.get(currency, _ZERO), before.get(currency, _ZERO)
        lines.append(
            TileLine(
                currency,
                current.count,
                current.amount,
                current.count - previous.count,
                current.amount - previous.amount,
            )
        )
    return lines


def _tiles(now: PeriodFigures, before: PeriodFigures) -> list[Tile]:
    return [
        Tile(heading, meaning, unit, compare(getattr(now, name), getattr(before, name)))
        for name, heading, meaning, unit in TILES
    ]


def reconciliation() -> str:
    """``GET /reconciliation``: the finance page."""
    access = current_access()
    now, zone = access.clock(), access.timezone
    query = parse_finance_query(request.args, now, zone)
    finance = console_ledger().finance
    size = bucket_size_for(query.since, query.until)
    wanted = query.finance_filter()
    opened = FinanceFilter(registered_since=query.since, registered_until=query.until)
    refreshed = _bring_up_to_date(finance.rollup)
    # The rows first (one page), then the figures, which stop at the time limit (:mod:`.limits`).
    try:
        page = finance.page(wanted, after=query.after, limit=query.limit)
    except ValueError:  # every other value was checked: the cursor is not one a page gave
        raise BadQuery(
            "after must be a cursor a page of rows gave; start from the first page."
        ) from None
    overview = counted(lambda: finance.overview(query.since, query.until, size, zone))
    # The rollup answers the rest too while changes wait (the page says "as of" the oldest
    # time any of its figures holds): reading every row of a period is what it exists to spare.
    previous = (
        None
        if overview is None
        else counted(lambda: finance.figures(*query.previous, as_of_ok=True))
    )
    series = (
        []
        if overview is None
        else chart_series(overview.buckets, query.since, query.until, size, now, zone)
    )
    if overview is None or wanted == opened:
        # The default view's rows are the period's: their totals came with the overview.
        totals = None if overview is None else overview.totals
    else:
        # Totals of days within the period hold at least as of the overview's "as of", when
        # it has one; else they are read current, as the page says.
        held = overview.as_of is not None and _within(wanted, query.since, query.until)
        totals = counted(lambda: finance.totals(wanted, as_of_ok=held))
    return render_template(
        "payhooks_console/finance.html",
        query=query,
        now=now,
        tiles=[] if overview is None or previous is None else _tiles(overview.figures, previous),
        previous=query.previous,
        size=size,
        series=series,
        charts=[draw_chart(one, size, index) for index, one in enumerate(series)],
        bucket_label=bucket_label,
        page=page,
        totals=totals,
        as_of=_oldest(overview, previous),
        refreshed=refreshed,
        revised=_revised(finance.rollup, query.since, query.until),
        periods=PERIODS,
        kinds=KINDS,
        states=list(ReconciliationState),
        mismatch_states=MISMATCH_STATES,
        age=_age,
        minor=from_minor_units,
        local=lambda moment: _local(moment, zone),
    )


def _within(wanted: FinanceFilter, since: datetime, until: datetime) -> bool:
    """Whether the filter's rows were all opened in ``[since, until)``."""
    low, high = wanted.registered_since, wanted.registered_until
    return low is not None and high is not None and since <= low and high <= until


def _oldest(overview: PeriodOverview | None, previous: PeriodFigures | None) -> datetime | None:
    """The time the page's figures hold: the older "as of" of its reads (None: current)."""
    found = [r.as_of for r in (overview, previous) if r is not None and r.as_of is not None]
    return min(found, default=None)


def _bring_up_to_date(rollup: Rollup) -> bool:
    """Fresh by default: the rollup's refresh before the page reads, for at most
    :data:`REFRESH_BUDGET_S` (a larger backlog is ``payhooks rollup``'s; the page then says
    "as of"), in the merchant's zone (the ledger pool set it: a rollup kept in another is
    built again). False when it could not run: a ledger the console cannot write (read-only)
    is read as it stands, and the page must not promise that a reload will count the rest."""
    try:
        rollup.refresh(budget=REFRESH_BUDGET_S)
    except StorageError:
        return False
    return True


def _revised(rollup: Rollup, since: datetime, until: datetime) -> dict[date, RevisedDay]:
    """The period's days revised after they ended, by local day."""
    last = until - timedelta(microseconds=1)
    try:
        found = rollup.revised(
            since.astimezone(rollup.zone).date(), last.astimezone(rollup.zone).date()
        )
    except StorageError:
        return {}
    return {day.day: day for day in found}


def _local(moment: datetime, zone: ZoneInfo) -> str:
    """``moment`` on the merchant's clock with its offset: ``2026-03-29 00:00 UTC+01:00``."""
    here = moment.astimezone(zone)
    return f"{here:%Y-%m-%d %H:%M} {utc_offset(here)}"


def _age(opened_at: datetime, now: datetime) -> str:
    """How long ago a row was opened: ``3d 4h``, ``5h 12m``, ``40m``."""
    seconds = max(int((now - opened_at).total_seconds()), 0)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    if days:
        return f"{days}d {hours}h"
    return f"{hours}h {rest // 60}m" if hours else f"{rest // 60}m"
