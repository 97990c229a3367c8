"""Which zone a ``payment_time`` is in: the delivery's ``timezone`` header, else configuration.

A zone is an IANA name (``Asia/Shanghai``, ``UTC``, ``Etc/GMT-8``) or a fixed offset as Java
writes its custom zone ids and ISO 8601 writes offsets (``+08:00``, ``+0800``, ``GMT+8``,
``UTC+08:00``); offsets count east of Greenwich as positive, as those notations do. (The IANA
names ``Etc/GMT+8`` keep POSIX's inverted sign: that zone is eight hours *behind* UTC.)

The header arrives with the delivery and is not covered by every signature scheme, so a value
that names no zone is ignored rather than refused: the configured zone applies. A time that
falls in a daylight-saving gap or fold is read with ``fold=0``: the offset in force before the
transition, the same answer every time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

__all__ = ["MAX_OFFSET_HOURS", "delivery_zone", "load_time_zone", "to_utc", "zone_from_text"]

#: The widest fixed offset accepted, in hours (Java's ZoneOffset allows the same).
MAX_OFFSET_HOURS = 18
_OFFSET = re.compile(r"(?:GMT|UTC)?([+-])([0-9]{1,2})(?::?([0-9]{2}))?", re.ASCII)
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)*", re.ASCII)
_MAX_NAME_LENGTH = 64
_PROBE = datetime(2000, 1, 1)  # a naive instant to ask a tzinfo for its offset


def zone_from_text(text: str) -> tzinfo | None:
    """The zone ``text`` names, or None when it names none. Never raises."""
    offset = _OFFSET.fullmatch(text)
    if offset is not None:
        sign, hours, minutes = offset.group(1), int(offset.group(2)), int(offset.group(3) or 0)
        if hours > MAX_OFFSET_HOURS or minutes >= 60:
            return None
        delta = timedelta(hours=hours, minutes=minutes)
        return timezone(-delta if sign == "-" else delta) if delta else UTC
    if text == "Z":
        return UTC
    if len(text) > _MAX_NAME_LENGTH or _ZONE_NAME.fullmatch(text) is None:
        return None
    try:
        return ZoneInfo(text)
    except (KeyError, ValueError, OSError):
        # Not found (ZoneInfoNotFoundError is a KeyError), not a TZif file, or a directory.
        return None


def load_time_zone(value: str | tzinfo) -> tzinfo:
    """The configured zone (``PAYHOOKS_PAYMENT_TIME_ZONE``), from a name, an offset or a tzinfo.

    :raises ValueError: naming ``time_zone`` when ``value`` names no zone.
    """
    if isinstance(value, tzinfo):
        if value.utcoffset(_PROBE) is None:
            raise ValueError("time_zone: a tzinfo must give a UTC offset")
        return value
    zone = zone_from_text(value) if isinstance(value, str) else None
    if zone is None:
        raise ValueError(
            f"time_zone: {value!r} is not a time zone (an IANA name such as 'Asia/Shanghai', "
            "or an offset such as '+08:00')"
        )
    return zone


def delivery_zone(header: object) -> tzinfo | None:
    """The zone a delivery's ``timezone`` header names, or None to use the configured one."""
    if not isinstance(header, str) or not header:
        return None
    return zone_from_text(header.strip())


def to_utc(local: datetime, zone: tzinfo) -> datetime | None:
    """``local`` (naive) read in ``zone``, as UTC; None when that falls outside year 1..9999."""
    try:
        return local.replace(tzinfo=zone, fold=0).astimezone(UTC)
    except OverflowError:
        return None
