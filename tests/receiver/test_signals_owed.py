"""Signals owed until sent, in process: what the ledger keeps, who may send them once their
sender died (a retry, the next delivery, ``flask payhooks signals --send``) and when.

A receiver that raises ``BaseException`` (not an ``Exception``: the sender catches those and
counts the signal as sent) stops the sending before the mark, as a dying worker would, without
leaving this process: its claim stays until the lease passes. The system test kills real
workers.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.receiver import signals
from payhooks.storage import Ledger
from tests.support.app import AppFactory, BodyFactory, SignFunction

#: Owed signals, on each engine (tests/conftest.py: engines are opt-in here).
pytestmark = pytest.mark.both_engines


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


#: Long enough that a claim made in a fixture is still held when the test looks, on a loaded
#: machine too (at 1 s, a slow CLI start let it lapse first); each test waits it out once.
LEASE_SECONDS = 3


@pytest.fixture
def app(make_app: AppFactory) -> Flask:
    return make_app(PAYHOOKS_SIGNALS_LEASE_SECONDS=LEASE_SECONDS)


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


def _paid_order(
    client: FlaskClient, ledger: Ledger, make_body: BodyFactory, sign: SignFunction, number: int
) -> None:
    ledger.expect_transaction(f"order-{number}", 2500, "CNY")
    body = make_body("wallet", external_identifier=f"order-{number}", transaction_id=f"ll-{number}")
    assert _post(client, body, sign(body)).status_code == 200


@pytest.mark.sqlite_only  # reads the SQLite file itself
def test_a_new_outcome_owes_its_signals_until_they_ran_and_are_marked(
    app: Flask, client: FlaskClient, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    shipper = Shipper()
    signals.payment_succeeded.connect(shipper, sender=app)

    _paid_order(client, ledger, make_body, sign, 1)

    assert len(shipper.calls) == 1
    assert ledger.signals.owed() == []
    rows = ledger.database.execute("SELECT signal, sent_at FROM owed_signals").fetchall()
    assert sorted(signal for signal, _ in rows) == ["notification-received", "payment-succeeded"]
    assert all(sent_at is not None for _, sent_at in rows)


def test_signals_left_owed_are_kept_with_their_outcome(
    owed_delivery: tuple[bytes, dict[str, str]], ledger: Ledger, shipper: Shipper
) -> None:
    owed = ledger.signals.owed()

    assert [row.signal for row in owed] == ["notification-received", "payment-succeeded"]
    assert {row.outcome_id for row in owed} == set(shipper.shipped)
    assert {row.reconciliation for row in owed} == {"paid"}


def test_a_sender_that_died_holds_its_claim_until_the_lease_passes_then_a_retry_sends(
    owed_delivery: tuple[bytes, dict[str, str]],
    client: FlaskClient,
    ledger: Ledger,
    shipper: Shipper,
) -> None:
    body, headers = owed_delivery

    answer = _post(client, body, headers)  # within the lease: its sender may still be at it

    assert answer.get_json()["status"] == "duplicate"
    assert len(shipper.calls) == 1
    time.sleep(LEASE_SECONDS + 0.1)
    _post(client, body, headers)
    assert len(shipper.calls) == 2  # at least once: it heard of the outcome again
    assert len(shipper.shipped) == 1  # and, checking the outcome id, shipped once
    _post(client, body, headers)
    assert len(shipper.calls) == 2
    assert ledger.signals.owed() == []


def test_the_next_delivery_of_another_payment_sends_what_a_dead_sender_left(
    owed_delivery: tuple[bytes, dict[str, str]],
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    shipper: Shipper,
) -> None:
    time.sleep(LEASE_SECONDS + 0.1)
    _paid_order(client, ledger, make_body, sign, 2)
    assert len(shipper.calls) == 3  # order-1 again (its lease passed), and order-2
    assert len(shipper.shipped) == 2
    assert ledger.signals.owed() == []


def test_the_signals_command_lists_what_is_owed_and_sends_what_nobody_holds(
    owed_delivery: tuple[bytes, dict[str, str]], app: Flask, ledger: Ledger, shipper: Shipper
) -> None:
    runner = app.test_cli_runner()

    listed = runner.invoke(args=["payhooks", "signals"])
    held = runner.invoke(args=["payhooks", "signals", "--send"])
    time.sleep(LEASE_SECONDS + 0.1)
    sent = runner.invoke(args=["payhooks", "signals", "--send"])
    again = runner.invoke(args=["payhooks", "signals"])

    assert listed.exit_code == 0, listed.output
    assert "payment-succeeded" in listed.output
    assert "2 signal(s) owed" in listed.output
    assert held.exit_code == 0, held.output
    assert "Nothing was run: no owed signal was due." in held.output
    assert "Still owed: 2 signal(s), 0 waiting for a retry" in held.output
    assert "2 held by another sender" in held.output
    assert sent.exit_code == 0, sent.output
    assert "Ran 1 receiver(s) for 1 delivery(ies): 1 returned, 0 raised." in sent.output
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
