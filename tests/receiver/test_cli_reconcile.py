"""``payhooks reconcile`` and ``payhooks reprocess`` over a real ledger file."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from payhooks.receiver.cli.reports import REPORT_FIELDS
from payhooks.storage import MISMATCH_STATES, DeliveryStatus, Ledger, ReconciliationState
from tests.support.cli import clean_env, json_lines, notification, record_notification, run
from tests.support.factories import FixedClock

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A ledger with one payment in each of several states (and one unexpected)."""
    path = tmp_path / "payhooks.db"
    with Ledger(path) as ledger:
        ledger.expect_transaction("order-paid", 2500, "CNY")
        ledger.expect_transaction("order-short", 12000, "CNY")
        ledger.expect_transaction("order-open", 5000, "CNY")
        ledger.expect_transaction("order-yen", 1500, "JPY")
        ledger.expect_subscription("sub-1", 1000, "CNY", 800)
        record_notification(ledger, notification("order-paid", "ll-1", "25.00"))
        record_notification(ledger, notification("order-short", "ll-2", "110.00"))
        record_notification(ledger, notification("order-yen", "ll-3", "1500.00", currency="JPY"))
        record_notification(ledger, notification("sub-1", "ll-4", "10.00"))
        record_notification(ledger, notification("sub-1", "ll-5", "8.00"))
        record_notification(ledger, notification("nobody-asked", "ll-6", "3.00"))
    return path


def _rows(text: str) -> dict[str, dict[str, str]]:
    return {row["external_identifier"]: row for row in csv.DictReader(io.StringIO(text))}


@pytest.mark.both_engines
def test_reconcile_table_lists_every_payment_and_the_totals(database: Path) -> None:
    result = run(["reconcile", "--database", str(database)])

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "EXTERNAL",
        "ID",
        "KIND",
        "STATE",
        "CUR",
        "EXPECTED",
        "RECEIVED",
        "PERIODS",
        "TRANSACTIONS",
        "DRIFT",
        "REFUSED",
    ]
    by_id = {line.split()[0]: line.split() for line in lines[1:7]}
    assert by_id["order-short"] == [
        "order-short",
        "transaction",
        "amount_mismatch",
        "CNY",
        "120.00",
        "110.00",
        "1",
        "ll-2",
        "0",
    ]
    assert by_id["order-open"] == [
        "order-open",
        "transaction",
        "pending",
        "CNY",
        "50.00",
        "0",
        "0",
    ]
    assert by_id["order-yen"][4:6] == ["1500", "1500"]
    assert by_id["sub-1"] == [
        "sub-1",
        "subscription",
        "paid",
        "CNY",
        "18.00",
        "18.00",
        "2",
        "ll-4",
        "ll-5",
        "0",
    ]
    assert by_id["nobody-asked"][:3] == ["nobody-asked", "unexpected", "CNY"]
    totals = result.stdout.split("\n\n")[1].splitlines()
    assert totals[0].split() == ["CUR", "STATE", "COUNT", "EXPECTED", "RECEIVED"]
    assert "CNY  paid                 2     43.00     43.00" in totals


def test_reconcile_csv_carries_the_contract_fields_as_decimal_strings(database: Path) -> None:
    result = run(["reconcile", "--format", "csv", "--database", str(database)])

    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    assert tuple(next(csv.reader(io.StringIO(result.stdout)))) == REPORT_FIELDS
    assert rows["order-short"]["expected_amount"] == "120.00"
    assert rows["order-short"]["received_amount"] == "110.00"
    assert rows["order-open"]["received_amount"] == ""
    assert rows["nobody-asked"]["kind"] == ""
    assert rows["nobody-asked"]["expected_amount"] == ""
    assert rows["sub-1"]["transaction_ids"] == "ll-4 ll-5"


def test_reconcile_json_is_one_object_per_line_with_nulls_where_there_is_none(
    database: Path,
) -> None:
    result = run(["reconcile", "--format", "json", "--database", str(database)])

    records = {record["external_identifier"]: record for record in json_lines(result.stdout)}
    assert result.exit_code == 0, result.output
    assert len(records) == 6
    assert records["order-open"]["received_amount"] is None
    assert records["order-open"]["transaction_ids"] == []
    assert records["order-paid"] == records["order-paid"] | {
        "kind": "transaction",
        "state": "paid",
        "currency": "CNY",
        "expected_amount": "25.00",
        "received_amount": "25.00",
        "transaction_ids": ["ll-1"],
    }
    assert records["nobody-asked"]["kind"] is None


def test_reconcile_filters_by_state(database: Path) -> None:
    result = run(
        ["reconcile", "--format", "json", "--state", "pending", "--database", str(database)]
    )

    assert [record["external_identifier"] for record in json_lines(result.stdout)] == ["order-open"]


def test_reconcile_filters_by_time_without_offset_as_utc(database: Path) -> None:
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")

    before = run(
        ["reconcile", "--format", "json", "--until", tomorrow, "--database", str(database)]
    )
    after = run(["reconcile", "--format", "json", "--since", tomorrow, "--database", str(database)])

    # The unexpected row opens at its payment_time (2026-11-21 12:00 UTC), the others now.
    assert len(json_lines(before.stdout)) + len(json_lines(after.stdout)) == 6
    assert "order-open" in before.stdout
    assert "order-open" not in after.stdout


def test_reconcile_with_a_bad_time_is_bad_usage(database: Path) -> None:
    result = run(["reconcile", "--since", "last tuesday", "--database", str(database)])

    assert result.exit_code == 2
    assert "'last tuesday' is not an ISO 8601 time" in result.stderr


def test_reconcile_of_an_unknown_state_is_bad_usage(database: Path) -> None:
    result = run(["reconcile", "--state", "lost", "--database", str(database)])

    assert result.exit_code == 2


def test_fail_on_mismatch_exits_1_and_names_the_states(database: Path) -> None:
    result = run(["reconcile", "--fail-on-mismatch", "--database", str(database)])

    assert result.exit_code == 1
    assert (
        result.stderr == "Error: 2 payment(s) need attention (amount_mismatch 1, unexpected 1).\n"
    )
    assert "order-short" in result.stdout  # the report is still written


def test_fail_on_mismatch_passes_when_only_ordinary_states_remain(database: Path) -> None:
    result = run(
        ["reconcile", "--fail-on-mismatch", "--state", "paid", "--database", str(database)]
    )

    assert result.exit_code == 0, result.output


def test_the_mismatch_states_are_exactly_the_documented_five() -> None:
    assert {state.value for state in MISMATCH_STATES} == {
        "amount_mismatch",
        "currency_mismatch",
        "duplicate_payment",
        "unexpected",
        "unknown_status",
    }
    assert ReconciliationState.NOT_CREATED not in MISMATCH_STATES
    assert ReconciliationState.FAILED not in MISMATCH_STATES


@pytest.mark.parametrize("report_format", ["csv", "json", "table"])
def test_reconcile_output_writes_a_file_and_reports_on_stderr(
    database: Path, tmp_path: Path, report_format: str
) -> None:
    output = tmp_path / f"report.{report_format}"

    result = run(
        [
            "reconcile",
            "--format",
            report_format,
            "--output",
            str(output),
            "--database",
            str(database),
        ]
    )

    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert f"Wrote 6 row(s) to {output}; times without an offset are read in UTC" in result.stderr
    assert "order-short" in output.read_text()


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_reconcile_output_through_a_pipe_or_a_link_leaves_it_what_it_was(
    database: Path, tmp_path: Path, kind: str
) -> None:
    """Only a regular file is replaced by the finished report: a named pipe is written in place
    (a reader gets the rows), and a link keeps pointing at its target, which gets the rows."""
    target = tmp_path / "real-report.csv"
    output = tmp_path / "report.csv"
    if kind == "fifo":
        os.mkfifo(output)
        received: list[str] = []
        reader = threading.Thread(target=lambda: received.append(output.read_text()), daemon=True)
        reader.start()
    else:
        target.write_text("old\n")
        output.symlink_to(target)

    result = run(
        ["reconcile", "--format", "csv", "--output", str(output), "--database", str(database)]
    )

    assert result.exit_code == 0, result.output
    if kind == "fifo":
        reader.join(timeout=30)
        assert stat.S_ISFIFO(os.lstat(output).st_mode)
        assert "order-short" in received[0]
    else:
        assert output.is_symlink()
        assert output.resolve() == target.resolve()
        assert "order-short" in target.read_text()
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("command", [["reconcile"], ["reprocess", "--no-signals"]])
def test_a_missing_ledger_is_bad_usage_and_is_not_created(
    tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "typo.db"

    result = run([*command, "--database", str(missing)])

    assert result.exit_code == 2
    assert (
        result.stderr
        == f"Error: There is no ledger at {missing}: pass --database or set PAYHOOKS_DATABASE.\n"
    )
    assert not missing.exists()


def test_reconcile_of_an_empty_ledger_says_so(tmp_path: Path) -> None:
    Ledger(tmp_path / "empty.db").close()

    result = run(["reconcile", "--database", str(tmp_path / "empty.db")])

    assert result.exit_code == 0
    assert "(no rows)" in result.stdout


def test_reconcile_of_a_file_that_is_not_a_ledger_fails_in_one_sentence(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("not a database")

    result = run(["reconcile", "--database", str(bogus)])

    assert result.exit_code == 2  # bad usage, as a file that does not exist
    assert result.stderr == (
        f"Error: {bogus} is not a payhooks ledger (it holds no payhooks schema); nothing was "
        "changed in it.\n"
    )
    assert bogus.read_text() == "not a database"


# -- reprocess ---------------------------------------------------------------------------------


def _store_unparsed(ledger: Ledger, body: bytes, status: str, key: str) -> int:
    delivery = ledger.receiver.record_delivery(
        dedupe_key=key, body=body, headers={"timezone": "Asia/Shanghai"}
    )
    if status != "received":
        ledger.receiver.mark_delivery(delivery.id, status, error="earlier failure")
    return delivery.id


def test_reprocess_records_outcomes_of_deliveries_that_failed_and_counts_them(
    tmp_path: Path,
) -> None:
    database = tmp_path / "payhooks.db"
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        fixed = _store_unparsed(ledger, notification("order-1", "ll-1"), "processing_error", "k1")
        _store_unparsed(ledger, notification("order-2", "ll-2", status="ZZ"), "received", "k2")
        _store_unparsed(ledger, b"{not json", "malformed_json", "k3")

    result = run(["reprocess", "--no-signals", "--database", str(database)])

    assert result.exit_code == 1
    assert result.stdout == "Reprocessed 3 delivery(ies): 1 malformed_json, 2 processed.\n"
    assert result.stderr.endswith(
        "Error: 1 delivery(ies) still cannot be processed; "
        "`payhooks deliveries list --status malformed_json` shows them with their errors.\n"
    )
    with Ledger(database) as ledger:
        assert ledger.state("order-1") is ReconciliationState.PAID
        assert ledger.state("order-2") is ReconciliationState.UNEXPECTED
        delivery = ledger.receiver.delivery(fixed)
        assert delivery is not None
        assert delivery.status is DeliveryStatus.PROCESSED
        # The stored timezone header dated payment_time, as on arrival: 12:00 in Shanghai.
        paid_at = ledger.database.execute("SELECT paid_at FROM outcomes").fetchone()[0]
        assert paid_at.startswith("2026-11-21T04:00:00")


def test_reprocess_uses_the_configured_status_map(tmp_path: Path) -> None:
    database = tmp_path / "payhooks.db"
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        _store_unparsed(ledger, notification("order-1", status="OK"), "received", "k1")
    status_map = json.dumps({"OK": "succeeded"})

    result = run(
        ["reprocess", "--no-signals", "--status", "received", "--database", str(database)],
        env={"PAYHOOKS_STATUS_MAP": status_map},
    )

    assert result.exit_code == 0, result.output
    assert result.stdout == "Reprocessed 1 delivery(ies): 1 processed.\n"
    with Ledger(database) as ledger:
        assert ledger.state("order-1") is ReconciliationState.PAID


def test_reprocess_with_nothing_to_do_says_so(tmp_path: Path) -> None:
    database = tmp_path / "payhooks.db"
    with Ledger(database) as ledger:
        record_notification(ledger, notification())

    result = run(["reprocess", "--no-signals", "--database", str(database)])

    assert result.exit_code == 0
    assert result.stdout == "No delivery to reprocess.\n"


def test_reprocess_with_a_bad_status_map_fails_in_one_sentence(tmp_path: Path) -> None:
    database = tmp_path / "payhooks.db"
    Ledger(database).close()

    result = run(
        ["reprocess", "--no-signals", "--database", str(database)],
        env={"PAYHOOKS_STATUS_MAP": "[1, 2]"},
    )

    assert result.exit_code == 2  # a setting that cannot be used is bad usage
    assert "PAYHOOKS_STATUS_MAP" in result.stderr
    assert "Traceback" not in result.output


def test_plain_reprocess_refuses_to_record_outcomes_whose_signals_would_be_lost(
    tmp_path: Path,
) -> None:
    database = tmp_path / "payhooks.db"
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        waiting = _store_unparsed(ledger, notification("order-1"), "processing_error", "k1")

    result = run(["reprocess", "--database", str(database)])

    assert result.exit_code == 2
    assert "flask payhooks reprocess" in result.stderr
    assert "--no-signals" in result.stderr
    assert "Traceback" not in result.output
    with Ledger(database) as ledger:
        assert ledger.state("order-1") is ReconciliationState.PENDING
        delivery = ledger.receiver.delivery(waiting)
        assert delivery is not None
        assert delivery.status is DeliveryStatus.PROCESSING_ERROR


def test_reprocess_keeps_a_delivery_that_still_fails_as_processing_error(
    tmp_path: Path,
) -> None:
    database = tmp_path / "payhooks.db"
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        waiting = _store_unparsed(ledger, notification("order-1"), "processing_error", "k1")
        # A real fault in the file: every outcome insert is refused.
        ledger.database.execute(
            "CREATE TRIGGER refuse_outcomes BEFORE INSERT ON outcomes "
            "BEGIN SELECT RAISE(ABORT, 'outcomes are frozen'); END"
        )

    result = run(["reprocess", "--no-signals", "--database", str(database)])

    assert result.exit_code == 1
    assert result.stdout == "Reprocessed 1 delivery(ies): 1 processing_error.\n"
    assert "Traceback" not in result.output
    with Ledger(database) as ledger:
        delivery = ledger.receiver.delivery(waiting)
        assert delivery is not None
        assert delivery.status is DeliveryStatus.PROCESSING_ERROR
        assert delivery.error == "StorageError"


def test_money_in_another_currency_is_shown_with_it_and_kept_out_of_the_totals(
    tmp_path: Path,
) -> None:
    database = tmp_path / "payhooks.db"
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-usd", 2500, "CNY")
        record_notification(ledger, notification("order-usd", "ll-1", "25.00", currency="USD"))

    table = run(["reconcile", "--database", str(database)])
    records = json_lines(run(["reconcile", "--format", "json", "--database", str(database)]).stdout)

    row = table.stdout.splitlines()[1].split()
    assert row[:7] == [
        "order-usd",
        "transaction",
        "currency_mismatch",
        "CNY",
        "25.00",
        "25.00",
        "USD",
    ]
    assert "CNY  currency_mismatch      1     25.00      0.00" in table.stdout
    assert records[0]["received_currency"] == "USD"
    assert records[0]["received_amount"] == "25.00"
    assert table.exit_code == 0


@pytest.mark.parametrize(
    ("option", "moment"),
    [
        ("--since", "0001-01-01"),
        ("--since", "0001-01-01T00:00:00-14:00"),
        ("--until", "9999-12-31T23:59:59.999999"),
        ("--until", "9999-12-31T23:59:59+00:00"),
        ("--since", "9999-12-31T23:59:59+14:00"),
    ],
)
def test_reconcile_takes_every_time_that_is_within_years_1_to_9999_in_utc(
    database: Path, option: str, moment: str
) -> None:
    result = run(["reconcile", "--format", "json", option, moment, "--database", str(database)])

    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("option", "moment"),
    [
        ("--since", "0001-01-01T00:00:00+00:01"),
        ("--since", "0001-01-01T00:00:00+14:00"),
        ("--until", "9999-12-31T23:59:59-14:00"),
        ("--until", "9999-12-31T23:59:59.999999-00:01"),
    ],
)
def test_reconcile_with_a_time_beyond_the_datetime_limits_is_bad_usage_in_one_sentence(
    database: Path, option: str, moment: str
) -> None:
    result = run(["reconcile", option, moment, "--database", str(database)])

    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"Invalid value for '{option}': '{moment}' is outside the times the ledger can " in (
        result.stderr
    )


@pytest.mark.parametrize("value", ["-1", "0"])
def test_a_busy_timeout_that_is_not_positive_is_one_sentence_naming_the_setting(
    database: Path, value: str
) -> None:
    result = run(
        ["reconcile", "--database", str(database)], env={"PAYHOOKS_BUSY_TIMEOUT_MS": value}
    )

    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "Error: The configuration cannot be used: PAYHOOKS_BUSY_TIMEOUT_MS must be a positive "
        f"integer, got {value}.\n"
    )


@pytest.mark.parametrize("report_format", ["table", "csv", "json"])
def test_reconcile_to_a_full_device_is_exit_1_in_one_sentence(
    database: Path, report_format: str
) -> None:
    args = ["--format", report_format, "--output", "/dev/full", "--database", str(database)]

    result = run(["reconcile", *args])

    assert result.exit_code == 1, result.output
    assert result.stderr.endswith("Error: /dev/full cannot be written: No space left on device.\n")
    # Written in place: the device is still a device (as root, a report moved over it would
    # have put a plain file at /dev/full).
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("report_format", ["table", "csv", "json"])
def test_reconcile_with_standard_output_on_a_full_device_is_exit_1_in_one_sentence(
    database: Path, report_format: str
) -> None:
    """A real process: Python's own flush of standard output at exit must not fail either."""
    args = ["reconcile", "--format", report_format, "--database", str(database)]
    with open("/dev/full", "w") as full:
        finished = subprocess.run(
            [sys.executable, "-m", "payhooks.receiver", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )

    assert finished.returncode == 1, finished.stderr
    assert finished.stderr == (
        "Error: The report cannot be written to standard output: No space left on device.\n"
    )


@pytest.mark.parametrize(
    ("start", "end"), [("--since", "--until"), ("--paid-since", "--paid-until")]
)
@pytest.mark.parametrize(
    ("since", "until"), [("2026-02-01", "2026-01-01"), ("2026-01-01T08:00:00+08:00", "2026-01-01")]
)
def test_until_not_after_since_is_bad_usage(
    database: Path, start: str, end: str, since: str, until: str
) -> None:
    result = run(["reconcile", "--database", str(database), start, since, end, until])
    assert result.exit_code == 2
    assert end in result.stderr
    assert f"after {start} " in result.stderr


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        # Every notification was paid on 2026-11-21 (service time); order-open never was.
        (
            ["--paid-since", "2026-11-21", "--paid-until", "2026-11-22"],
            {"order-paid", "order-short", "order-yen", "sub-1", "nobody-asked"},
        ),
        (["--paid-since", "2026-11-22"], set()),
        (["--paid-until", "2026-11-20"], set()),
        (["--paid-since", "2026-11-21", "--state", "amount_mismatch"], {"order-short"}),
    ],
)
def test_reconcile_by_paid_time_lists_the_payments_paid_in_the_window(
    database: Path, window: list[str], expected: set[str]
) -> None:
    result = run(["reconcile", "--database", str(database), "--format", "csv", *window])

    assert result.exit_code == 0, result.output
    assert set(_rows(result.stdout)) == expected


@pytest.mark.system
@pytest.mark.parametrize("report_format", ["table", "csv", "json"])
def test_a_reader_that_stops_early_ends_the_report_quietly_with_0(
    tmp_path: Path, report_format: str
) -> None:
    """``payhooks reconcile | head``: the pipe closes long before the report ends."""
    rows = "".join(f"order-{n},100,CNY\n" for n in range(4000))
    (tmp_path / "expected.csv").write_text("external_identifier,amount_minor,currency\n" + rows)
    assert run(["expect", "--csv", str(tmp_path / "expected.csv")]).exit_code == 0
    payhooks = Path(sys.executable).parent / "payhooks"
    piped = subprocess.run(
        [
            "bash",
            "-c",
            f"set -o pipefail; {payhooks} reconcile --format {report_format} | head -n 1",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert len(piped.stdout.splitlines()) == 1


@pytest.mark.parametrize(
    ("zone", "midnight"),
    [
        ("Asia/Kathmandu", datetime(2026, 11, 20, 18, 15, tzinfo=UTC)),  # +05:45
        ("America/St_Johns", datetime(2026, 11, 21, 3, 30, tzinfo=UTC)),  # -03:30
        ("Europe/Berlin", datetime(2026, 3, 28, 23, 0, tzinfo=UTC)),  # the 23-hour day
        ("America/New_York", datetime(2026, 11, 1, 4, 0, tzinfo=UTC)),  # the 25-hour day
    ],
)
def test_reconcile_reads_a_time_without_an_offset_in_payhooks_timezone_and_says_so(
    tmp_path: Path, zone: str, midnight: datetime
) -> None:
    """``--since DAY --until NEXT`` is the zone's day: a payment a microsecond before its
    midnight is out, one at it is in, as is one a microsecond before the next midnight."""
    path = tmp_path / "zoned.db"
    clock = FixedClock()
    day = midnight.astimezone(ZoneInfo(zone)).date()
    end = datetime.combine(day + timedelta(days=1), datetime.min.time(), ZoneInfo(zone))
    with Ledger(path, clock=clock) as ledger:
        for identifier, moment in (
            ("before", midnight - timedelta(microseconds=1)),
            ("first", midnight),
            ("last", end - timedelta(microseconds=1)),
            ("after", end),
        ):
            clock.now = moment
            ledger.expect_transaction(identifier, 100, "EUR")
    args = ["reconcile", "--since", str(day), "--until", str(day + timedelta(days=1))]

    result = run([*args, "--database", str(path)], env={"PAYHOOKS_TIMEZONE": zone})
    in_utc = run([*args, "--database", str(path)])

    assert result.exit_code == 0, result.output
    listed = [line.split()[0] for line in result.stdout.splitlines()[1:3]]
    assert sorted(listed) == ["first", "last"]
    assert f"Times without an offset are read in {zone} (PAYHOOKS_TIMEZONE)." in result.stdout
    assert "read in UTC (PAYHOOKS_TIMEZONE)" in in_utc.stdout


def test_reconcile_refuses_an_unknown_zone_in_one_sentence(database: Path) -> None:
    result = run(
        ["reconcile", "--since", "2026-11-21", "--database", str(database)],
        env={"PAYHOOKS_TIMEZONE": "Mars/Olympus"},
    )

    assert result.exit_code == 2
    assert "PAYHOOKS_TIMEZONE must be an IANA time zone name" in result.stderr
