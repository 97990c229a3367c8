"""Which zone a ``payment_time`` is in: the delivery's ``timezone`` header, else configuration.

What a zone is (an IANA name, or an offset such as ``+08:00`` or ``GMT+8``) is decided in one
place, :mod:`payhooks.verify.timezones`, because ``sorted-fields-rsa`` reads the same header to
check the delivery's ``timestamp``: the two must never date one delivery in two zones. This module
keeps its public names (:func:`zone_from_text`, :data:`MAX_OFFSET_HOURS`, :func:`delivery_zone`) and
adds the configured zone and the conversion to UTC.

The header arrives with the delivery and is not covered by every signature scheme, so a value
that names no zone is ignored rather than refused: the configured zone applies. A time that
falls in a daylight-saving gap or fold is read with ``fold=0``: the offset in force before the
transition, the same answer every time.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

from payhooks.verify import MAX_OFFSET_HOURS, zone_from_header, zone_from_text

__all__ = ["MAX_OFFSET_HOURS", "delivery_zone", "load_time_zone", "to_utc", "zone_from_text"]

_PROBE = datetime(2000, 1, 1)  # a naive instant to ask a tzinfo for its offset


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
    """The zone a delivery's ``timezone`` header names, or None to use the configured one
    (:func:`payhooks.verify.timezones.zone_from_header`, as the signature check reads it)."""
    return zone_from_header(header)


def to_utc(local: datetime, zone: tzinfo) -> datetime | None:
    """``local`` (naive) read in ``zone``, as UTC; None when that falls outside year 1..9999."""
    if local.fold:
        local = local.replace(fold=0)
    try:
        # combine() gives what replace(tzinfo=zone) would.
        return datetime.combine(local, local.time(), zone).astimezone(UTC)
    except OverflowError:
        return None
