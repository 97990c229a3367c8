"""``payhooks deliveries``: deliveries stored by the real receiver, listed, shown and exported,
on each engine."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.storage import Ledger
from tests.support.app import BodyFactory, SignFunction
from tests.support.cli import clean_env, json_lines, run
from tests.support.live_server import LiveServer

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")

NOTIFY = "/payhooks/notifications"
NEXT_PAGE = re.compile(r"pass --before (\d+) for the next page")


class Deliveries:
    """What the receiver stored: each delivery's id by name, and the moment between the
    first three and the last two."""

    def __init__(self, database: Path | str) -> None:
        self.database = str(database)
        self.ids: dict[str, int] = {}
        self.middle = datetime.now(UTC)

    def run(self, *args: str, env: dict[str, str] | None = None) -> Any:
        return run(["deliveries", *args, "--database", self.database], env=env)


@pytest.fixture
def stored(
    client: FlaskClient, make_body: BodyFactory, sign: SignFunction, database: Path | str
) -> Deliveries:
    """Five deliveries through the receiver (two processed, a malformed one, a duplicate, an
    invalid payload) and two forged requests it refused."""
    found = Deliveries(database)
    posts: list[tuple[str, bytes, int]] = [
        ("paid", make_body(external_identifier="order-1", transaction_id="ll-1"), 200),
        (
            "other",
            make_body(external_identifier="order-2", transaction_id="ll-2", amount="10.00"),
            200,
        ),
        ("malformed", b'{"merchant_transaction_id": "order-9", ', 400),
        (
            "duplicate",
            make_body(external_identifier="order-2", transaction_id="ll-2", amount="10.00"),
            200,
        ),
        ("invalid", b'{"merchant_transaction_id": "order-3"}', 422),
    ]
    for position, (name, body, status) in enumerate(posts):
        if position == 3:
            found.middle = datetime.now(UTC)
        answer = client.post(NOTIFY, data=body, headers=sign(body, msg_id=f"msg_{name}"))
        assert answer.status_code == status, answer.get_data(as_text=True)
    for n in range(2):
        forged = client.post(
            NOTIFY, data=b'{"forged": true}', headers={"webhook-id": f"x{n}"} | _bad_signature()
        )
        assert forged.status_code == 401
    with Ledger(database) as ledger:
        for row in ledger.receiver.delivery_log().rows:
            found.ids[row.dedupe_key.removeprefix("msg_")] = row.id
    return found


def _bad_signature() -> dict[str, str]:
    return {
        "webhook-timestamp": str(int(datetime.now(UTC).timestamp())),
        "webhook-signature": "v1," + base64.b64encode(b"\0" * 32).decode(),
    }


def _listed(stored: Deliveries, *args: str) -> list[int]:
    result = stored.run("list", "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return [record["id"] for record in json_lines(result.stdout)]


def test_list_shows_every_delivery_newest_first_and_counts_them(stored: Deliveries) -> None:
    result = stored.run("list")

    assert result.exit_code == 0, result.output
    header, *rows, footer = result.stdout.splitlines()
    assert header.split()[:5] == ["ID", "RECEIVED", "STATUS", "TRIES", "IDENTIFIER"]
    assert [int(row.split()[0]) for row in rows] == sorted(stored.ids.values(), reverse=True)
    paid = next(row for row in rows if int(row.split()[0]) == stored.ids["paid"]).split()
    assert paid[2:5] == ["processed", "1", "order-1"]
    assert paid[6:9] == ["PS", "25.00", "CNY"]
    assert footer == "5 delivery(ies) match."


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--status", "malformed_json"], ["malformed"]),
        (["--status", "processed", "--status", "duplicate"], ["duplicate", "other", "paid"]),
        (["--identifier", "order-2"], ["duplicate", "other"]),
        (["--status", "conflicting_outcome"], []),
        (["--code", "PS"], ["duplicate", "other", "paid"]),
        (["--error", "invalid_payload"], ["invalid"]),
        (["--error", "signal_error"], []),
        (["--search", "order-"], ["invalid", "duplicate", "other", "paid"]),
        (["--search", "msg_paid"], ["paid"]),
        (["--search", "order-2", "--status", "duplicate", "--code", "PS"], ["duplicate"]),
    ],
    ids=[
        "status",
        "statuses",
        "identifier",
        "none",
        "code",
        "error",
        "signal-error",
        "identifier-prefix",
        "delivery-key",
        "together",
    ],
)
def test_list_filters_and_counts_the_same_rows(
    stored: Deliveries, args: list[str], expected: list[str]
) -> None:
    table = stored.run("list", *args)

    assert _listed(stored, *args) == [stored.ids[name] for name in expected]
    assert table.stdout.splitlines()[-1] == f"{len(expected)} delivery(ies) match."


def test_since_and_until_split_the_deliveries_at_a_moment(stored: Deliveries) -> None:
    middle = stored.middle.isoformat()

    assert _listed(stored, "--since", middle) == [stored.ids["invalid"], stored.ids["duplicate"]]
    assert _listed(stored, "--until", middle) == [
        stored.ids["malformed"],
        stored.ids["other"],
        stored.ids["paid"],
    ]


@pytest.mark.parametrize("output_format", ["table", "json"])
@pytest.mark.parametrize("limit", [1, 2, 4, 5])
def test_paging_with_before_reaches_every_delivery_exactly_once(
    stored: Deliveries, limit: int, output_format: str
) -> None:
    seen: list[int] = []
    before: list[str] = []
    for _ in range(10):
        result = stored.run("list", "--limit", str(limit), "--format", output_format, *before)
        assert result.exit_code == 0, result.output
        if output_format == "json":
            seen.extend(record["id"] for record in json_lines(result.stdout))
            footer = result.stderr.strip()
        else:
            seen.extend(int(line.split()[0]) for line in result.stdout.splitlines()[1:-1])
            footer = result.stdout.splitlines()[-1]
        assert footer.startswith("5 delivery(ies) match.")
        more = NEXT_PAGE.search(footer)
        if more is None:
            break
        before = ["--before", more.group(1)]

    assert seen == sorted(stored.ids.values(), reverse=True)


def test_refused_requests_are_listed_with_their_reason(stored: Deliveries) -> None:
    table = stored.run("list", "--refused")
    records = json_lines(stored.run("list", "--refused", "--format", "json").stdout)

    assert table.exit_code == 0, table.output
    assert table.stdout.splitlines()[-1] == "2 refused request(s) match."
    assert [line.split()[-1] for line in table.stdout.splitlines()[1:-1]] == [
        "invalid_signature",
        "invalid_signature",
    ]
    assert [record["reason"] for record in records] == ["invalid_signature"] * 2
    assert records[0]["id"] > records[1]["id"]
    assert records[0]["body_size"] == len(b'{"forged": true}')
    assert records[0]["remote_addr"] == "127.0.0.1"


def test_show_a_processed_delivery_gives_its_outcome_headers_and_laid_out_body(
    stored: Deliveries,
) -> None:
    result = stored.run("show", str(stored.ids["paid"]))

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"Delivery {stored.ids['paid']}"
    assert "  status:       processed" in lines
    assert any(re.fullmatch(r"  outcome:      \d+ PS 25\.00 CNY", line) for line in lines)
    assert "  webhook-id: msg_paid" in lines
    assert '    "merchant_transaction_id": "order-1",' in lines
    assert '      "payment_amount": "25.00",' in lines


def test_show_a_malformed_delivery_gives_its_error_and_the_body_escaped(
    stored: Deliveries,
) -> None:
    result = stored.run("show", str(stored.ids["malformed"]))

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "  status:       malformed_json" in lines
    assert any(
        line.startswith("  error:        ") and line != "  error:        -" for line in lines
    )
    assert lines[-2:] == [
        "  (not JSON; shown escaped)",
        '  {"merchant_transaction_id": "order-9", ',
    ]


def test_show_as_json_carries_the_exact_body_and_the_amount_as_a_string(
    stored: Deliveries, make_body: BodyFactory
) -> None:
    result = stored.run("show", str(stored.ids["paid"]), "--format", "json")

    record = json.loads(result.stdout)
    assert base64.b64decode(record["body_base64"]) == make_body(
        external_identifier="order-1", transaction_id="ll-1"
    )
    assert record["body"] == base64.b64decode(record["body_base64"]).decode()
    assert (record["amount"], record["currency"], record["status"]) == ("25.00", "CNY", "processed")
    assert record["headers"]["webhook-id"] == "msg_paid"


def test_show_of_no_such_delivery_exits_1_in_one_sentence(stored: Deliveries) -> None:
    result = stored.run("show", "999")

    assert result.exit_code == 1
    assert result.stderr == "Error: There is no delivery 999 in the ledger.\n"


def test_export_then_replay_sends_the_same_bytes_again(
    stored: Deliveries,
    live_server: LiveServer,
    secret: str,
    tmp_path: Path,
    db_rows: Callable[..., list[dict[str, Any]]],
) -> None:
    folder = tmp_path / "out" / "nested"
    paid = stored.ids["paid"]

    exported = stored.run(
        "export", str(paid), str(stored.ids["malformed"]), "--output", str(folder)
    )
    replayed = run(
        ["replay", str(folder / f"delivery-{paid}.json"), "--url", live_server.url + NOTIFY],
        env={"PAYHOOKS_SECRETS": secret},
    )

    assert exported.exit_code == 0, exported.output
    assert exported.stdout.splitlines()[0] == (
        f"Wrote {folder / f'delivery-{paid}.json'} ({len(_body(db_rows, paid))} bytes)."
    )
    assert (folder / f"delivery-{paid}.json").read_bytes() == _body(db_rows, paid)
    malformed = stored.ids["malformed"]
    assert (folder / f"delivery-{malformed}.json").read_bytes() == _body(db_rows, malformed)
    assert replayed.exit_code == 0, replayed.output
    assert "200 duplicate" in replayed.stdout  # the same outcome, from a new delivery
    newest = max(row["id"] for row in db_rows("SELECT id FROM deliveries"))
    assert _body(db_rows, newest) == _body(db_rows, paid)


def _body(db_rows: Callable[..., list[dict[str, Any]]], delivery_id: int) -> bytes:
    (row,) = db_rows("SELECT body FROM deliveries WHERE id = ?", delivery_id)
    return bytes(row["body"])


def test_export_never_overwrites_a_file_and_writes_nothing_then(
    stored: Deliveries, tmp_path: Path
) -> None:
    paid, other = stored.ids["paid"], stored.ids["other"]
    (tmp_path / f"delivery-{other}.json").write_bytes(b"mine")

    result = stored.run("export", str(paid), str(other), "--output", str(tmp_path))

    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {tmp_path / f'delivery-{other}.json'} exists already; it was not overwritten.\n"
    )
    assert (tmp_path / f"delivery-{other}.json").read_bytes() == b"mine"
    assert not (tmp_path / f"delivery-{paid}.json").exists()


def test_export_of_no_such_delivery_exits_1_and_writes_nothing(
    stored: Deliveries, tmp_path: Path
) -> None:
    result = stored.run("export", str(stored.ids["paid"]), "999", "--output", str(tmp_path / "o"))

    assert result.exit_code == 1
    assert result.stderr == "Error: There is no delivery 999 in the ledger.\n"
    assert not (tmp_path / "o").exists()


HOSTILE_IDENTIFIER = "ord\x1b]8;;evil\x07\u202eer\x9b2J"
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def test_a_hostile_body_and_identifier_are_printed_inert(
    client: FlaskClient, sign: SignFunction, database: Path | str
) -> None:
    """The identifier (over the schema's rules, so the delivery is refused, yet named in the
    body) and a body with escapes, bidi controls and a NUL reach the terminal as escapes."""
    hostile_json = json.dumps({"merchant_transaction_id": HOSTILE_IDENTIFIER}).encode()
    raw = b"\x1b[2J\x00\xe2\x80\xae{" + HOSTILE_IDENTIFIER.encode()
    for body in (hostile_json, raw):
        client.post(NOTIFY, data=body, headers=sign(body))
    stored = Deliveries(database)

    outputs = [
        stored.run("list"),
        stored.run("list", "--format", "json"),
        stored.run("show", "1"),
        stored.run("show", "2"),
        stored.run("show", "1", "--format", "json"),
        stored.run("show", "2", "--format", "json"),
    ]

    for result in outputs:
        assert result.exit_code == 0, result.output
        assert UNSAFE.search(result.stdout) is None, result.stdout
    assert "ord\\u001b]8;;evil\\u0007\\u202eer\\u009b2J" in outputs[2].stdout
    assert "  \\x1b[2J\\x00\\u202e{ord\\x1b]8;;evil\\x07\\u202eer\\x9b2J" in outputs[3].stdout
    shown = json.loads(outputs[5].stdout)
    assert base64.b64decode(shown["body_base64"]) == raw
    assert json.loads(outputs[4].stdout)["body"] == hostile_json.decode()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["list", "--since", "2026-11-02", "--until", "2026-11-01"], "is not after --since"),
        (["list", "--until", "2026-11-01", "--since", "2026-11-01"], "is not after --since"),
        (["list", "--since", "last tuesday"], "is not an ISO 8601 time"),
        (["list", "--refused", "--status", "processed"], "--refused lists requests"),
        (["list", "--refused", "--identifier", "order-1"], "--refused lists requests"),
        (["list", "--refused", "--search", "order-1"], "--refused lists requests"),
        (["list", "--refused", "--code", "PS"], "--refused lists requests"),
        (["list", "--error", "lost"], "--error"),
        (["list", "--search", ""], "--search"),
        (["list", "--limit", "0"], "--limit"),
        (["list", "--limit", "1001"], "--limit"),
        (["list", "--before", "0"], "--before"),
        (["list", "--status", "lost"], "--status"),
        (["show", "first"], "ID"),
        (["show", "1", "--format", "table"], "--format"),
        (["export", "1"], "--output"),
        (["export", "--output", "out"], "ID"),
    ],
)
def test_bad_usage_exits_2(stored: Deliveries, args: list[str], message: str) -> None:
    result = stored.run(*args)

    assert result.exit_code == 2, result.output
    assert message in result.stderr


@pytest.mark.parametrize("command", [["list"], ["show", "1"], ["export", "1", "--output", "o"]])
def test_a_file_that_is_not_a_ledger_is_refused_untouched(
    tmp_path: Path, command: list[str]
) -> None:
    other = tmp_path / "notes.db"
    other.write_text("not a ledger")

    result = run(["deliveries", *command, "--database", str(other)])
    missing = run(["deliveries", *command, "--database", str(tmp_path / "missing.db")])

    assert result.exit_code == 2, result.output
    assert other.read_text() == "not a ledger"
    assert missing.exit_code == 2, missing.output
    assert "There is no ledger at" in missing.stderr
    assert not (tmp_path / "o").exists()


def test_in_the_app_the_group_reads_the_app_s_ledger(app: Flask, stored: Deliveries) -> None:
    result = app.test_cli_runner().invoke(args=["payhooks", "deliveries", "list", "--limit", "1"])

    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == (
        f"5 delivery(ies) match. More remain: pass --before {stored.ids['invalid']} for the next "
        "page."
    )
