"""The parser's configuration: the payment time zone and the status map."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from payhooks.receiver.payloads import load_status_map, load_time_zone, parse_notification
from payhooks.storage import DEFAULT_STATUS_MAP, PaymentState


def body_at(payment_time: str) -> bytes:
    return json.dumps(
        {
            "ll_transaction_id": "ll_txn_1",
            "merchant_transaction_id": "order-1",
            "payment_data": {
                "payment_status": "PS",
                "payment_amount": "25.00",
                "payment_currency_code": "CNY",
                "payment_time": payment_time,
            },
        }
    ).encode()


def paid_at(payment_time: str = "20261121200000", **options: Any) -> datetime:
    return parse_notification(body_at(payment_time), **options).paid_at


# --- time zones ------------------------------------------------------------------


def test_payment_time_is_read_in_utc_by_default() -> None:
    assert paid_at() == datetime(2026, 11, 21, 20, 0, tzinfo=UTC)


def test_paid_at_is_always_utc() -> None:
    assert paid_at(time_zone="Asia/Shanghai").tzinfo is UTC


@pytest.mark.parametrize(
    "zone",
    [
        "Asia/Shanghai",
        "+08:00",
        "+0800",
        "+08",
        "+8",
        "GMT+8",
        "GMT+08:00",
        "UTC+08:00",
        "Etc/GMT-8",
        ZoneInfo("Asia/Shanghai"),
        timezone(timedelta(hours=8)),
    ],
)
def test_the_configured_zone_may_be_a_name_an_offset_or_a_tzinfo(zone: str | tzinfo) -> None:
    assert paid_at(time_zone=zone) == datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "hours"), [("-05:30", -5.5), ("Etc/GMT+8", -8), ("UTC", 0), ("Z", 0), ("+18:00", 18)]
)
def test_offsets_count_east_as_positive_and_etc_names_keep_posix_signs(
    zone: str, hours: float
) -> None:
    local = datetime(2026, 11, 21, 20, 0, tzinfo=UTC)
    assert paid_at(time_zone=zone) == local - timedelta(hours=hours)


@pytest.mark.parametrize(
    "zone", ["Mars/Olympus_Mons", "+19:00", "+08:60", "", "America", "../etc/passwd", "GMT+8x", 8]
)
def test_a_configured_zone_that_names_no_zone_is_a_value_error_naming_time_zone(
    zone: Any,
) -> None:
    with pytest.raises(ValueError, match="time_zone"):
        parse_notification(body_at("20261121200000"), time_zone=zone)
    with pytest.raises(ValueError, match="time_zone"):
        load_time_zone(zone)


def test_the_deliverys_zone_wins_over_the_configured_one() -> None:
    assert paid_at(time_zone="Europe/London", delivery_time_zone="Asia/Shanghai") == datetime(
        2026, 11, 21, 12, 0, tzinfo=UTC
    )


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Mars/Olympus_Mons",
        "+25:00",
        "not a zone",
        "x" * 500,
        "zone.tab",
        "\x00",
        "../UTC",
    ],
)
def test_a_delivery_zone_that_names_no_zone_is_ignored(header: str | None) -> None:
    assert paid_at(time_zone="Asia/Shanghai", delivery_time_zone=header) == datetime(
        2026, 11, 21, 12, 0, tzinfo=UTC
    )


def test_a_time_in_a_daylight_saving_gap_reads_with_the_earlier_offset() -> None:
    # 02:30 does not exist in New York on 2026-03-08; fold=0 reads it at -05:00.
    assert paid_at("20260308023000", time_zone="America/New_York") == datetime(
        2026, 3, 8, 7, 30, tzinfo=UTC
    )


def test_a_time_in_a_daylight_saving_fold_reads_as_the_first_occurrence() -> None:
    # 01:30 happens twice in New York on 2026-11-01; fold=0 is the first, at -04:00.
    assert paid_at("20261101013000", time_zone="America/New_York") == datetime(
        2026, 11, 1, 5, 30, tzinfo=UTC
    )


def test_load_time_zone_refuses_a_tzinfo_without_an_offset() -> None:
    class NoOffset(tzinfo):
        def utcoffset(self, dt: datetime | None) -> timedelta | None:
            return None

        def dst(self, dt: datetime | None) -> timedelta | None:
            return None

        def tzname(self, dt: datetime | None) -> str | None:
            return None

    with pytest.raises(ValueError, match="time_zone"):
        load_time_zone(NoOffset())


# --- status map ------------------------------------------------------------------


def test_load_status_map_accepts_states_and_their_names() -> None:
    loaded = load_status_map({"OK": "succeeded", "KO": PaymentState.FAILED})
    assert loaded == {"OK": PaymentState.SUCCEEDED, "KO": PaymentState.FAILED}
    assert all(type(state) is PaymentState for state in loaded.values())


def test_load_status_map_gives_a_read_only_copy() -> None:
    source = {"OK": "succeeded"}
    loaded = load_status_map(source)
    source["OK"] = "failed"
    assert loaded["OK"] is PaymentState.SUCCEEDED
    assert isinstance(loaded, MappingProxyType)


def test_the_default_map_loads_as_itself() -> None:
    assert load_status_map(DEFAULT_STATUS_MAP) is DEFAULT_STATUS_MAP
    assert load_status_map(dict(DEFAULT_STATUS_MAP)) == DEFAULT_STATUS_MAP


def body_with_status(code: str) -> bytes:
    body = json.loads(body_at("20261121200000"))
    body["payment_data"]["payment_status"] = code
    return json.dumps(body).encode()


def test_a_loaded_map_loads_again_as_itself() -> None:
    loaded = load_status_map({"OK": "succeeded"})
    assert load_status_map(loaded) is loaded
    assert parse_notification(body_with_status("OK"), status_map=loaded).state is (
        PaymentState.SUCCEEDED
    )


def test_a_loaded_map_keeps_its_meaning_after_many_others_were_loaded() -> None:
    first = load_status_map({"OK": "succeeded"})
    for number in range(50):
        load_status_map({f"C{number}": "failed"})
    assert load_status_map(first) == {"OK": PaymentState.SUCCEEDED}
    assert parse_notification(body_with_status("OK"), status_map=first).state is (
        PaymentState.SUCCEEDED
    )


def test_a_read_only_map_made_elsewhere_is_still_checked() -> None:
    source: dict[str, Any] = {"OK": PaymentState.SUCCEEDED}
    proxy = MappingProxyType(source)
    assert load_status_map(proxy) is not proxy
    source["OK"] = "paid"
    with pytest.raises(ValueError, match="'paid'"):
        parse_notification(body_with_status("OK"), status_map=proxy)


@pytest.mark.parametrize(
    ("mapping", "named"),
    [
        ({"OK": "paid"}, "'paid'"),
        ({"OK": "Succeeded"}, "'Succeeded'"),
        ({"OK": None}, "'OK'"),
        ({"": "succeeded"}, "''"),
        ({1: "succeeded"}, "1"),
        (["OK", "succeeded"], "mapping"),
        ("OK=succeeded", "mapping"),
    ],
)
def test_a_bad_status_map_is_a_value_error_naming_the_code_or_state(
    mapping: Any, named: str
) -> None:
    with pytest.raises(ValueError, match="status_map") as exc_info:
        load_status_map(mapping)
    assert named in str(exc_info.value)
    with pytest.raises(ValueError, match="status_map"):
        parse_notification(body_at("20261121200000"), status_map=mapping)
