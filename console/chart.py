"""The finance page's chart: received against expected per bucket, one small chart per
currency (amounts are never drawn on one scale across currencies), drawn on the server as SVG.

Why SVG from the server rather than a chart library: the page runs no script (the console's
policy allows none, so a library could not run at all without loosening it), the few kilobytes
of markup replace a library of tens to hundreds (docs/console.md has the figures), and the
chart is accessible as markup: ``role="img"`` with a title and a description, a ``<title>`` per
bar, and the same series as an HTML table (``view=table``). Only presentation attributes, never
a ``style`` attribute: the policy is ``style-src 'self'``.

Coordinates are whole tenths of a pixel computed in integers: the amounts they come from are
money, and never go through a float.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Final
from zoneinfo import ZoneInfo

from markupsafe import Markup, escape

from payhooks.console.filters import visible
from payhooks.storage import from_minor_units
from payhooks.storage.reads import BucketSize, bucket_starts

if TYPE_CHECKING:
    from payhooks.storage.reads.finance_rows import ChartBucket

__all__ = ["Point", "Series", "bucket_label", "chart_series", "draw_chart", "utc_offset"]

_WIDTH: Final = 720
_HEIGHT: Final = 220
_LEFT: Final = 80
_RIGHT: Final = 8
_TOP: Final = 16
_BOTTOM: Final = 28
_EXPECTED_FILL: Final = "#afb8c1"
_RECEIVED_FILL: Final = "#0969da"


@dataclass(frozen=True, slots=True)
class Point:
    """One bucket of one currency; ``so_far`` when now falls inside it (still filling)."""

    start: datetime
    expected: Decimal
    received: Decimal
    so_far: bool


@dataclass(frozen=True, slots=True)
class Series:
    """One currency's buckets, every bucket of the period, oldest first."""

    currency: str
    points: tuple[Point, ...]

    @property
    def expected(self) -> Decimal:
        return sum((point.expected for point in self.points), Decimal(0))

    @property
    def received(self) -> Decimal:
        return sum((point.received for point in self.points), Decimal(0))


def utc_offset(moment: datetime) -> str:
    """An aware time's offset as the page writes it: ``UTC+05:45``, ``UTC-03:30``."""
    offset = moment.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(offset) // timedelta(minutes=1)
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def bucket_label(start: datetime, size: BucketSize) -> str:
    """How a bucket is named on the page, in the zone ``start`` is in: ``2026-11-21 14:00``,
    ``2026-11-21``, or ``week of 2026-11-16``. An hour the clocks show twice (the night they go
    back) carries its offset: ``2026-10-25 02:00 UTC+02:00``, then ``UTC+01:00``."""
    if size is BucketSize.HOUR:
        label = start.strftime("%Y-%m-%d %H:00")
        other = start.replace(fold=1 - start.fold)
        if other.utcoffset() != start.utcoffset():
            label += f" {utc_offset(start)}"
        return label
    day = start.strftime("%Y-%m-%d")
    return day if size is BucketSize.DAY else f"week of {day}"


def chart_series(
    buckets: Iterable[ChartBucket],
    since: datetime,
    until: datetime,
    size: BucketSize,
    now: datetime,
    zone: ZoneInfo,
) -> list[Series]:
    """One :class:`Series` per currency present, every bucket of the period in ``zone`` in it
    (zero where nothing was expected or received), the bucket holding ``now`` marked
    ``so_far``."""
    starts = bucket_starts(since, until, size, zone)
    # Keyed in UTC: two starts in one zone compare (and hash) by their wall clocks, which the
    # hour the clocks show twice shares.
    found: dict[str, dict[datetime, ChartBucket]] = {}
    for one in buckets:
        found.setdefault(one.currency, {})[one.start.astimezone(UTC)] = one
    series = []
    for currency in sorted(found):
        zero = from_minor_units(0, currency)  # 0.00, in the currency's decimals
        points = []
        for index, start in enumerate(starts):
            end = starts[index + 1] if index + 1 < len(starts) else until
            bucket = found[currency].get(start.astimezone(UTC))
            points.append(
                Point(
                    start,
                    zero if bucket is None else bucket.expected.amount,
                    zero if bucket is None else bucket.received.amount,
                    start <= now < end,
                )
            )
        series.append(Series(currency, tuple(points)))
    return series


def _tenths(value: int) -> str:
    """Tenths of a pixel as SVG writes them (``1234`` is ``123.4``)."""
    return f"{value // 10}.{value % 10}"


def _units(amount: Decimal) -> int:
    """An amount as a whole number of ten-thousandths: exact for every currency's decimals,
    so bar heights are integer arithmetic."""
    return int(amount.scaleb(4))


def draw_chart(series: Series, size: BucketSize, index: int) -> Markup:
    """``series`` as one SVG element, ``index`` making its ids unique on the page.

    Pixel positions are integers in tenths of a pixel: a bar's height is its amount over the
    peak, both whole numbers of the same unit, times the plot's height.
    """
    currency = escape(visible(series.currency))
    points = series.points
    peak = max((max(p.expected, p.received) for p in points), default=Decimal(0))
    peak_units = _units(peak)
    plot_height = (_HEIGHT - _TOP - _BOTTOM) * 10
    slot = (_WIDTH - _LEFT - _RIGHT) * 10 // max(len(points), 1)
    bar = slot * 4 // 10
    base = _TOP + (_HEIGHT - _TOP - _BOTTOM)
    title_id, desc_id = f"chart-{index}-title", f"chart-{index}-desc"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {_WIDTH} {_HEIGHT}"'
        f' width="100%" role="img" aria-labelledby="{title_id} {desc_id}">',
        f'<title id="{title_id}">Received against expected, {currency}, by {size.value}</title>',
        f'<desc id="{desc_id}">{len(points)} buckets; expected {series.expected} {currency}, '
        f"received {series.received} {currency} in all.</desc>",
        f'<line x1="{_LEFT}" y1="{base}" x2="{_WIDTH - _RIGHT}" y2="{base}" stroke="#57606a"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_WIDTH - _RIGHT}" y2="{_TOP}" stroke="#d0d7de"'
        ' stroke-dasharray="4 3"/>',
        f'<text x="{_LEFT - 6}" y="{_TOP + 4}" text-anchor="end" font-size="11"'
        f' fill="#57606a">{peak} {currency}</text>',
        f'<text x="{_LEFT - 6}" y="{base}" text-anchor="end" font-size="11"'
        f' fill="#57606a">0</text>',
    ]
    width = _tenths(bar)
    for number, point in enumerate(points):
        left = _LEFT * 10 + slot * number + slot // 10
        label = escape(bucket_label(point.start, size))
        so_far = " (so far)" if point.so_far else ""
        for offset, amount, fill, name in (
            (0, point.expected, _EXPECTED_FILL, "expected"),
            (bar, point.received, _RECEIVED_FILL, "received"),
        ):
            height = _units(amount) * plot_height // peak_units if peak_units else 0
            extra = ""
            if point.so_far:
                extra = f' fill-opacity="0.45" stroke="{fill}" stroke-dasharray="3 2"'
            parts.append(
                f'<rect x="{_tenths(left + offset)}" y="{_tenths(base * 10 - height)}"'
                f' width="{width}" height="{_tenths(height)}" fill="{fill}"{extra}>'
                f"<title>{label}{so_far}: {name} {amount} {currency}</title></rect>"
            )
        if point.so_far:
            parts.append(
                f'<text x="{_tenths(left + bar)}" y="{_TOP - 4}" text-anchor="middle"'
                ' font-size="11" fill="#57606a">so far</text>'
            )
    for number in sorted({0, len(points) - 1} - {-1}):
        anchor = "start" if number == 0 else "end"
        x = _LEFT if number == 0 else _WIDTH - _RIGHT
        parts.append(
            f'<text x="{x}" y="{_HEIGHT - 8}" text-anchor="{anchor}" font-size="11"'
            f' fill="#57606a">{escape(bucket_label(points[number].start, size))}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every interpolated text is escaped above
