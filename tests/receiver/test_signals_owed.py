"""Signals owed until sent, in process: what the ledger keeps, what a redelivery and
``flask payhooks signals`` send.

A receiver that raises ``BaseException`` (not an ``Exception``: the sender catches those and
counts the signal as sent) stops the sending before the mark, as a dying worker would, without
leaving this process. The system test kills real workers.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.receiver import signals
from payhooks.receiver.pipeline.sent_marks import SentMarks
from payhooks.receiver.state import receiver_state
from payhooks.storage import Ledger
from tests.support.app import AppFactory, BodyFactory, SignFunction


class WorkerDied(BaseException):
    """Stands for the worker's death between the commit and the mark."""


class Shipper:
    """A receiver that ships once per outcome_id, and can die once after shipping."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.shipped: list[int] = []
        self.die_once = False

    def __call__(self, sender: Flask, *, outcome_id: int, **extra: Any) -> None:
        self.calls.append(outcome_id)
        if outcome_id not in self.shipped:
            self.shipped.append(outcome_id)
        if self.die_once:
            self.die_once = False
            raise WorkerDied


def _post(client: FlaskClient, body: bytes, headers: dict[str, str]) -> Any:
    return client.post("/payhooks/notifications", data=body, headers=headers)


@pytest.fixture
def shipper(app: Flask) -> Shipper:
    receiver = Shipper()
    signals.payment_succeeded.connect(receiver, sender=app)
    return receiver


@pytest.fixture
def owed_delivery(
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    shipper: Shipper,
) -> tuple[bytes, dict[str, str]]:
    """A paid order whose signals were left owed: the receiver died after shipping."""
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("wallet")
    headers = sign(body, msg_id="msg_owed")
    shipper.die_once = True
    with pytest.raises(WorkerDied):
        _post(client, body, headers)
    return body, headers


def _marks(app: Flask) -> SentMarks:
    marks = receiver_state(app).sent_marks
    assert marks is not None
    return marks


def _paid_order(
    client: FlaskClient, ledger: Ledger, make_body: BodyFactory, sign: SignFunction, number: int
) -> None:
    ledger.expect_transaction(f"order-{number}", 2500, "CNY")
    body = make_body("wallet", external_identifier=f"order-{number}", transaction_id=f"ll-{number}")
    assert _post(client, body, sign(body)).status_code == 200


@pytest.mark.sqlite_only  # reads the SQLite file itself
@pytest.mark.parametrize("delay_ms", [0, 10_000], ids=["marked-at-once", "mark-waits"])
def test_a_new_outcome_owes_its_signals_until_they_ran_and_are_marked(
    make_app: AppFactory,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    delay_ms: int,
) -> None:
    app = make_app(PAYHOOKS_SIGNALS_MARK_DELAY_MS=delay_ms)
    shipper = Shipper()
    signals.payment_succeeded.connect(shipper, sender=app)

    _paid_order(app.test_client(), ledger, make_body, sign, 1)

    assert len(shipper.calls) == 1
    owed = {row.signal for row in ledger.owed_signals()}
    if delay_ms:  # ran, and the mark waits for the worker's next write
        assert owed == {"notification-received", "payment-succeeded"}
        assert _marks(app).waiting() == 1
        _marks(app).close()
    assert ledger.owed_signals() == []
    rows = ledger.database.execute("SELECT signal, sent_at FROM owed_signals").fetchall()
    assert sorted(signal for signal, _ in rows) == ["notification-received", "payment-succeeded"]
    assert all(sent_at is not None for _, sent_at in rows)


def test_the_next_delivery_writes_the_waiting_mark_in_its_commit(
    make_app: AppFactory, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    app = make_app(PAYHOOKS_SIGNALS_MARK_DELAY_MS=10_000)  # the thread would wait 10 s
    client = app.test_client()
    _paid_order(client, ledger, make_body, sign, 1)

    _paid_order(client, ledger, make_body, sign, 2)

    assert {row.outcome_id for row in ledger.owed_signals()} == {2}
    assert _marks(app).waiting() == 1


@pytest.mark.sqlite_only  # locks the SQLite file itself
def test_a_delivery_that_cannot_be_stored_leaves_the_mark_it_took_waiting(
    make_app: AppFactory, ledger: Ledger, make_body: BodyFactory, sign: SignFunction, database: Path
) -> None:
    app = make_app(PAYHOOKS_SIGNALS_MARK_DELAY_MS=10_000, PAYHOOKS_BUSY_TIMEOUT_MS=50)
    client = app.test_client()
    _paid_order(client, ledger, make_body, sign, 1)
    ledger.expect_transaction("order-2", 2500, "CNY")
    body = make_body("wallet", external_identifier="order-2", transaction_id="ll-2")
    blocker = sqlite3.connect(database, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        refused = _post(client, body, sign(body))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()

    assert refused.status_code == 503
    assert _marks(app).waiting() == 1  # taken by the failed transaction, and put back
    assert {row.outcome_id for row in ledger.owed_signals()} == {1}
    assert _post(client, body, sign(body)).status_code == 200  # the retry carries it
    assert {row.outcome_id for row in ledger.owed_signals()} == {2}


def test_a_mark_no_delivery_carries_is_written_by_the_workers_thread(
    make_app: AppFactory, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    app = make_app(PAYHOOKS_SIGNALS_MARK_DELAY_MS=50)
    _paid_order(app.test_client(), ledger, make_body, sign, 1)

    deadline = time.monotonic() + 10
    while ledger.owed_signals() and time.monotonic() < deadline:
        time.sleep(0.02)

    assert ledger.owed_signals() == []
    assert _marks(app).waiting() == 0


def test_signals_left_owed_are_kept_with_their_outcome(
    owed_delivery: tuple[bytes, dict[str, str]], ledger: Ledger, shipper: Shipper
) -> None:
    owed = ledger.owed_signals()

    assert [row.signal for row in owed] == ["notification-received", "payment-succeeded"]
    assert {row.outcome_id for row in owed} == set(shipper.shipped)
    assert {row.reconciliation for row in owed} == {"paid"}


def test_the_retry_of_the_same_delivery_sends_what_is_owed_and_the_receiver_acts_once(
    owed_delivery: tuple[bytes, dict[str, str]],
    client: FlaskClient,
    ledger: Ledger,
    shipper: Shipper,
) -> None:
    body, headers = owed_delivery

    answer = _post(client, body, headers)

    assert answer.get_json()["status"] == "duplicate"
    assert len(shipper.calls) == 2  # at least once: it heard of the outcome again
    assert len(shipper.shipped) == 1  # and, checking the outcome id, shipped once
    # A further retry finds nothing owed to send: the mark was written, by its commit (it
    # carries the waiting marks first) or by the worker's thread if that came first.
    _post(client, body, headers)
    assert len(shipper.calls) == 2
    assert ledger.owed_signals() == []


def test_the_signals_command_lists_what_is_owed_and_sends_it(
    owed_delivery: tuple[bytes, dict[str, str]], app: Flask, ledger: Ledger, shipper: Shipper
) -> None:
    runner = app.test_cli_runner()

    listed = runner.invoke(args=["payhooks", "signals"])
    sent = runner.invoke(args=["payhooks", "signals", "--send"])
    again = runner.invoke(args=["payhooks", "signals"])

    assert listed.exit_code == 0, listed.output
    assert "payment-succeeded" in listed.output
    assert "2 signal(s) owed" in listed.output
    assert sent.exit_code == 0, sent.output
    assert "Sent 2 signal(s) for 1 outcome(s)." in sent.output
    assert again.output.strip() == "No signal is owed."
    assert len(shipper.calls) == 2
    assert len(shipper.shipped) == 1


def test_the_signals_command_outside_the_app_lists_but_cannot_send(
    owed_delivery: tuple[bytes, dict[str, str]], database: Any
) -> None:
    from tests.support.cli import run

    listed = run(["signals", "--database", str(database)])
    refused = run(["signals", "--send", "--database", str(database)])

    assert listed.exit_code == 0, listed.output
    assert "2 signal(s) owed" in listed.output
    assert refused.exit_code == 2
    assert "flask payhooks signals" in refused.stderr
