"""The one reading of a ``timezone`` header, shared by the signature check and the parser.

The service's SDK dates a delivery in local time (``timestamp``, and ``payment_time`` in the
body) and may name the zone in a ``timezone`` header. ``sorted-fields-rsa`` reads the header to
check the delivery's age and the receiver's parser reads it to date the payment: if the two
read it differently, one delivery could be checked in one zone and booked in another. Both call
:func:`zone_from_header`, so they cannot.

A zone is an IANA name (``Asia/Shanghai``, ``UTC``, ``Etc/GMT-8``) or a fixed offset as Java
writes its custom zone ids and ISO 8601 writes offsets (``+08:00``, ``+0800``, ``GMT+8``,
``UTC+08:00``, ``Z``); offsets count east of Greenwich as positive, as those notations do, up
to Java's limit of 18 hours. (The IANA names ``Etc/GMT+8`` keep POSIX's inverted sign: that
zone is eight hours *behind* UTC.) Names are case-sensitive, as Java's ``ZoneId`` and the zone
database are.

The header is not covered by every signature, so anything that names no zone gives None (the
caller then uses its configured zone) rather than an error, and a name is matched against a
strict pattern before the zone database sees it.
"""

from __future__ import annotations

import re
from datetime import UTC, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

__all__ = ["MAX_OFFSET_HOURS", "zone_from_header", "zone_from_text"]

#: The widest fixed offset accepted, in hours (Java's ``ZoneOffset`` allows the same).
MAX_OFFSET_HOURS = 18
_OFFSET = re.compile(r"(?:GMT|UTC)?([+-])([0-9]{1,2})(?::?([0-9]{2}))?", re.ASCII)
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)*", re.ASCII)
_MAX_NAME_LENGTH = 64


def zone_from_text(text: str) -> tzinfo | None:
    """The zone ``text`` names exactly, or None when it names none. Never raises."""
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


def zone_from_header(value: object) -> tzinfo | None:
    """The zone a ``timezone`` header names (surrounding spaces ignored), or None when it is
    absent or names none."""
    if not isinstance(value, str) or not value:
        return None
    return zone_from_text(value.strip())
