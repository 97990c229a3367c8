"""``payhooks expect``: one payment from arguments, many from a CSV file, all or nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.storage import ConflictError, Ledger, PaymentKind
from tests.support.cli import clean_env, run

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")


def _payments(database: Path) -> list[dict[str, object]]:
    """The registered payments; none when the file was never created."""
    if not database.exists():
        return []
    with Ledger(database) as ledger:
        return list(
            ledger.database.query(
                "SELECT external_identifier, kind, amount_minor, currency, plan_amount_minor, "
                "description FROM payments ORDER BY external_identifier"
            )
        )


def test_expect_registers_a_transaction_in_the_default_database(clean_env: Path) -> None:
    result = run(["expect", "order-1", "2500", "cny", "--description", "Blue mug"])

    assert result.exit_code == 0, result.output
    assert result.stdout == "Registered order-1: 25.00 CNY (transaction).\n"
    assert _payments(clean_env / "payhooks.db") == [
        {
            "external_identifier": "order-1",
            "kind": "transaction",
            "amount_minor": 2500,
            "currency": "CNY",
            "plan_amount_minor": None,
            "description": "Blue mug",
        }
    ]


def test_expect_registers_a_subscription_with_its_plan_amount(tmp_path: Path) -> None:
    database = tmp_path / "ledger.db"

    result = run(
        [
            "expect",
            "sub-1",
            "1000",
            "JPY",
            "--subscription",
            "--plan-amount",
            "800",
            "--database",
            str(database),
        ]
    )

    assert result.exit_code == 0, result.output
    assert result.stdout == "Registered sub-1: 1000 JPY (subscription).\n"
    assert _payments(database)[0]["plan_amount_minor"] == 800


def test_expect_uses_payhooks_database_from_the_environment(tmp_path: Path) -> None:
    database = tmp_path / "from-env.db"

    result = run(["expect", "order-1", "2500", "CNY"], env={"PAYHOOKS_DATABASE": str(database)})

    assert result.exit_code == 0, result.output
    assert [row["external_identifier"] for row in _payments(database)] == ["order-1"]


def test_expect_again_with_the_same_data_is_a_no_op() -> None:
    run(["expect", "order-1", "2500", "CNY"])

    result = run(["expect", "order-1", "2500", "CNY"])

    assert result.exit_code == 0
    assert "already registered with the same data" in result.stdout


def test_expect_again_with_different_data_fails_with_one_sentence() -> None:
    run(["expect", "order-1", "2500", "CNY"])

    result = run(["expect", "order-1", "2600", "CNY"])

    assert result.exit_code == 1
    assert (
        result.stderr
        == "Error: Payment 'order-1' is already registered with a different amount_minor.\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["order-1", "2500", "XYZ"], "'XYZ' is not an ISO 4217 currency code"),
        (["--", "order-1", "-5", "CNY"], "-5 is negative: amounts are 1 or more minor units"),
        (["order-1", "-5", "CNY"], "-5 is negative: amounts are 1 or more minor units"),
        (["order-1", "-0", "CNY"], "-0 is negative: amounts are 1 or more minor units"),
        (["order-1", "0", "CNY"], "0 is no amount to expect: amounts are 1 or more minor units"),
        (
            ["sub-1", "100", "CNY", "--subscription", "--plan-amount", "-100"],
            "-100 is negative: amounts are 1 or more minor units",
        ),
        (
            ["sub-1", "100", "CNY", "--subscription", "--plan-amount", "0"],
            "0 is no amount to expect: amounts are 1 or more minor units",
        ),
        (["order-1", "25.00", "CNY"], "'25.00' is not a valid integer"),
        (["order-1", "2500"], "Give EXTERNAL_ID AMOUNT_MINOR CURRENCY, or --csv FILE"),
        ([], "Give EXTERNAL_ID AMOUNT_MINOR CURRENCY, or --csv FILE"),
        (["x" * 65, "1", "CNY"], "must be 1 to 64 characters"),
        (["sub-1", "1000", "CNY", "--subscription"], "--subscription needs --plan-amount"),
        (
            ["order-1", "1000", "CNY", "--plan-amount", "5"],
            "--plan-amount is only for --subscription",
        ),
        (["order-1", "1000", "CNY", "--csv", "payhooks.db"], "--csv takes no payment arguments"),
    ],
)
def test_expect_with_bad_arguments_is_bad_usage(args: list[str], message: str) -> None:
    Path("payhooks.db").touch()

    result = run(["expect", *args])

    assert result.exit_code == 2, result.output
    assert message in result.stderr


CSV_GOOD = """external_identifier,amount_minor,currency,kind,plan_amount_minor,description
order-1,2500,CNY,,,Blue mug
order-2,100,kwd,transaction,,
sub-1,1000,JPY,subscription,800,"Monthly, billed on the 1st"
"""


def test_expect_csv_registers_every_row(tmp_path: Path) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_text(CSV_GOOD)

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 0, result.output
    assert result.stdout == f"Registered 3 payment(s) from {csv_file}.\n"
    rows = {row["external_identifier"]: row for row in _payments(Path("payhooks.db"))}
    assert rows["order-2"]["currency"] == "KWD"
    assert rows["sub-1"]["kind"] == "subscription"
    assert rows["sub-1"]["plan_amount_minor"] == 800
    assert rows["sub-1"]["description"] == "Monthly, billed on the 1st"


def test_expect_csv_accepts_a_byte_order_mark_and_columns_in_any_order(tmp_path: Path) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_bytes(
        "\ufeffcurrency,external_identifier,amount_minor\r\nCNY,order-1,2500\r\n".encode()
    )

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 0, result.output
    assert _payments(Path("payhooks.db"))[0]["amount_minor"] == 2500


def test_expect_csv_again_counts_what_was_already_there(tmp_path: Path) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_text(CSV_GOOD)
    run(["expect", "order-1", "2500", "CNY", "--description", "Blue mug"])

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 0, result.output
    assert "Registered 2 payment(s)" in result.stdout
    assert "1 already registered with the same data" in result.stdout


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("order-9,12.50,CNY,,,", "amount_minor '12.50' is not an amount: amounts are 1 or more"),
        ("order-9,-1,CNY,,,", "amount_minor '-1' is not an amount"),
        ("order-9,100,XXX,,,", "currency 'XXX' is not an ISO 4217 code"),
        ("order-9,100,CNY,gift,,", "kind 'gift' is neither 'transaction' nor 'subscription'"),
        ("order-9,100,CNY,subscription,,", "a subscription needs plan_amount_minor"),
        ("order-9,100,CNY,transaction,50,", "plan_amount_minor is only for kind 'subscription'"),
        (",100,CNY,,,", "external_identifier must be 1 to 64 characters"),
        ("order-9,100,CNY", "expected 6 fields"),
        ("order-9,100,CNY,,,,extra", "expected 6 fields"),
        ("order-1,999,CNY,,,", "'order-1' is already on line 2 with different data"),
    ],
)
def test_expect_csv_reports_a_bad_row_by_line_and_registers_nothing(
    tmp_path: Path, bad_line: str, message: str
) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_text(CSV_GOOD + bad_line + "\n")

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 1, result.output
    assert f"{csv_file}: line 5: {message}" in result.stderr
    assert result.stderr.endswith("1 bad row(s); nothing was registered.\n")
    assert _payments(Path("payhooks.db")) == []


def test_expect_csv_lists_every_bad_row(tmp_path: Path) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_text(
        "external_identifier,amount_minor,currency\na,1,CNY\nb,x,CNY\nc,2,CNY\nd,3,ABC\n"
    )

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 1
    assert "line 3: amount_minor 'x'" in result.stderr
    assert "line 5: currency 'ABC'" in result.stderr
    assert "2 bad row(s); nothing was registered." in result.stderr


def test_expect_csv_line_numbers_count_quoted_line_breaks(tmp_path: Path) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_text(
        'external_identifier,amount_minor,currency,description\na,1,CNY,"two\nlines"\nb,x,CNY,\n'
    )

    result = run(["expect", "--csv", str(csv_file)])

    assert "line 4: amount_minor 'x'" in result.stderr


def test_expect_csv_conflicting_with_the_ledger_registers_nothing(tmp_path: Path) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_text(CSV_GOOD)
    run(["expect", "sub-1", "1000", "JPY"])  # a transaction; the file says subscription

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 1
    assert (
        f"{csv_file}: line 4: Payment 'sub-1' is already registered with a different"
        in result.stderr
    )
    assert "Nothing was registered." in result.stderr
    assert [row["external_identifier"] for row in _payments(Path("payhooks.db"))] == ["sub-1"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "The file is empty; it needs a header row."),
        (
            "external_identifier,amount\nx,1\n",
            "line 1: missing column(s) amount_minor, currency; unknown column(s) 'amount'",
        ),
    ],
)
def test_expect_csv_with_a_bad_header_says_so(tmp_path: Path, content: str, message: str) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_text(content)

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 1
    assert message in result.stderr


def test_expect_csv_of_a_missing_file_is_bad_usage(tmp_path: Path) -> None:
    result = run(["expect", "--csv", str(tmp_path / "missing.csv")])

    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_expect_csv_that_is_not_utf8_fails_cleanly(tmp_path: Path) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_bytes(b"external_identifier,amount_minor,currency\n\xff\xfe,1,CNY\n")

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 1
    assert "cannot be read" in result.stderr
    assert "Traceback" not in result.output


_identifier = st.text(
    st.characters(codec="utf-8", exclude_characters="\r\n\x00"), min_size=1, max_size=64
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(
        st.tuples(_identifier, st.integers(1, 10**12), st.sampled_from(["CNY", "JPY", "KWD"])),
        max_size=8,
        unique_by=lambda row: row[0],
    )
)
def test_expect_csv_round_trips_any_identifier_and_amount(tmp_path: Path, rows) -> None:
    import csv
    import io
    import uuid

    database = tmp_path / f"{uuid.uuid4().hex}.db"
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["external_identifier", "amount_minor", "currency"])
    writer.writerows(rows)
    csv_file = tmp_path / f"{uuid.uuid4().hex}.csv"
    csv_file.write_text(buffer.getvalue(), encoding="utf-8", newline="")

    result = run(["expect", "--csv", str(csv_file), "--database", str(database)])

    assert result.exit_code == 0, result.output
    with Ledger(database) as ledger:
        stored = {
            (row["external_identifier"], row["amount_minor"], row["currency"])
            for row in ledger.database.query("SELECT * FROM payments")
        }
        assert stored == set(rows)
        for identifier, amount, currency in rows:
            with pytest.raises(ConflictError):
                ledger.expect_transaction(identifier, amount + 1, currency)
            assert ledger.expect_transaction(identifier, amount, currency) is False
        assert all(
            row["kind"] == PaymentKind.TRANSACTION
            for row in ledger.database.query("SELECT kind FROM payments")
        )


@pytest.mark.parametrize(
    "args",
    [
        ["order-1", "1000000000000001", "CNY"],
        ["order-1", "99999999999999999999999999", "CNY"],
        ["sub-1", "100", "CNY", "--subscription", "--plan-amount", "1000000000000001"],
    ],
    ids=["amount", "huge amount", "plan amount"],
)
def test_expect_over_the_ledgers_largest_amount_is_bad_usage_in_one_sentence(
    args: list[str],
) -> None:
    result = run(["expect", *args])

    assert result.exit_code == 2, result.output
    assert "is over the largest amount the ledger takes (1000000000000000 minor units)." in (
        result.stderr
    )
    assert "Traceback" not in result.output
    assert _payments(Path("payhooks.db")) == []


def test_expect_accepts_the_largest_amount_itself() -> None:
    result = run(["expect", "order-1", "1000000000000000", "CNY"])

    assert result.exit_code == 0, result.output
    assert _payments(Path("payhooks.db"))[0]["amount_minor"] == 10**15


@pytest.mark.parametrize(
    ("bad_line", "column"),
    [
        ("order-9,1000000000000001,CNY,,,", "amount_minor"),
        ("order-9,1" + "0" * 5000 + ",CNY,,,", "amount_minor"),
        ("sub-9,100,CNY,subscription,1000000000000001,", "plan_amount_minor"),
    ],
    ids=["amount", "5000 digits", "plan amount"],
)
def test_expect_csv_over_the_largest_amount_names_the_line_and_registers_nothing(
    tmp_path: Path, bad_line: str, column: str
) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_text(CSV_GOOD + bad_line + "\n" + "order-10,1,CNY,,,\n")

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 1, result.output
    assert f"{csv_file}: line 5: {column} " in result.stderr
    assert "is over the largest amount the ledger takes" in result.stderr
    assert "Traceback" not in result.output
    assert _payments(Path("payhooks.db")) == []


def test_expect_csv_takes_a_zero_padded_amount_within_the_bound(tmp_path: Path) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_text(
        "external_identifier,amount_minor,currency\norder-1,0000000000000000000025,CNY\n"
    )

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 0, result.output
    assert _payments(Path("payhooks.db"))[0]["amount_minor"] == 25


# -- large files: streamed, all or nothing ---------------------------------------------------

_HEADER = "external_identifier,amount_minor,currency,kind,plan_amount_minor,description\n"


def _write_rows(path: Path, count: int, last: str | None = None) -> None:
    """``count`` good rows, then ``last`` (a bad line) when given."""
    with path.open("w", encoding="utf-8") as handle:
        handle.write(_HEADER)
        for number in range(count):
            handle.write(f"order-{number:07d},{100 + number},CNY,,,Item {number}\n")
        if last is not None:
            handle.write(last + "\n")


@pytest.mark.parametrize(
    ("last", "message"),
    [
        ("order-late,12.50,CNY,,,", "amount_minor '12.50' is not an amount"),
        ("order-0000000,999,CNY,,,", "'order-0000000' is already on line 2 with different data"),
        ("order-late,1,CNY,,,\0", "expected 6 fields"),
        ("order-late,1000000000000001,CNY,,,", "amount_minor '1000000000000001' is over the"),
    ],
    ids=["not an amount", "repeated with other data", "stray field", "over the bound"],
)
def test_expect_csv_with_a_bad_last_line_registers_nothing(
    tmp_path: Path, last: str, message: str
) -> None:
    csv_file = tmp_path / "expected.csv"
    last = last.replace("\0", ",extra")
    _write_rows(csv_file, 5_000, last)

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 1, result.output
    assert f"{csv_file}: line 5002: {message}" in result.stderr
    assert _payments(Path("payhooks.db")) == []


def test_expect_csv_conflicting_with_the_ledger_on_the_last_line_rolls_back_every_row(
    tmp_path: Path,
) -> None:
    """The file is good on its own, so the conflict shows only while registering: the
    thousands of rows registered before it in the transaction are rolled back."""
    database = tmp_path / "payhooks.db"
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-late", 1, "JPY")
    csv_file = tmp_path / "expected.csv"
    _write_rows(csv_file, 5_000, "order-late,1,CNY,,,")

    result = run(["expect", "--csv", str(csv_file), "--database", str(database)])

    assert result.exit_code == 1, result.output
    assert f"{csv_file}: line 5002: " in result.stderr
    assert result.stderr.rstrip().endswith("Nothing was registered.")
    assert [row["external_identifier"] for row in _payments(database)] == ["order-late"]


def test_expect_csv_lists_the_first_bad_rows_and_counts_the_others(tmp_path: Path) -> None:
    csv_file = tmp_path / "expected.csv"
    csv_file.write_text(_HEADER + "".join(f"order-{n},x,CNY,,,\n" for n in range(1_000)))

    result = run(["expect", "--csv", str(csv_file)])

    assert result.exit_code == 1
    listed = [line for line in result.stderr.splitlines() if ": line " in line]
    assert len(listed) == 20
    assert listed[0].startswith(f"{csv_file}: line 2: amount_minor 'x' is not an amount")
    assert listed[-1].startswith(f"{csv_file}: line 21: ")
    assert result.stderr.endswith("1000 bad row(s) (980 not listed); nothing was registered.\n")


def test_expect_csv_counts_exact_repeats_as_already_registered(tmp_path: Path) -> None:
    csv_file = tmp_path / "expected.csv"
    _write_rows(csv_file, 3, "order-0000001,101,CNY,,,Item 1")

    first = run(["expect", "--csv", str(csv_file)])
    again = run(["expect", "--csv", str(csv_file)])

    assert first.stdout == f"Registered 3 payment(s) from {csv_file}.\n"
    assert again.stdout == (
        f"Registered 0 payment(s) from {csv_file}; 3 already registered with the same data.\n"
    )


_PEAK_RSS = (
    "import resource, sys\n"
    "from payhooks.receiver.script import payhooks\n"
    "payhooks.main(sys.argv[1:], standalone_mode=False)\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
)


def _peak_rss_kib(csv_file: Path, database: Path) -> int:
    """Run ``payhooks expect --csv`` in its own process; its peak resident size (Linux: KiB)."""
    args = ["expect", "--csv", str(csv_file), "--database", str(database)]
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return int(done.stderr.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux")
def test_expect_csv_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    """40,000 rows take no more memory than 1,000: keeping every row costs about 180 bytes
    each (7 MB here, measured at 18 MB for 100,000), well over the 4 MB allowed for noise."""
    small, large = tmp_path / "small.csv", tmp_path / "large.csv"
    _write_rows(small, 1_000)
    _write_rows(large, 40_000)

    baseline = _peak_rss_kib(small, tmp_path / "small.db")
    peak = _peak_rss_kib(large, tmp_path / "large.db")

    assert peak - baseline < 4_000, (baseline, peak)
    assert len(_payments(tmp_path / "large.db")) == 40_000


def test_a_description_may_look_like_a_negative_number() -> None:
    result = run(["expect", "order-1", "100", "CNY", "--description", "-5"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("amount", ["0", "-5"])
def test_a_csv_row_with_no_amount_or_a_negative_one_is_refused(amount: str) -> None:
    Path("expected.csv").write_text(
        f"external_identifier,amount_minor,currency\no-1,{amount},CNY\n"
    )
    result = run(["expect", "--csv", "expected.csv"])
    assert result.exit_code == 1, result.output
    assert "amount_minor" in result.stderr
    assert "1 or more minor units" in result.stderr
