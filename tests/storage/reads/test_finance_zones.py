"""Finance's days, hours and weeks in the merchant's zone (``PAYHOOKS_TIMEZONE``), on both
engines: offsets of 30 and 45 minutes, a negative half-hour, and the days of 23 and 25 hours
when the clocks change."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from payhooks.storage import Ledger
from payhooks.storage.reads import BucketSize, bucket_starts
from tests.storage.reads.test_finance import pay, register
from tests.support.factories import FixedClock

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
KATHMANDU = ZoneInfo("Asia/Kathmandu")  # +05:45
KOLKATA = ZoneInfo("Asia/Kolkata")  # +05:30
ST_JOHNS = ZoneInfo("America/St_Johns")  # -03:30 in winter
ZONES = (BERLIN, NEW_YORK, KATHMANDU, KOLKATA, ST_JOHNS, ZoneInfo("UTC"))


def midnight(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(), zone)


@pytest.mark.parametrize(
    ("zone", "day", "hours"),
    [
        (BERLIN, date(2026, 3, 29), 23),
        (BERLIN, date(2026, 10, 25), 25),
        (NEW_YORK, date(2026, 3, 8), 23),
        (NEW_YORK, date(2026, 11, 1), 25),
        (KATHMANDU, date(2026, 11, 21), 24),
        (ST_JOHNS, date(2026, 11, 21), 24),
    ],
)
def test_a_day_has_as_many_hourly_buckets_as_its_clock_shows(
    zone: ZoneInfo, day: date, hours: int
) -> None:
    since, until = midnight(day, zone), midnight(day + timedelta(days=1), zone)

    starts = bucket_starts(since, until, BucketSize.HOUR, zone)

    assert len(starts) == hours
    assert until.astimezone(UTC) - since.astimezone(UTC) == timedelta(hours=hours)
    assert all(start.minute == 0 and start.tzinfo is zone for start in starts)
    assert len({start.astimezone(UTC) for start in starts}) == hours


def test_hours_of_a_45_minute_zone_start_at_a_quarter_past_in_utc() -> None:
    day = date(2026, 11, 21)
    starts = bucket_starts(
        midnight(day, KATHMANDU), midnight(day, KATHMANDU) + timedelta(hours=3), BucketSize.HOUR,
        KATHMANDU,
    )  # fmt: skip

    assert [start.astimezone(UTC).strftime("%d %H:%M") for start in starts] == [
        "20 18:15",
        "20 19:15",
        "20 20:15",
    ]


@given(
    zone=st.sampled_from(ZONES),
    first=st.dates(min_value=date(2000, 1, 1), max_value=date(2040, 12, 1)),
    days=st.integers(min_value=1, max_value=120),
    size=st.sampled_from(list(BucketSize)),
)
def test_buckets_tile_the_period_each_starting_where_the_zone_s_clock_says(
    zone: ZoneInfo, first: date, days: int, size: BucketSize
) -> None:
    since, until = midnight(first, zone), midnight(first + timedelta(days=days), zone)

    starts = bucket_starts(since, until, size, zone)

    instants = [start.astimezone(UTC) for start in starts]
    assert instants[0] == since.astimezone(UTC)
    assert instants == sorted(set(instants))
    assert instants[-1] < until.astimezone(UTC)
    for start in starts[1:]:
        assert (start.minute, start.second) == (0, 0)
        if size is not BucketSize.HOUR:
            # Midnight, or the first hour of a day whose midnight the clocks skipped.
            assert start.astimezone(UTC) == midnight(start.date(), zone).astimezone(UTC)
        if size is BucketSize.WEEK:
            assert start.weekday() == 0


@pytest.mark.parametrize(
    ("zone", "day"),
    [
        (BERLIN, date(2026, 3, 29)),
        (BERLIN, date(2026, 10, 25)),
        (NEW_YORK, date(2026, 11, 1)),
        (KATHMANDU, date(2026, 11, 21)),
        (KOLKATA, date(2026, 11, 21)),
        (ST_JOHNS, date(2026, 11, 21)),
    ],
)
def test_the_chart_s_days_are_the_zone_s_days_to_the_microsecond(
    ledger: Ledger, clock: FixedClock, zone: ZoneInfo, day: date
) -> None:
    """Money paid one microsecond before a local midnight is the day before's; at midnight,
    the day's; the registrations (expected) likewise."""
    start = midnight(day, zone)
    end = midnight(day + timedelta(days=1), zone)
    before = start - timedelta(days=1)
    tick = timedelta(microseconds=1)
    cases = [
        ("a", 100, start.astimezone(UTC) - tick),  # the day before's last instant
        ("b", 200, start.astimezone(UTC)),  # the day's first
        ("c", 400, end.astimezone(UTC) - tick),  # the day's last
        ("d", 800, end.astimezone(UTC)),  # the next day's first
    ]
    for identifier, minor, at in cases:
        register(ledger, clock, identifier, minor, "EUR", at)
        pay(ledger, identifier, minor, "EUR", at)

    buckets = ledger.finance.buckets(before, end + timedelta(days=1), BucketSize.DAY, zone)

    found = {b.start.date(): (b.expected.amount_minor, b.received.amount_minor) for b in buckets}
    assert found == {
        before.date(): (100, 100),
        day: (600, 600),
        day + timedelta(days=1): (800, 800),
    }
    assert all(b.start.tzinfo is zone for b in buckets)


def test_the_hour_the_clocks_show_twice_is_two_buckets(ledger: Ledger, clock: FixedClock) -> None:
    """2026-10-25 in Berlin: 02:00 to 03:00 happens at UTC+02:00, then again at UTC+01:00."""
    first = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST
    second = datetime(2026, 10, 25, 1, 30, tzinfo=UTC)  # 02:30 CET
    for identifier, minor, at in (("first", 100, first), ("second", 200, second)):
        register(ledger, clock, identifier, minor, "EUR", at)
        pay(ledger, identifier, minor, "EUR", at)
    day = midnight(date(2026, 10, 25), BERLIN)

    buckets = ledger.finance.buckets(day, day + timedelta(days=1), BucketSize.HOUR, BERLIN)

    assert [(b.start.hour, b.start.utcoffset(), b.received.amount_minor) for b in buckets] == [
        (2, timedelta(hours=2), 100),
        (2, timedelta(hours=1), 200),
    ]


def test_an_overview_s_tiles_are_the_local_period_s(ledger: Ledger, clock: FixedClock) -> None:
    """Paid at 23:30 UTC on the 20th is the 21st in Kolkata: inside the local day."""
    at = datetime(2026, 11, 20, 23, 30, tzinfo=UTC)
    register(ledger, clock, "late", 500, "EUR", at)
    pay(ledger, "late", 500, "EUR", at)
    day = midnight(date(2026, 11, 21), KOLKATA)

    overview = ledger.finance.overview(day, day + timedelta(days=1), zone=KOLKATA)

    assert overview.figures.received["EUR"].amount_minor == 500
    assert overview.figures.expected["EUR"].count == 1
    assert [(b.start.hour, b.start.minute) for b in overview.buckets] == [(5, 0)]
