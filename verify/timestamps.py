"""Time handling shared by the schemes: the tolerance check and the signers' timestamps.

Times are compared as unix seconds and only turned into aware datetimes for results and
errors. The clock is injected (a callable returning unix
seconds) so tests never depend on the wall clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, tzinfo

from payhooks.verify.errors import TimestampOutOfToleranceError

__all__ = [
    "DEFAULT_TOLERANCE_SECONDS",
    "Clock",
    "check_tolerance",
    "compact_time_readings",
    "parse_compact_time",
    "resolve_clock",
    "resolve_tolerance",
    "signing_time",
    "tolerance_error",
]

#: Returns the current time as unix seconds; ``time.time`` unless a test injects another.
Clock = Callable[[], float]

#: How far a delivery's time may be from now, either way, unless configured otherwise.
DEFAULT_TOLERANCE_SECONDS = 300


def resolve_clock(clock: Clock | None) -> Clock:
    """Return ``clock``, or the wall clock when None; refuse anything not callable."""
    if clock is None:
        return time.time
    if not callable(clock):
        raise ValueError("clock: must be a callable returning unix seconds")
    return clock


def resolve_tolerance(tolerance_seconds: float | None) -> float | None:
    """Validate the tolerance: a finite number of seconds >= 0, or None to skip the check.

    None exists for offline checks of deliveries captured long ago (``payhooks verify
    --ignore-timestamp``); a receiver always keeps a tolerance.
    """
    if tolerance_seconds is None:
        return None
    if isinstance(tolerance_seconds, bool) or not isinstance(tolerance_seconds, int | float):
        raise ValueError("tolerance_seconds: must be a number of seconds or None")
    if not math.isfinite(tolerance_seconds) or tolerance_seconds < 0:
        raise ValueError("tolerance_seconds: must be finite and not negative")
    return tolerance_seconds


def check_tolerance(
    seconds: float, *, now: float, tolerance_seconds: float | None, header: str
) -> None:
    """Raise :class:`TimestampOutOfToleranceError` when ``seconds`` is more than the
    tolerance from ``now`` (one reading of the verifier's clock).

    Exactly ``tolerance_seconds`` away still passes: only "more than" it is refused.
    """
    if tolerance_seconds is None or -tolerance_seconds <= now - seconds <= tolerance_seconds:
        return
    raise tolerance_error(seconds, now=now, tolerance_seconds=tolerance_seconds, header=header)


def tolerance_error(
    seconds: float, *, now: float, tolerance_seconds: float, header: str
) -> TimestampOutOfToleranceError:
    """The error for a time ``seconds`` that is out of tolerance at ``now``."""
    skew = now - seconds
    direction = "in the past" if skew > 0 else "in the future"
    return TimestampOutOfToleranceError(
        f"the {header} header is {abs(skew):.0f} s {direction}, "
        f"more than the {tolerance_seconds:g} s tolerance",
        header=header,
        timestamp=datetime.fromtimestamp(seconds, UTC),
        now=datetime.fromtimestamp(now, UTC),
        tolerance_seconds=tolerance_seconds,
    )


def signing_time(timestamp: float | datetime | None) -> int:
    """The unix second a signer puts in its headers: ``timestamp`` (seconds or an aware
    datetime, fractions dropped) or now when None. A naive datetime is refused: its zone
    would be a guess.
    """
    if timestamp is None:
        return int(time.time())
    if isinstance(timestamp, datetime):
        if timestamp.tzinfo is None or timestamp.utcoffset() is None:
            raise ValueError("timestamp: a datetime must be timezone-aware")
        return math.floor(timestamp.timestamp())
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        raise ValueError("timestamp: must be unix seconds or an aware datetime")
    if not math.isfinite(timestamp) or timestamp < 0:
        raise ValueError("timestamp: must be finite and not negative")
    return math.floor(timestamp)


def parse_compact_time(text: str | None, zone: tzinfo) -> datetime | None:
    """A ``YYYYMMDDHHMMSS`` time read in ``zone``, as aware UTC; None when it is not one.

    A local time that occurs twice (the repeated hour when clocks go back) gives its first
    reading; one that never occurs (skipped when clocks go forward) gives None. Callers that
    must weigh both readings use :func:`compact_time_readings`.
    """
    readings = compact_time_readings(text, zone)
    return readings[0] if readings else None


def compact_time_readings(text: str | None, zone: tzinfo) -> tuple[datetime, ...] | None:
    """Every instant (aware, UTC) a ``YYYYMMDDHHMMSS`` local time in ``zone`` can mean.

    One, usually; two in the hour that repeats when daylight saving ends (earlier first);
    none, ``()``, in the hour skipped when it starts. None when the text is not such a time.
    """
    if text is None or len(text) != 14 or not (text.isascii() and text.isdigit()):
        return None
    try:
        local = datetime(
            int(text[0:4]),
            int(text[4:6]),
            int(text[6:8]),
            int(text[8:10]),
            int(text[10:12]),
            int(text[12:14]),
            tzinfo=zone,
        )
        # A time at the edge of the calendar can fall outside it once moved to UTC
        # (year 1 at +08:00): that is no time either, not a crash.
        readings = sorted({local.replace(fold=fold).astimezone(UTC) for fold in (0, 1)})
        # A skipped local time reads as an instant whose local clock shows another time.
        naive = local.replace(tzinfo=None)
        return tuple(
            reading
            for reading in readings
            if reading.astimezone(zone).replace(tzinfo=None, fold=0) == naive
        )
    except (ValueError, OverflowError):
        return None
