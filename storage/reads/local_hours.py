"""The merchant's hours and days as the finance rollup keys them, in any IANA zone.

A local hour is keyed by the UTC instant it starts at, as :func:`~payhooks.storage.times.to_text`
writes it, and carries its local date: so a day, a week or a year is a range of keys (or of
dates) in SQL, whatever the zone. Offsets of 30 or 45 minutes and the days of 23 or 25 hours
around a DST change come out right because nothing here assumes an hour starts on a UTC hour or
a day lasts 24 of them: a local day is the hours whose date is that day. Every offset in use
since 1970 is a whole number of minutes, which is what :func:`hour_of` relies on.

The finance chart's buckets (:func:`bucket_starts`) are these hours and days too, so the rollup's
rows fall into them exactly: one notion of the merchant's hours and days for both.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache

from payhooks.storage.reads.finance_rows import BucketSize
from payhooks.storage.times import to_text

__all__ = [
    "bucket_starts",
    "day_bounds",
    "days_between",
    "hour_end",
    "hour_of",
    "hours_between",
    "is_hour_start",
    "local_day",
]

_MINUTE = timedelta(minutes=1)


@lru_cache(maxsize=65536)
def hour_of(minute: str, zone: tzinfo) -> tuple[str, str]:
    """The local hour a stored time's minute (its first 16 characters, ``2026-11-21T12:07``)
    falls in: the hour's key (the UTC instant it starts) and its local date."""
    utc = datetime.fromisoformat(minute + ":00+00:00")
    local = utc.astimezone(zone)
    return to_text(utc - timedelta(minutes=local.minute)), local.date().isoformat()


def local_day(moment: str | datetime, zone: tzinfo) -> date:
    """The local date of a stored time (text) or an aware datetime."""
    found = datetime.fromisoformat(moment) if isinstance(moment, str) else moment
    return found.astimezone(zone).date()


@lru_cache(maxsize=4096)
def _day_start(day: date, zone: tzinfo) -> datetime:
    """The first instant whose local date is ``day`` (its midnight, or the end of a gap that
    swallowed midnight); the earliest time there is for the calendar's first day."""
    try:
        guess = datetime.combine(day, time(), tzinfo=zone).astimezone(UTC)
        moment = guess - timedelta(hours=3)
        while moment.astimezone(zone).date() < day:
            moment += _MINUTE
    except OverflowError:  # the calendar's first day, or the day after its last
        return (datetime.min if day.year == 1 else datetime.max).replace(tzinfo=UTC)
    return moment


def day_bounds(day: date, zone: tzinfo) -> tuple[datetime, datetime]:
    """``[start, end)`` of a local day, in UTC (the calendar's last day ends at the latest
    time there is)."""
    try:
        end = _day_start(day + timedelta(days=1), zone)
    except OverflowError:
        end = datetime.max.replace(tzinfo=UTC)
    return _day_start(day, zone), end


def hour_end(start: datetime, zone: tzinfo) -> datetime:
    """Where the local hour starting at ``start`` ends: where the next one starts (the latest
    time there is after the calendar's last hour)."""
    try:
        return _next_start(start.astimezone(UTC), BucketSize.HOUR, zone)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)


def hours_between(first: str, last: str, zone: tzinfo) -> list[tuple[str, str]]:
    """Every local hour from the one holding the stored time ``first`` to the one holding
    ``last``, as :func:`hour_of` gives them: its key and its local date (so a 23- or 25-hour
    day has 23 or 25, and a UTC hour in a zone 45 minutes off has two)."""
    start = datetime.fromisoformat(hour_of(first[:16], zone)[0])
    end = datetime.fromisoformat(hour_of(last[:16], zone)[0]) + timedelta(microseconds=1)
    return [
        (to_text(moment), moment.date().isoformat())
        for moment in bucket_starts(start, end, BucketSize.HOUR, zone)
    ]


def days_between(first: date, last: date) -> list[date]:
    """Every date from ``first`` to ``last``, both included."""
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def is_hour_start(moment: datetime, zone: tzinfo) -> bool:
    """Whether ``moment`` is where one of the zone's local hours starts."""
    local = moment.astimezone(zone)
    return (local.minute, local.second, local.microsecond) == (0, 0, 0)


def bucket_starts(
    since: datetime, until: datetime, size: BucketSize, zone: tzinfo = UTC
) -> list[datetime]:
    """Every bucket's start in ``[since, until)``, in ``zone``: its hours (where its clock
    shows a whole hour: an offset of 45 minutes starts them at a quarter past in UTC, a 25-hour
    day has 25), its days (midnight to midnight: 23 or 25 hours when the clocks change) or
    weeks from Monday (the first from ``since``).

    A step is taken only when it lands before ``until``, so a period that ends at the last
    day a datetime holds (9999-12-31) never computes the start of a bucket after it.
    """
    end = until.astimezone(UTC)
    starts: list[datetime] = []
    moment = since.astimezone(UTC)
    while moment < end:
        starts.append(moment.astimezone(zone))
        try:
            moment = _next_start(moment, size, zone)
        except OverflowError:  # past year 9999: past ``until`` too
            break
    return starts


def _next_start(moment: datetime, size: BucketSize, zone: tzinfo) -> datetime:
    """Where the bucket after the one starting at ``moment`` (UTC) starts, in UTC."""
    local = moment.astimezone(zone)
    if size is BucketSize.HOUR:
        later = moment + timedelta(hours=1)
        into = later.astimezone(zone)
        snapped = later - timedelta(minutes=into.minute, seconds=into.second)
        return snapped if snapped > moment else later
    days = 1 if size is BucketSize.DAY else 7 - local.weekday()
    return _day_start(local.date() + timedelta(days=days), zone)
