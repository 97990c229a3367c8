"""The receiver stores a delivery and what came of it in one commit, and acts only after it.

What must hold (docs/overview.md, "What payhooks does": the pipeline with steps 3 to 5 in one
transaction): no 2xx, 400 or 422 for bytes that are not stored; the answer and the signals come
after the commit; a ledger that cannot be written gives 503 with nothing half-written; a bug of
ours still stores the delivery, as ``processing_error``, before the 503.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.receiver import notification_received, payment_succeeded
from payhooks.receiver.state import receiver_state
from payhooks.storage import Ledger
from tests.support.app import AppFactory, BodyFactory, SignFunction

NOTIFY = "/payhooks/notifications"

Rows = Callable[..., list[dict[str, Any]]]

#: The receiver's commit path, on each engine (tests/conftest.py: engines are opt-in here).
pytestmark = pytest.mark.both_engines


class BrokenZone(tzinfo):
    """A configured zone that passes the start-up check (a time in 2000) and fails on every
    payment time after it: stands for a bug inside the parser."""

    def utcoffset(self, dt: datetime | None) -> timedelta:
        if dt is not None and dt.year == 2000:
            return timedelta(0)
        raise RuntimeError("a bug in the parser")

    def dst(self, dt: datetime | None) -> timedelta:
        return self.utcoffset(dt)

    def tzname(self, dt: datetime | None) -> str:
        return "broken"


@pytest.mark.sqlite_only  # reads or locks the SQLite file itself
def test_signal_receivers_see_the_delivery_and_its_outcome_committed(
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    database: Path,
    make_body: BodyFactory,
    sign: SignFunction,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    seen: list[tuple[Any, ...]] = []

    def look_from_another_connection(sender: Flask, **kwargs: Any) -> None:
        # Another connection sees only what is committed.
        conn = sqlite3.connect(database)
        try:
            seen.extend(
                conn.execute(
                    "SELECT d.status, o.transaction_id, r.state FROM deliveries AS d "
                    "JOIN outcomes AS o ON o.id = d.outcome_id "
                    "JOIN reconciliation AS r ON r.external_identifier = o.external_identifier"
                ).fetchall()
            )
        finally:
            conn.close()

    body = make_body("card")
    with payment_succeeded.connected_to(look_from_another_connection, sender=app):
        response = client.post(NOTIFY, data=body, headers=sign(body))

    assert response.status_code == 200
    assert seen == [("processed", "ll-1", "paid")]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "malformed_json"),
        (json.dumps({"ll_transaction_id": "ll-1"}).encode(), 422, "invalid_payload"),
    ],
)
def test_a_refused_body_is_answered_only_once_stored_with_its_error(
    body: bytes,
    status: int,
    code: str,
    client: FlaskClient,
    ledger: Ledger,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    response = client.post(NOTIFY, data=body, headers=sign(body))

    assert response.status_code == status
    (delivery,) = db_rows("SELECT status, error, body, attempts FROM deliveries")
    assert (delivery["status"], bytes(delivery["body"]), delivery["attempts"]) == (code, body, 1)
    assert json.loads(delivery["error"])["code"] == code


def _fill_the_disk_on_outcomes(app: Flask, ledger: Ledger) -> Callable[[], None]:
    """Make recording an outcome run out of space on the receiver's own connection (the test
    client serves on this thread), after the delivery's row fits; return the undo."""
    ledger.database.execute("CREATE TABLE ballast (filler BLOB)")
    ledger.database.execute(
        "CREATE TRIGGER fill_up AFTER INSERT ON outcomes "
        "BEGIN INSERT INTO ballast VALUES (zeroblob(1000000)); END"
    )
    conn = receiver_state(app).ledger.database.conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 40}")

    def undo() -> None:
        conn.execute("PRAGMA max_page_count = 1073741823")
        ledger.database.execute("DROP TRIGGER fill_up")

    return undo


@pytest.mark.sqlite_only  # reads or locks the SQLite file itself
def test_a_ledger_that_fails_mid_write_answers_503_and_keeps_nothing_half_written(
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("wallet")
    headers = sign(body, msg_id="msg_disk_full")
    undo = _fill_the_disk_on_outcomes(app, ledger)

    refused = client.post(NOTIFY, data=body, headers=headers)
    left_behind = db_rows("SELECT * FROM deliveries"), db_rows("SELECT * FROM outcomes")
    undo()
    retried = client.post(NOTIFY, data=body, headers=headers)

    assert refused.status_code == 503
    assert refused.get_json()["error"]["code"] == "storage_unavailable"
    assert left_behind == ([], [])
    assert (retried.status_code, retried.get_json()["status"]) == (200, "processed")
    (delivery,) = db_rows("SELECT status, attempts FROM deliveries")
    assert delivery == {"status": "processed", "attempts": 1}


def test_a_bug_while_parsing_still_stores_the_delivery_before_the_503(
    make_app: AppFactory,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = make_app(PAYHOOKS_PAYMENT_TIME_ZONE=BrokenZone())
    received: list[Any] = []
    body = make_body("wallet")

    with notification_received.connected_to(lambda sender, **kw: received.append(kw), sender=app):
        response = app.test_client().post(NOTIFY, data=body, headers=sign(body))

    assert response.status_code == 503
    assert response.get_json()["error"]["code"] == "processing_error"
    assert b"a bug in the parser" not in response.data
    (delivery,) = db_rows("SELECT status, error, body FROM deliveries")
    assert (delivery["status"], delivery["error"]) == ("processing_error", "RuntimeError")
    assert bytes(delivery["body"]) == body
    assert db_rows("SELECT * FROM outcomes") == []
    assert received == []
    assert "could not be parsed" in caplog.text


def test_a_delivery_left_by_a_bug_is_finished_by_the_retry_once_fixed(
    make_app: AppFactory,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("wallet")
    headers = sign(body, msg_id="msg_bug")
    make_app(PAYHOOKS_PAYMENT_TIME_ZONE=BrokenZone()).test_client().post(
        NOTIFY, data=body, headers=headers
    )

    retried = make_app().test_client().post(NOTIFY, data=body, headers=headers)

    assert retried.status_code == 200
    assert retried.get_json()["status"] == "processed"
    assert retried.get_json()["reconciliation"] == "paid"
    (delivery,) = db_rows("SELECT status, error, attempts FROM deliveries")
    assert delivery == {"status": "processed", "error": None, "attempts": 2}


def test_a_retry_is_parsed_with_the_timezone_header_that_was_stored(
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    # An earlier try stored the delivery with its `timezone` header and got no further.
    body = make_body("wallet", payment_time="20261121120000")
    ledger.receiver.record_delivery(
        dedupe_key="msg_zone", body=body, headers={"timezone": "+08:00"}
    )

    response = client.post(
        NOTIFY, data=body, headers={**sign(body, msg_id="msg_zone"), "timezone": "-05:00"}
    )

    assert response.status_code == 200
    assert db_rows("SELECT paid_at FROM outcomes") == [{"paid_at": "2026-11-21T04:00:00+00:00"}]


def test_a_finished_delivery_sent_again_only_counts_an_attempt(
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("wallet")
    headers = sign(body, msg_id="msg_twice")
    first = client.post(NOTIFY, data=body, headers=headers)
    before = db_rows("SELECT status, error, outcome_id, updated_at FROM deliveries")

    again = client.post(NOTIFY, data=body, headers=headers)

    assert again.get_json() == {**first.get_json(), "status": "duplicate"}
    after = db_rows("SELECT status, error, outcome_id, attempts FROM deliveries")
    assert [(row["status"], row["outcome_id"], row["attempts"]) for row in after] == [
        (before[0]["status"], before[0]["outcome_id"], 2)
    ]
    assert len(db_rows("SELECT * FROM outcomes")) == 1


def _transactions(app: Flask, post: Callable[[], Any]) -> list[str]:
    """The statements that open and close transactions while ``post`` runs, and the writes of
    marks of sent signals (``... SET sent_at ...``), on the app's connection."""
    statements: list[str] = []
    conn = receiver_state(app).ledger.database.conn
    conn.set_trace_callback(statements.append)
    try:
        assert post().status_code == 200
    finally:
        conn.set_trace_callback(None)
    kept = [
        "MARK" if "SET sent_at" in s else s
        for s in statements
        if s.startswith(("BEGIN", "SAVEPOINT", "COMMIT")) or "SET sent_at" in s
    ]
    return [s for n, s in enumerate(kept) if not (s == "MARK" and kept[n - 1] == "MARK")]


@pytest.mark.sqlite_only  # reads the statements SQLite runs
def test_a_delivery_is_stored_in_one_transaction_and_its_signals_marked_sent_after(
    make_app: AppFactory, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    # Savepoints would only undo a failed write alone, and the receiver never goes on after
    # one; on PostgreSQL each costs two round trips per write. The mark is written once the
    # receivers ran, after the answer.
    app = make_app()
    client = app.test_client()
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("card")

    assert _transactions(app, lambda: client.post(NOTIFY, data=body, headers=sign(body))) == [
        "BEGIN IMMEDIATE",
        "COMMIT",
        "BEGIN IMMEDIATE",
        "MARK",
        "COMMIT",
    ]
    assert ledger.signals.owed() == []


@pytest.mark.sqlite_only  # reads the statements SQLite runs
def test_a_new_outcomes_signals_are_sent_with_the_outcome_parsed_not_read_back(
    app: Flask, client: FlaskClient, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    received: list[Any] = []
    payment_succeeded.connect(lambda sender, **kw: received.append(kw), sender=app, weak=False)
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("card")
    statements: list[str] = []
    conn = receiver_state(app).ledger.database.conn
    conn.set_trace_callback(statements.append)
    try:
        assert client.post(NOTIFY, data=body, headers=sign(body)).status_code == 200
    finally:
        conn.set_trace_callback(None)
    assert not [s for s in statements if "FROM outcomes WHERE id" in s], statements
    (kwargs,) = received
    assert kwargs["outcome"] == ledger.receiver.outcome(kwargs["outcome_id"])
