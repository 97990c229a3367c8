"""``payhooks show``: one payment's story on the command line, over a ledger the app wrote.

The story is lived through the real paths (:mod:`tests.support.stories`), on each engine; the
hostile identifiers arrive as real signed notifications, as in ``test_cli_report_escaping``.
"""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.receiver.cli.common import terminal_text
from payhooks.receiver.cli.reports import REPORT_FIELDS
from payhooks.storage import Ledger
from tests.support.app import BodyFactory, SignFunction
from tests.support.cli import clean_env, run
from tests.support.stories import NOTIFY, RECEIVER_ERROR, STORY, live_the_story

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")

#: Identifiers that would drive a terminal, reorder what it shows, or draw lines of their own.
HOSTILE = [
    "\x1b[2J\x1b[31mpaid\x1b[0m",
    "order-9\n2026-11-21T12:00:00.000+00:00  outcome  forged",
    "order-\u202e1-gnp",
    "order-\u2066x\u2069",
    "back\\slash\x07bell\x7f",
    "line\u2028separator\x85next",
]


@pytest.fixture
def shop(
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    database: Path | str,
) -> str:
    """The app's ledger after ``order-1``'s whole story; its ``--database`` value."""
    live_the_story(app, client, ledger, make_body, sign)
    return str(database)


def _show(database: str, *args: str) -> Any:
    return run(["show", *args, "--database", database])


def _unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal would obey rather than show (line ends aside)."""
    bidi = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    return [
        char
        for char in text
        if char != "\n" and (unicodedata.category(char) in ("Cc", "Zl", "Zp") or char in bidi)
    ]


def test_text_is_a_header_then_one_line_per_event_oldest_first(shop: str) -> None:
    result = _show(shop, "order-1")

    assert result.exit_code == 0, result.output
    header, events = result.stdout.split("\n\n")
    assert header.splitlines() == [
        "payment                 order-1",
        "kind                    transaction",
        "state                   paid",
        "drift                   missed_notification",
        "expected                25.00 CNY",
        "received                25.00 CNY",
        "refused deliveries      1",
        "conflicting deliveries  1",
        "latest problem          invalid_payload: The notification is not valid: check "
        "payment_data.payment_amount.",
    ]
    lines = events.splitlines()
    assert [line.split()[1] for line in lines] == list(STORY)
    times = [datetime.fromisoformat(line.split()[0]) for line in lines]
    assert times == sorted(times)
    assert all(moment.utcoffset() == timedelta(0) for moment in times)


@pytest.mark.parametrize(
    ("position", "details"),
    [
        (0, ["transaction 25.00 CNY", "description Two teas", 'metadata {"table": 7}']),
        (1, ["#1 uncertain", "HTTP 503", "service_unavailable: try later"]),
        (2, ["#2 created", "HTTP 201", "service id ll-1"]),
        (3, ["#1 processed", "key msg-paid", "2 attempt(s)", "receiver error ", RECEIVER_ERROR]),
        (4, ["#1 ll-1 PS succeeded 25.00 CNY", "paid 2026-11-21T12:00:00.000+00:00"]),
        (5, ["notification-received (paid)", "sent "]),
        (6, ["payment-succeeded (paid)", "owed, retry at ", "1 round(s)", RECEIVER_ERROR]),
        (7, ["duplicate", "key msg-again", "1 attempt(s)", "outcome #1"]),
        (8, ["conflicting_outcome", "key msg-more", "error ", "amount"]),
        (9, ["invalid_payload", "key msg-bad", "error ", "payment_amount"]),
        (10, ["return", "result code Authorised"]),
        (11, ["ll-1 listed RS (refunded) 25.00 CNY", "last seen ", "drift missed_notification"]),
    ],
    ids=STORY,
)
def test_each_event_line_tells_its_details(shop: str, position: int, details: list[str]) -> None:
    result = _show(shop, "order-1")

    line = result.stdout.split("\n\n")[1].splitlines()[position]
    for detail in details:
        assert detail in line


def test_json_is_one_document_with_the_payment_and_its_events(shop: str) -> None:
    result = _show(shop, "order-1", "--format", "json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert set(document) == {"payment", "events"}
    assert set(document["payment"]) == set(REPORT_FIELDS)
    assert (
        document["payment"]
        | {
            "external_identifier": "order-1",
            "state": "paid",
            "expected_amount": "25.00",
            "received_amount": "25.00",
            "drift": "missed_notification",
            "refused_deliveries": 1,
            "conflicting_deliveries": 1,
        }
        == document["payment"]
    )
    events = document["events"]
    assert [event["kind"] for event in events] == list(STORY)
    assert all(datetime.fromisoformat(event["at"]).utcoffset() is not None for event in events)
    registration, outcome, sighting = events[0], events[4], events[11]
    assert registration["metadata"] == {"table": 7}
    assert registration["plan_amount"] is None
    assert (outcome["amount"], outcome["currency"], outcome["paid_at"]) == (
        "25.00",
        "CNY",
        "2026-11-21T12:00:00+00:00",
    )
    assert (sighting["amount"], sighting["drift"]) == ("25.00", "missed_notification")
    assert RECEIVER_ERROR in events[6]["error"]


def _floats_and_amounts(value: Any, key: str = "") -> list[tuple[str, Any]]:
    """Every float anywhere in ``value``, and every member whose name says amount."""
    found: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for name, member in value.items():
            found += _floats_and_amounts(member, name)
    elif isinstance(value, list):
        for member in value:
            found += _floats_and_amounts(member, key)
    elif isinstance(value, float) or "amount" in key:
        found.append((key, value))
    return found


def test_json_amounts_are_decimal_strings_never_numbers(shop: str) -> None:
    document = json.loads(_show(shop, "order-1", "--format", "json").stdout)

    found = _floats_and_amounts(document)

    assert ("amount", "25.00") in found  # the walk reaches the events' amounts
    assert all(isinstance(value, str | None) for _, value in found), found


@pytest.mark.parametrize("show_format", ["text", "json"])
def test_an_identifier_the_ledger_knows_nothing_about_is_exit_1_in_one_sentence(
    shop: str, show_format: str
) -> None:
    result = _show(shop, "order-2", "--format", show_format)

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == "Error: The ledger has nothing about 'order-2'.\n"


@pytest.mark.parametrize("identifier", HOSTILE)
def test_an_unknown_hostile_identifier_is_escaped_in_the_error(shop: str, identifier: str) -> None:
    result = _show(shop, identifier)

    assert result.exit_code == 1
    assert result.stderr == f"Error: The ledger has nothing about '{terminal_text(identifier)}'.\n"
    assert _unsafe(result.stderr) == []


@pytest.fixture
def hostile_shop(
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    database: Path | str,
) -> str:
    """Every hostile identifier registered with a hostile description, then paid by a signed
    notification whose transaction id is hostile too."""
    for number, identifier in enumerate(HOSTILE):
        ledger.expect_transaction(identifier, 2500, "CNY", description=f"{identifier} tea")
        body = make_body(external_identifier=identifier, transaction_id=f"{identifier}#{number}")
        response = client.post(NOTIFY, data=body, headers=sign(body))
        assert response.status_code == 200, response.get_json()
    return str(database)


@pytest.mark.parametrize("identifier", HOSTILE)
def test_a_hostile_identifier_is_escaped_in_text(hostile_shop: str, identifier: str) -> None:
    result = _show(hostile_shop, identifier)

    assert result.exit_code == 0, result.output
    assert _unsafe(result.stdout) == []
    lines = result.stdout.splitlines()
    assert lines[0] == f"payment                 {terminal_text(identifier)}"
    assert len(lines) == len(lines[: lines.index("")]) + 1 + 5  # the header, then five events
    assert f"description {terminal_text(identifier)} tea" in result.stdout


@pytest.mark.parametrize("identifier", HOSTILE)
def test_a_hostile_identifier_is_intact_in_json(hostile_shop: str, identifier: str) -> None:
    result = _show(hostile_shop, identifier, "--format", "json")

    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 1
    document = json.loads(result.stdout)
    assert document["payment"]["external_identifier"] == identifier
    registration, _, outcome, *_ = document["events"]
    assert registration["description"] == f"{identifier} tea"
    assert outcome["transaction_id"] == f"{identifier}#{HOSTILE.index(identifier)}"


def test_a_story_without_a_row_says_so_and_gives_a_payment_of_nulls(
    ledger: Ledger, database: Path | str
) -> None:
    ledger.receiver.record_return("stray", "cancel", None)

    text = _show(str(database), "stray")
    document = json.loads(_show(str(database), "stray", "--format", "json").stdout)

    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines()[1].startswith("state                   - (nothing")
    assert text.stdout.splitlines()[-1].split()[1:] == ["return", "cancel"]
    assert document["payment"] == dict.fromkeys(REPORT_FIELDS) | {"external_identifier": "stray"}
    assert [event["kind"] for event in document["events"]] == ["return"]


def test_flask_payhooks_show_reads_the_apps_ledger(shop: str, app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["payhooks", "show", "order-1", "--format", "json"])

    assert result.exit_code == 0, result.output
    assert [event["kind"] for event in json.loads(result.stdout)["events"]] == list(STORY)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Missing argument 'IDENTIFIER'"),
        (["order-1", "--format", "yaml"], "Invalid value for '--format'"),
    ],
)
def test_bad_usage_is_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    with Ledger(tmp_path / "ledger.db"):
        pass

    result = run(["show", *args, "--database", str(tmp_path / "ledger.db")])

    assert result.exit_code == 2
    assert message in result.stderr


def test_a_ledger_that_does_not_exist_is_bad_usage_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"

    result = run(["show", "order-1", "--database", str(missing)])

    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: There is no ledger at {missing}: pass --database or set PAYHOOKS_DATABASE.\n"
    )
    assert not missing.exists()


def test_another_applications_database_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    other = tmp_path / "shop.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    conn.close()
    before = other.read_bytes()

    result = run(["show", "order-1", "--database", str(other)])

    assert result.exit_code == 2
    assert "is not a payhooks ledger" in result.stderr
    assert other.read_bytes() == before
