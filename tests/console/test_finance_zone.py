"""The finance page in the merchant's zone (``PAYHOOKS_TIMEZONE``): its periods are the zone's
days, its chart's labels the zone's clock, a payment just after a local midnight is that day's,
and the export takes the same rows; an unknown zone fails where the app starts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from flask import Flask

from payhooks.console import Console
from payhooks.receiver import load_settings
from payhooks.receiver.config import config_from_env
from payhooks.storage import Ledger
from tests.console.conftest import VIEWER, Clock, header_role
from tests.support.app import AppFactory
from tests.support.factories import FixedClock

PAGE = "/console/reconciliation"


def zoned_console(make_app: AppFactory, clock: Clock, zone: str) -> Flask:
    app = make_app(PAYHOOKS_TIMEZONE=zone)
    Console(app, authorize=header_role, url_prefix="/console", clock=clock)
    return app


def at(clock: Clock, moment: datetime) -> None:
    clock.ahead = moment - datetime.now(UTC)


def day_totals(html: str) -> dict[str, tuple[str, str]]:
    """The chart's table: label -> (expected, received)."""
    rows = re.findall(
        r'<td data-label="Day">([^<]*)</td>\s*<td data-label="Currency">[^<]*</td>\s*'
        r'<td data-label="Expected">([^<]*)</td><td data-label="Received">([^<]*)</td>',
        html,
    )
    return {label.strip(): (expected, received) for label, expected, received in rows}


@pytest.mark.parametrize(
    ("zone", "local_midnight_utc"),
    [
        ("Asia/Kathmandu", datetime(2026, 11, 20, 18, 15, tzinfo=UTC)),  # +05:45
        ("Asia/Kolkata", datetime(2026, 11, 20, 18, 30, tzinfo=UTC)),  # +05:30
        ("America/St_Johns", datetime(2026, 11, 21, 3, 30, tzinfo=UTC)),  # -03:30
    ],
)
def test_the_page_s_days_start_at_the_zone_s_midnight(
    make_app: AppFactory,
    clock: Clock,
    database: Path | str,
    zone: str,
    local_midnight_utc: datetime,
) -> None:
    """One payment registered a microsecond before 2026-11-21 starts in the zone, one at its
    start: the day shows the second alone, and its label is the zone's date."""
    app = zoned_console(make_app, clock, zone)
    tick = timedelta(microseconds=1)
    registered_at = FixedClock()
    with Ledger(database, clock=registered_at) as ledger:
        for identifier, minor, moment in (
            ("before", 100, local_midnight_utc - tick),
            ("inside", 200, local_midnight_utc),
        ):
            registered_at.now = moment
            ledger.expect_transaction(identifier, minor, "EUR")
    at(clock, local_midnight_utc + timedelta(days=3))

    html = app.test_client().get(
        PAGE, query_string={"from": "2026-11-20", "until": "2026-11-22", "view": "table"},
        headers=VIEWER,
    ).get_data(as_text=True)  # fmt: skip

    assert day_totals(html) == {
        "2026-11-20": ("1.00", "0.00"),
        "2026-11-21": ("2.00", "0.00"),
    }
    assert f"days in <span data-zone>{zone}</span>" in html
    rows = re.findall(r'<tr data-identifier="([^"]*)"', html)
    assert sorted(rows) == ["before", "inside"]


def test_today_is_the_zone_s_today_and_a_dst_day_has_23_hourly_buckets(
    make_app: AppFactory, clock: Clock
) -> None:
    """At 23:30 UTC on 2026-03-28, Berlin is already at 00:30 on the 29th: its "today", the day
    the clocks go forward, has 23 hours."""
    app = zoned_console(make_app, clock, "Europe/Berlin")
    at(clock, datetime(2026, 3, 28, 23, 30, tzinfo=UTC))

    html = (
        app.test_client()
        .get(PAGE, query_string={"period": "today", "view": "table"}, headers=VIEWER)
        .get_data(as_text=True)
    )

    assert 'data-period="2026-03-29/2026-03-30"' in html
    assert "2026-03-29 00:00 UTC+01:00 to 2026-03-30 00:00 UTC+02:00" in html


def test_the_25_hour_day_s_repeated_hour_is_labelled_by_its_offset(
    make_app: AppFactory, clock: Clock, database: Path | str
) -> None:
    app = zoned_console(make_app, clock, "Europe/Berlin")
    registered_at = FixedClock()
    with Ledger(database, clock=registered_at) as ledger:
        for identifier, moment in (
            ("first", datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),
            ("second", datetime(2026, 10, 25, 1, 30, tzinfo=UTC)),
        ):
            registered_at.now = moment
            ledger.expect_transaction(identifier, 100, "EUR")
    at(clock, datetime(2026, 10, 25, 12, tzinfo=UTC))

    html = (
        app.test_client()
        .get(PAGE, query_string={"period": "today", "view": "table"}, headers=VIEWER)
        .get_data(as_text=True)
    )

    labels = re.findall(r'<td data-label="Hour">([^<]*)</td>', html)
    assert len(labels) == 25
    assert "2026-10-25 02:00 UTC+02:00" in labels
    assert "2026-10-25 02:00 UTC+01:00" in labels
    assert Decimal("1.00") == Decimal(day_or_zero(html, "2026-10-25 02:00 UTC+01:00"))


def day_or_zero(html: str, label: str) -> str:
    found = re.search(
        re.escape(label) + r'</td>\s*<td data-label="Currency">[^<]*</td>\s*'
        r'<td data-label="Expected">([^<]*)</td>',
        html,
    )
    return found.group(1) if found else "0"


@pytest.mark.parametrize("zone", ["Mars/Olympus", "+05:30", "", "../../etc/passwd"])
def test_an_unknown_zone_is_a_value_error_naming_the_key(zone: str) -> None:
    with pytest.raises(ValueError, match=r"^PAYHOOKS_TIMEZONE must be an IANA time zone name"):
        load_settings({"PAYHOOKS_TIMEZONE": zone}, require_keys=False)


def test_the_zone_is_read_from_the_environment_too() -> None:
    settings = load_settings(
        config_from_env({"PAYHOOKS_TIMEZONE": "America/New_York"}), require_keys=False
    )

    assert settings.timezone.key == "America/New_York"
    assert load_settings({}, require_keys=False).timezone.key == "UTC"


def test_a_revised_day_says_when_on_the_zone_s_clock(
    make_app: AppFactory, clock: Clock, database: Path | str
) -> None:
    """Kathmandu is at +05:45: when the day was revised is said on its clock (the ledger's
    real time, which the console's test clock does not move)."""
    app = zoned_console(make_app, clock, "Asia/Kathmandu")
    registered_at = FixedClock(datetime(2026, 11, 21, 6, tzinfo=UTC))
    at(clock, datetime(2026, 11, 24, 6, tzinfo=UTC))
    period = {"from": "2026-11-20", "until": "2026-11-23", "view": "table"}
    with Ledger(database, clock=registered_at) as ledger:
        ledger.expect_transaction("order-1", 100, "EUR")
        app.test_client().get(PAGE, query_string=period, headers=VIEWER)
        registered_at.now += timedelta(hours=1)  # registered late, on the ended day
        ledger.expect_transaction("order-2", 100, "EUR")

    html = app.test_client().get(PAGE, query_string=period, headers=VIEWER).get_data(as_text=True)

    [line] = re.findall(r'<li data-revised="2026-11-21">([^<]*)', html)
    assert re.match(r"2026-11-21: revised \d{4}-\d\d-\d\d \d\d:\d\d UTC\+05:45 by ", line), line
