"""``payhooks rollup``: brings finance's period totals up to date and says what it did;
``--verify --days N`` recomputes the last days from the rows and prints every bucket stored
otherwise (exit 1), or none (exit 0)."""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from payhooks.storage import Ledger
from tests.support.cli import clean_env, notification, record_notification, run

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "payhooks.db"
    with Ledger(path) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        record_notification(ledger, notification())
    return path


def test_rollup_brings_the_totals_up_to_date_and_says_what_it_did(shop: Path) -> None:
    first = run(["rollup", "--database", str(shop)])
    assert first.exit_code == 0, first.output
    # the hours of the registration and of the payment's time, each computed once
    assert re.match(
        r"Marked (\d+) hour\(s\), computed \1 \(0 day\(s\) revised after they ended\)",
        first.stdout,
    )
    assert first.stdout.rstrip().endswith("; 0 left.")
    again = run(["rollup", "--database", str(shop)])
    assert again.stdout.startswith("Marked 0 hour(s), computed 0 ")
    with Ledger(shop) as ledger:
        assert ledger.vitals().rollup_lag.total_seconds() == 0


def test_verify_finds_nothing_when_the_totals_hold(shop: Path) -> None:
    result = run(["rollup", "--database", str(shop), "--verify", "--days", "3"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "Verified 3 day(s) in UTC: 0 bucket(s) differ."


def test_verify_prints_each_bucket_stored_otherwise_and_exits_1(shop: Path) -> None:
    assert run(["rollup", "--database", str(shop)]).exit_code == 0
    with sqlite3.connect(shop) as conn:  # a bucket changed behind the rollup's back
        conn.execute("UPDATE finance_hours_paid SET amount_minor = amount_minor + 1")
    result = run(["rollup", "--database", str(shop), "--verify", "--days", "30"])
    assert result.exit_code == 1, result.output
    [line] = [line for line in result.stdout.splitlines() if line.startswith("finance_")]
    assert line.startswith("finance_hours_paid ")
    assert line.endswith("CNY paid: stored (1, 2501), the rows say (1, 2500)")
    assert result.stdout.splitlines()[-1] == "Verified 30 day(s) in UTC: 1 bucket(s) differ."


def test_days_outside_1_to_3660_are_bad_usage(shop: Path) -> None:
    result = run(["rollup", "--database", str(shop), "--verify", "--days", "0"])
    assert result.exit_code == 2
    assert "--days" in result.stderr


def test_a_changed_payhooks_timezone_builds_the_rollup_again_and_lags_until_then(
    shop: Path,
) -> None:
    assert run(["rollup", "--database", str(shop)]).exit_code == 0
    zone = ZoneInfo("Asia/Kathmandu")
    with Ledger(shop) as ledger:
        ledger.finance.rollup.zone = zone  # as the receiver and the console set it
        assert ledger.vitals(datetime.now(UTC)).rollup_lag > timedelta(0)
    env = {"PAYHOOKS_TIMEZONE": zone.key}
    result = run(["rollup", "--database", str(shop), "--verify", "--days", "3"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == f"Verified 3 day(s) in {zone.key}: 0 bucket(s) differ."
    with sqlite3.connect(shop) as conn:
        assert conn.execute("SELECT zone FROM finance_rollup_state").fetchone() == (zone.key,)
    with Ledger(shop) as ledger:
        ledger.finance.rollup.zone = zone
        assert ledger.vitals(datetime.now(UTC)).rollup_lag == timedelta(0)
