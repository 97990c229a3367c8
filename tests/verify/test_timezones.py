"""The one reading of a ``timezone`` header: what names a zone, and that the signature check
(``sorted-fields-rsa``'s ``timestamp``) and the parser (``payment_time``) agree on every value."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payhooks.receiver.payloads import parse_notification
from payhooks.receiver.payloads import zones as payload_zones
from payhooks.verify import Verifier, generate_keypair, get_signer, get_verifier
from payhooks.verify.timezones import MAX_OFFSET_HOURS, zone_from_header, zone_from_text


@pytest.mark.parametrize(
    ("name", "offset_hours"),
    [
        ("UTC", 0),
        ("GMT", 0),
        ("Z", 0),
        ("Asia/Shanghai", 8),
        ("Etc/GMT-8", 8),
        ("Etc/GMT+8", -8),
        ("America/New_York", -5),
        ("+08:00", 8),
        ("+0800", 8),
        ("+8", 8),
        ("GMT+8", 8),
        ("UTC+08:00", 8),
        ("GMT-05:30", -5.5),
        ("+18:00", 18),
        ("-18:00", -18),
        ("+00:00", 0),
    ],
)
def test_iana_names_and_offsets_name_their_zone(name: str, offset_hours: float) -> None:
    zone = zone_from_text(name)

    assert zone is not None
    assert datetime(2026, 1, 15, 12, tzinfo=zone).utcoffset() == timedelta(hours=offset_hours)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "gmt",  # names are case-sensitive, as Java's ZoneId and the zone database are
        "utc+8",
        "Mars/Base",
        "America",
        "../../etc/passwd",
        "zone.tab",
        "+19:00",
        "+08:60",
        "GMT+8x",
        " UTC",
        "x" * 200,
    ],
)
def test_what_names_no_zone_gives_none(name: str) -> None:
    assert zone_from_text(name) is None


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("", None),
        (8, None),
        ("  Asia/Shanghai\t", "Asia/Shanghai"),
        ("nowhere", None),
    ],
)
def test_a_header_is_read_without_its_surrounding_spaces(
    header: object, expected: str | None
) -> None:
    zone = zone_from_header(header)

    assert (None if zone is None else str(zone)) == expected


def test_the_payload_parser_keeps_its_names_and_uses_the_same_functions() -> None:
    assert payload_zones.zone_from_text is zone_from_text
    assert payload_zones.MAX_OFFSET_HOURS == MAX_OFFSET_HOURS == 18
    assert payload_zones.delivery_zone(" +08:00 ") == zone_from_header(" +08:00 ")


# -- the signature check and the parser agree --------------------------------------------------

LOCAL_TIME = "20261121120000"
BODY = json.dumps(
    {
        "ll_transaction_id": "ll-1",
        "merchant_transaction_id": "order-1",
        "payment_data": {
            "payment_status": "PS",
            "payment_amount": "25.00",
            "payment_currency_code": "CNY",
            "payment_time": LOCAL_TIME,
        },
    }
).encode()


@cache
def _rsa(configured_zone: str) -> tuple[Verifier, dict[str, str]]:
    """A verifier reading undated headers in ``configured_zone``, and signed headers for BODY
    (the signature covers neither ``timestamp`` nor ``timezone``)."""
    pair = generate_keypair("sorted-fields-rsa")
    verifier = get_verifier("sorted-fields-rsa", pair.verifying_key, time_zone=configured_zone)
    return verifier, get_signer("sorted-fields-rsa", pair.signing_key).sign(BODY)


zone_headers = st.one_of(
    st.sampled_from(
        [
            "UTC",
            "gmt",
            "utc+8",
            "Asia/Shanghai",
            "Etc/GMT+3",
            "+15:00",
            "+18:00",
            "-17:59",
            " +08:00 ",
            "Z",
            "z",
            "GMT+14",
            "Mars/Base",
            "",
        ]
    ),
    st.from_regex(r"(GMT|UTC|gmt|utc)?[+-][0-9]{1,2}(:?[0-9]{2})?", fullmatch=True),
    st.text(max_size=20),
)


@settings(max_examples=150, deadline=None)
@given(zone=zone_headers, configured=st.sampled_from(["UTC", "Asia/Shanghai", "-03:00"]))
def test_the_signature_check_and_the_parser_read_a_timezone_header_alike(
    zone: str, configured: str
) -> None:
    verifier, signed = _rsa(configured)
    headers = {**signed, "timestamp": LOCAL_TIME, "timezone": zone}

    checked = verifier.verify(headers, BODY).timestamp
    paid_at = parse_notification(BODY, time_zone=configured, delivery_time_zone=zone).paid_at

    assert checked is not None
    assert checked == paid_at
    assert checked.tzinfo is UTC
