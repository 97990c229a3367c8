"""``payhooks check``: real ledgers on each engine, made healthy or ill through the ledger's own
API, checked as cron would; its exit codes, its JSON, and the ``check_failed`` signal."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from flask import Flask

from payhooks.receiver import CheckLimits, CheckResult, run_checks, signals
from payhooks.storage import DeliveryStatus, Ledger, ListedTransaction, PaymentState
from payhooks.storage.reads import Vitals
from tests.support.app import AppFactory, notification_body, standard_webhooks_signer
from tests.support.cli import clean_env, run
from tests.support.factories import FixedClock, make_outcome, record
from tests.support.unreadable_rows import SPOILED_COLUMNS, spoil

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")

NAMES = [
    "silence",
    "failure-rate",
    "refusals",
    "signals",
    "receivers",
    "drift",
    "sync",
    "mismatches",
    "rollup",
]


@pytest.fixture
def clock() -> FixedClock:
    """The ledger's clock, moved back for what happened earlier; the check reads real time."""
    return FixedClock(datetime.now(UTC))


@pytest.fixture
def ledger(database: Path | str, clock: FixedClock) -> Iterator[Ledger]:
    with Ledger(database, clock=clock) as opened:
        yield opened


def back(clock: FixedClock, **delta: float) -> None:
    """Set the ledger's clock to now less ``delta``."""
    clock.now = datetime.now(UTC) - timedelta(**delta)


def check(database: Path | str, *args: str) -> Result:
    return run(["check", "--database", str(database), *args])


def failing(result: Result) -> list[str]:
    """The names of the checks that failed, read from ``--format json``."""
    report = json.loads(result.stdout)
    return [each["name"] for each in report["checks"] if not each["ok"]]


def paid(ledger: Ledger, ref: str, *, sent: bool = True) -> None:
    """An expected payment paid now (by the ledger's clock), its signals sent unless not."""
    ledger.expect_transaction(ref, 2500, "CNY")
    recorded = record(ledger, make_outcome(external_identifier=ref, transaction_id=f"tx-{ref}"))
    if sent:
        lease = timedelta(seconds=30)
        ledger.signals.mark_sent(ledger.signals.claim([recorded.outcome_id], lease=lease))


def failed(ledger: Ledger, key: str) -> None:
    stored = ledger.receiver.record_delivery(dedupe_key=key, body=b"{", headers={})
    ledger.receiver.mark_delivery(stored.id, DeliveryStatus.MALFORMED_JSON, "not JSON")


def test_a_healthy_ledger_passes_every_check_one_line_each(
    ledger: Ledger, clock: FixedClock, database: Path | str
) -> None:
    back(clock, minutes=5)
    paid(ledger, "order-1")

    result = check(database)

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"ok {name}" for name in NAMES]
    assert lines[0] == "ok silence: The last accepted delivery was 5m ago (limit 1d)."


def test_a_ledger_that_never_received_passes_and_says_so(database: Path | str) -> None:
    Ledger(database).close()
    result = check(database)
    assert result.exit_code == 0, result.output
    assert "ok silence: No delivery has ever been accepted." in result.stdout.splitlines()
    assert "ok sync: The ledger has never synced." in result.stdout.splitlines()


@pytest.mark.parametrize(
    ("hours_ago", "options", "fails"),
    [
        (23, [], []),
        (25, [], ["silence"]),
        (25, ["--max-silence", "2d"], []),
        (2, ["--max-silence", "90m"], ["silence"]),
    ],
)
def test_silence_fails_when_no_delivery_was_accepted_for_too_long(
    ledger: Ledger,
    clock: FixedClock,
    database: Path | str,
    hours_ago: int,
    options: list[str],
    fails: list[str],
) -> None:
    back(clock, hours=hours_ago)
    paid(ledger, "order-1")
    back(clock, minutes=1)
    failed(ledger, "bad-1")  # a delivery, but no accepted one: silence still counts

    result = check(database, "--format", "json", *options)

    assert (result.exit_code, failing(result)) == (1 if fails else 0, fails), result.output


@pytest.mark.parametrize(
    ("good", "bad", "options", "fails"),
    [
        (9, 1, [], []),  # 10%: at the limit
        (8, 2, [], ["failure-rate"]),  # 20%
        (1, 1, [], []),  # 50%, but two deliveries are too few to judge
        # The five refused of seven requests are over the refused share's minimum too.
        (1, 1, ["--min-deliveries", "2"], ["failure-rate", "refusals"]),
        (8, 2, ["--max-failure-rate", "25"], []),
    ],
)
def test_a_failure_spike_in_the_last_hour_fails_once_there_are_enough_deliveries(
    ledger: Ledger,
    clock: FixedClock,
    database: Path | str,
    good: int,
    bad: int,
    options: list[str],
    fails: list[str],
) -> None:
    back(clock, minutes=10)
    for n in range(good):
        paid(ledger, f"order-{n}")
    for n in range(bad):
        failed(ledger, f"bad-{n}")
    for _ in range(5):  # refused requests are not deliveries: never in the rate
        ledger.receiver.record_rejected(reason="invalid_signature", body=b"", remote_addr=None)

    result = check(database, "--format", "json", *options)

    assert (result.exit_code, failing(result)) == (1 if fails else 0, fails), result.output


def test_signals_owed_too_long_fail_until_they_are_sent(
    ledger: Ledger, clock: FixedClock, database: Path | str
) -> None:
    back(clock, minutes=40)
    paid(ledger, "order-1", sent=False)

    result = check(database)

    assert result.exit_code == 1
    assert "FAILED signals: 2 signal(s) owed, the oldest since 40m ago (limit 15m)." in (
        result.stdout.splitlines()
    )
    assert check(database, "--max-signal-age", "1h").exit_code == 0
    ledger.signals.mark_sent(ledger.signals.claim(lease=timedelta(seconds=30)))
    assert check(database).exit_code == 0


def sync(ledger: Ledger, *items: ListedTransaction) -> None:
    run_ = ledger.service.begin_sync(max_age=timedelta(days=30))
    ledger.service.record_service_page(run_.id, items, None)
    ledger.service.end_sync(run_.id)


def test_drift_found_by_the_last_sync_fails(
    ledger: Ledger, clock: FixedClock, database: Path | str
) -> None:
    back(clock, minutes=5)
    paid(ledger, "order-1")
    ledger.expect_transaction("order-2", 2500, "CNY")
    listed = ListedTransaction("tx-2", "order-2", "PAID", PaymentState.SUCCEEDED, "CNY", 2500)
    sync(ledger, listed)

    result = check(database, "--format", "json")

    assert (result.exit_code, failing(result)) == (1, ["drift"])
    drift = next(each for each in json.loads(result.stdout)["checks"] if each["name"] == "drift")
    assert drift["detail"] == "The service's list and the ledger differ: missed_notification 1."
    assert check(database, "--skip", "drift").exit_code == 0


@pytest.mark.parametrize(
    ("hours_ago", "refreshed", "options", "fails"),
    [
        (2, False, [], ["rollup"]),
        (2, False, ["--max-rollup-lag", "3h"], []),
        (2, True, [], []),
        (0.5, False, [], []),
    ],
)
def test_a_change_finance_s_totals_have_not_counted_for_too_long_fails(
    ledger: Ledger,
    clock: FixedClock,
    database: Path | str,
    hours_ago: float,
    refreshed: bool,
    options: list[str],
    fails: list[str],
) -> None:
    back(clock, hours=3)
    ledger.expect_transaction("order-1", 2500, "CNY")
    assert ledger.finance.rollup.refresh().done
    back(clock, hours=hours_ago)
    ledger.expect_transaction("order-2", 2500, "CNY")
    if refreshed:
        assert ledger.finance.rollup.refresh().done

    result = check(database, "--format", "json", *options)

    assert (result.exit_code, failing(result)) == (1 if fails else 0, fails), result.output
    [rollup] = [each for each in json.loads(result.stdout)["checks"] if each["name"] == "rollup"]
    lag = rollup["counts"]["lag_seconds"]
    assert lag == 0 if refreshed else hours_ago * 3600 <= lag < hours_ago * 3600 + 60
    if fails:
        assert "run `payhooks rollup`" in rollup["detail"]


def test_a_rollup_never_built_passes_and_says_it_is_not_built(
    ledger: Ledger, database: Path | str
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")

    result = check(database, "--format", "json")

    [rollup] = [each for each in json.loads(result.stdout)["checks"] if each["name"] == "rollup"]
    assert rollup["ok"] is True
    assert rollup["detail"].startswith("Finance's rollup is not built yet")


@pytest.mark.parametrize(
    ("days_ago", "options", "fails"),
    [(1, [], []), (3, [], ["sync"]), (3, ["--max-sync-age", "4d"], [])],
)
def test_no_complete_sync_for_too_long_fails(
    ledger: Ledger,
    clock: FixedClock,
    database: Path | str,
    days_ago: int,
    options: list[str],
    fails: list[str],
) -> None:
    back(clock, days=days_ago)
    sync(ledger)
    back(clock, minutes=5)
    paid(ledger, "order-1")

    result = check(database, "--format", "json", *options)

    assert (result.exit_code, failing(result)) == (1 if fails else 0, fails), result.output


@pytest.mark.parametrize(
    ("minutes_ago", "options", "fails"),
    [(10, [], ["mismatches"]), (90, [], []), (90, ["--mismatch-window", "2h"], ["mismatches"])],
)
def test_a_mismatch_changed_within_the_window_fails(
    ledger: Ledger,
    clock: FixedClock,
    database: Path | str,
    minutes_ago: int,
    options: list[str],
    fails: list[str],
) -> None:
    back(clock, minutes=minutes_ago)
    outcome = make_outcome(external_identifier="nobody-expected", transaction_id="tx-9")
    recorded = record(ledger, outcome)
    ledger.signals.mark_sent(ledger.signals.claim([recorded.outcome_id], lease=timedelta(1)))

    result = check(database, "--format", "json", *options)

    assert (result.exit_code, failing(result)) == (1 if fails else 0, fails), result.output


def test_the_json_report_has_one_entry_per_check_and_the_time_checked(
    ledger: Ledger, clock: FixedClock, database: Path | str
) -> None:
    back(clock, minutes=5)
    paid(ledger, "order-1")
    before = datetime.now(UTC)

    result = check(database, "--format", "json", "--skip", "sync", "--skip", "drift")

    report = json.loads(result.stdout)
    assert set(report) == {"ok", "checked_at", "checks"}
    assert report["ok"] is True
    assert datetime.fromisoformat(report["checked_at"]) >= before
    assert [each["name"] for each in report["checks"]] == [
        "silence",
        "failure-rate",
        "refusals",
        "signals",
        "receivers",
        "mismatches",
        "rollup",
    ]
    assert all(set(each) == {"name", "ok", "detail", "counts"} for each in report["checks"])
    assert report["checks"][1]["counts"] == {"failures": 0, "deliveries": 1}
    assert report["checks"][3]["counts"] == {}
    assert report["checks"][4]["counts"] == {
        "failing_signals": 0,
        "parked_signals": 0,
        "receiver_errors_last_day": 0,
    }


@pytest.mark.parametrize(
    ("refused", "options", "fails"),
    [
        (5, ["--min-deliveries", "5"], []),  # 5 of 10 requests: 50%, at the limit
        (20, [], ["refusals"]),  # 20 of 25: 80%
        (20, ["--max-refused-rate", "90"], []),
        (9, [], []),  # 9 of 14, but 9 refused are too few to judge
        (9, ["--min-deliveries", "9"], ["refusals"]),
    ],
)
def test_refused_requests_over_the_limits_share_of_the_last_hour_fail(
    ledger: Ledger,
    clock: FixedClock,
    database: Path | str,
    refused: int,
    options: list[str],
    fails: list[str],
) -> None:
    back(clock, minutes=10)
    for n in range(5):  # accepted deliveries: the keys are right
        paid(ledger, f"order-{n}")
    for _ in range(refused):
        ledger.receiver.record_rejected(reason="invalid_signature", body=b"", remote_addr=None)

    result = check(database, "--format", "json", *options)

    assert (result.exit_code, failing(result)) == (1 if fails else 0, fails), result.output


#: A key the service might sign with that is not the receiver's (``TEST_SECRET``).
WRONG_SECRET = "whsec_" + base64.b64encode(b"not-the-receivers-key-0123456789").decode()


def test_a_wrong_signing_key_fails_refusals_where_every_other_check_passes(
    make_app: AppFactory, database: Path | str
) -> None:
    """The launch-day mistake: the service signs with another key than the receiver's. Thirty
    notifications through the real endpoint, each refused and kept as the receiver keeps it."""
    client = make_app().test_client()
    sign = standard_webhooks_signer(WRONG_SECRET)
    for n in range(30):
        body = notification_body(external_identifier=f"order-{n}", transaction_id=f"ll-{n}")
        answer = client.post("/payhooks/notifications", data=body, headers=sign(body))
        assert (answer.status_code, answer.get_json()["error"]["code"]) == (
            401,
            "invalid_signature",
        )

    text, as_json = check(database), check(database, "--format", "json")

    assert text.exit_code == as_json.exit_code == 1, text.output
    assert [line for line in text.stdout.splitlines() if not line.startswith("ok ")] == [
        "FAILED refusals: 30 request(s) refused (invalid_signature 30) and none ever accepted: "
        "check the signing keys (PAYHOOKS_SECRETS)."
    ]
    assert "Error: 1 check(s) failed: refusals." in text.stderr
    entries = {each["name"]: each for each in json.loads(as_json.stdout)["checks"]}
    assert (entries["refusals"]["ok"], entries["refusals"]["counts"]) == (
        False,
        {
            "refused_last_hour": 30,
            "refused_last_day": 30,
            "refused_total": 30,
            "accepted_ever": False,
        },
    )
    assert entries["failure-rate"]["counts"] == {"failures": 0, "deliveries": 0}
    assert check(database, "--skip", "refusals").exit_code == 0


@pytest.mark.parametrize(
    "arguments",
    [
        ["--max-silence", "5x"],
        ["--max-signal-age", "-5m"],
        ["--max-failure-rate", "101"],
        ["--max-refused-rate", "-1"],
        ["--min-deliveries", "0"],
        ["--skip", "everything"],
        ["--format", "xml"],
        ["--frobnicate"],
    ],
)
@pytest.mark.sqlite_only
def test_bad_usage_exits_2(database: Path | str, arguments: list[str]) -> None:
    Ledger(database).close()
    result = check(database, *arguments)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("option", ["--max-failure-rate", "--max-refused-rate"])
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "sNaN", "101", "ten"])
@pytest.mark.sqlite_only
def test_a_rate_that_is_not_a_number_from_0_to_100_is_bad_usage_in_one_sentence(
    database: Path | str, option: str, value: str
) -> None:
    """``nan`` passes every range check a float makes (it compares false with everything)."""
    Ledger(database).close()

    result = check(database, option, value)

    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stderr.splitlines()[-1] == (
        f"Error: Invalid value for '{option}': '{value}' is not a percentage from 0 to 100 "
        "(such as 12.5)."
    )


@pytest.mark.parametrize("column", SPOILED_COLUMNS)
def test_a_stored_time_payhooks_never_writes_fails_the_check_in_one_sentence_naming_it(
    ledger: Ledger, database: Path | str, column: str
) -> None:
    spoil(ledger, column)

    result = check(database)

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        f"Error: The ledger holds a value in {column} that is not a time as payhooks writes one "
        "(ISO 8601 with its offset): something other than payhooks changed the row."
    ]


@pytest.mark.sqlite_only
def test_a_missing_ledger_is_bad_usage(tmp_path: Path) -> None:
    result = check(tmp_path / "nothing-here.db")
    assert result.exit_code == 2
    assert "There is no ledger" in result.stderr


def test_flask_payhooks_check_sends_check_failed_for_each_failing_check(
    app: Flask, database: Path | str, clock: FixedClock, ledger: Ledger
) -> None:
    back(clock, hours=30)
    paid(ledger, "order-1", sent=False)  # silent for 30 h, and signals owed as long
    received: list[dict[str, Any]] = []

    def alert(sender: Flask, **kwargs: Any) -> None:
        received.append({"sender": sender, **kwargs})

    with signals.check_failed.connected_to(alert, sender=app):
        result = app.test_cli_runner().invoke(args=["payhooks", "check"])

    assert result.exit_code == 1, result.output
    assert "Error: 2 check(s) failed: silence, signals." in result.output
    assert [each["check"].name for each in received] == ["silence", "signals"]
    assert all(each["sender"] is app for each in received)
    assert all(isinstance(each["check"], CheckResult) for each in received)
    assert all(isinstance(each["vitals"], Vitals) for each in received)


def test_run_checks_in_the_app_sends_the_same_signal_and_returns_the_report(
    app: Flask, clock: FixedClock, ledger: Ledger
) -> None:
    back(clock, hours=30)
    paid(ledger, "order-1")
    received: list[str] = []

    def alert(sender: Flask, *, check: CheckResult, **extra: Any) -> None:
        received.append(check.name)

    with signals.check_failed.connected_to(alert, sender=app), app.app_context():
        report = run_checks(limits=CheckLimits(max_silence=timedelta(hours=48)))
        assert (report.ok, received) == (True, [])
        report = run_checks(app, skip=["sync"])

    assert (report.ok, received) == (False, ["silence"])
    assert [result.name for result in report.results] == [n for n in NAMES if n != "sync"]


def test_plain_payhooks_check_sends_nothing(
    ledger: Ledger, clock: FixedClock, database: Path | str
) -> None:
    """No app, no receivers: the console script only prints and exits."""
    back(clock, hours=30)
    paid(ledger, "order-1")
    received: list[object] = []
    with signals.check_failed.connected_to(lambda sender, **kw: received.append(sender)):
        result = check(database)
    assert (result.exit_code, received) == (1, [])
