"""The finance chart drawn on the server: every bucket of the period, the one holding now
marked "so far", SVG with only presentation attributes, its text escaped."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from payhooks.console.chart import bucket_label, chart_series, draw_chart
from payhooks.storage.reads import BucketSize, Figure, bucket_starts
from payhooks.storage.reads.finance_rows import ChartBucket, figure

SINCE = datetime(2026, 11, 19, tzinfo=UTC)  # a Thursday


def bucket(start: datetime, currency: str, expected: int, received: int) -> ChartBucket:
    return ChartBucket(
        start, currency, figure(1, expected, currency), figure(1, received, currency)
    )


@pytest.mark.parametrize(
    ("until", "size", "count", "last"),
    [
        (SINCE + timedelta(days=1), BucketSize.HOUR, 24, SINCE + timedelta(hours=23)),
        (SINCE + timedelta(days=7), BucketSize.DAY, 7, SINCE + timedelta(days=6)),
        (SINCE + timedelta(days=90), BucketSize.WEEK, 14, datetime(2027, 2, 15, tzinfo=UTC)),
    ],
)
def test_every_bucket_of_the_period_is_there_weeks_from_monday(
    until: datetime, size: BucketSize, count: int, last: datetime
) -> None:
    starts = bucket_starts(SINCE, until, size)

    assert len(starts) == count
    assert starts[0] == SINCE
    assert starts[-1] == last
    if size is BucketSize.WEEK:
        assert {start.weekday() for start in starts[1:]} == {0}


@pytest.mark.parametrize(
    ("since", "size", "last"),
    [
        (
            datetime(9999, 12, 30, tzinfo=UTC),
            BucketSize.HOUR,
            datetime(9999, 12, 30, 23, tzinfo=UTC),
        ),
        (datetime(9999, 11, 1, tzinfo=UTC), BucketSize.DAY, datetime(9999, 12, 30, tzinfo=UTC)),
        (datetime(9997, 1, 5, tzinfo=UTC), BucketSize.WEEK, datetime(9999, 12, 27, tzinfo=UTC)),
    ],
)
def test_a_period_ending_on_the_calendar_s_last_day_has_its_buckets_without_overflow(
    since: datetime, size: BucketSize, last: datetime
) -> None:
    """The last bucket of a period up to 9999-12-31 would end after it: it is cut short."""
    starts = bucket_starts(since, datetime(9999, 12, 31, tzinfo=UTC), size)

    assert starts[0] == since
    assert starts[-1] == last


def test_the_bucket_holding_now_is_so_far_and_empty_buckets_are_zero_in_decimals() -> None:
    until = SINCE + timedelta(days=3)
    now = SINCE + timedelta(days=1, hours=5)
    found = [bucket(SINCE, "CNY", 2500, 2000), bucket(SINCE, "JPY", 500, 0)]

    series = chart_series(found, SINCE, until, BucketSize.DAY, now, ZoneInfo("UTC"))

    assert [one.currency for one in series] == ["CNY", "JPY"]
    cny = series[0]
    assert [point.so_far for point in cny.points] == [False, True, False]
    assert [str(point.received) for point in cny.points] == ["20.00", "0.00", "0.00"]
    assert cny.expected == Decimal("25.00")


def test_the_svg_is_an_image_with_a_title_and_only_presentation_attributes() -> None:
    now = SINCE + timedelta(hours=2)
    odd = ChartBucket(SINCE, "<b>", Figure(1, 100, Decimal("1.00")), Figure(1, 50, Decimal("0.50")))
    series = chart_series(
        [odd], SINCE, SINCE + timedelta(days=1), BucketSize.HOUR, now, ZoneInfo("UTC")
    )[0]

    svg = str(draw_chart(series, BucketSize.HOUR, 3))

    assert svg.startswith("<svg ")
    assert 'role="img"' in svg
    assert 'aria-labelledby="chart-3-title chart-3-desc"' in svg
    assert "style" not in svg
    assert "<b>" not in svg
    assert "&lt;b&gt;" in svg
    assert svg.count("<rect ") == 48
    assert "so far" in svg
    assert re.search(r'<rect [^>]*stroke-dasharray="3 2"><title>2026-11-19 02:00 \(so far\)', svg)


@pytest.mark.parametrize(
    ("size", "label"),
    [
        (BucketSize.HOUR, "2026-11-19 00:00"),
        (BucketSize.DAY, "2026-11-19"),
        (BucketSize.WEEK, "week of 2026-11-19"),
    ],
)
def test_bucket_labels_name_their_width(size: BucketSize, label: str) -> None:
    assert bucket_label(SINCE, size) == label
