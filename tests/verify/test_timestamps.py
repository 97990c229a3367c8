"""Time helpers: compact times, tolerance, signers' timestamps (zones: test_verify_timezones)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from payhooks.verify import TimestampOutOfToleranceError
from payhooks.verify.timestamps import check_tolerance, parse_compact_time, signing_time


def test_compact_time_is_read_in_the_zone_and_returned_in_utc() -> None:
    zone = timezone(timedelta(hours=8))
    assert parse_compact_time("20261118190640", zone) == datetime(
        2026, 11, 18, 11, 6, 40, tzinfo=UTC
    )


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "2026111819064",
        "202611181906400",
        "20261318190640",
        "2026111819064x",
        "".join(chr(0xFF10 + int(digit)) for digit in "20261118190640"),
    ],
)
def test_what_is_not_a_compact_time_gives_none(text: str | None) -> None:
    assert parse_compact_time(text, UTC) is None


@pytest.mark.parametrize(("text", "hours"), [("00010101000000", 8), ("99991231235959", -8)])
def test_a_compact_time_that_leaves_the_calendar_in_utc_gives_none(text: str, hours: int) -> None:
    assert parse_compact_time(text, timezone(timedelta(hours=hours))) is None


@pytest.mark.parametrize(
    ("seconds", "passes"), [(700, True), (1300, True), (699, False), (1301, False)]
)
def test_tolerance_includes_its_bounds(seconds: int, passes: bool) -> None:
    if passes:
        check_tolerance(seconds, now=1000, tolerance_seconds=300, header="h")
    else:
        with pytest.raises(TimestampOutOfToleranceError):
            check_tolerance(seconds, now=1000, tolerance_seconds=300, header="h")


def test_no_tolerance_accepts_any_time() -> None:
    check_tolerance(0, now=10**10, tolerance_seconds=None, header="h")


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        (1795000000, 1795000000),
        (1795000000.9, 1795000000),
        (datetime(2026, 11, 18, 19, 6, 40, tzinfo=timezone(timedelta(hours=8))), 1795000000),
    ],
)
def test_signing_time_accepts_seconds_and_aware_datetimes(timestamp: Any, expected: int) -> None:
    assert signing_time(timestamp) == expected


def test_signing_time_defaults_to_now() -> None:
    before = int(datetime.now(UTC).timestamp())
    assert before <= signing_time(None) <= before + 2
