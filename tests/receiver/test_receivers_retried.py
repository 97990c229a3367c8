"""A receiver that raises keeps its signal owed until it returns: retried alone, with a
backoff, parked after its last round, re-run by a person, and a payment's order kept.

In process, through the real endpoint and the real ``flask payhooks signals`` command, on the
test's ledger (both engines). Time is not faked: ``--now`` runs what waits for its backoff.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.receiver import signals
from payhooks.receiver.checks import evaluate
from payhooks.receiver.pipeline import error_text
from payhooks.storage import Ledger
from tests.support.app import AppFactory, BodyFactory, SignFunction


@dataclass
class Warehouse:
    """The shop's shipping receiver: raises while ``down``; ships each order once."""

    down: bool = False
    calls: int = 0
    shipped: list[str] = field(default_factory=list)

    def __call__(self, sender: Flask, *, outcome: Any, **extra: Any) -> None:
        self.calls += 1
        if self.down:
            raise RuntimeError(f"warehouse API down while shipping {outcome.external_identifier}")
        if outcome.external_identifier not in self.shipped:
            self.shipped.append(outcome.external_identifier)


@dataclass
class Mailer:
    """A second receiver of the same signal, which always returns."""

    sent: list[int] = field(default_factory=list)

    def __call__(self, sender: Flask, *, outcome_id: int, **extra: Any) -> None:
        self.sent.append(outcome_id)


@pytest.fixture
def app(make_app: AppFactory) -> Flask:
    return make_app(PAYHOOKS_SIGNALS_MAX_ATTEMPTS=2, PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS=60)


@pytest.fixture
def warehouse(app: Flask) -> Warehouse:
    receiver = Warehouse(down=True)
    signals.payment_succeeded.connect(receiver, sender=app)
    return receiver


@pytest.fixture
def mailer(app: Flask) -> Mailer:
    receiver = Mailer()
    signals.payment_succeeded.connect(receiver, sender=app)
    return receiver


def _pay(
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    identifier: str = "order-1",
) -> int:
    ledger.expect_transaction(identifier, 2500, "CNY")
    body = make_body("wallet", external_identifier=identifier, transaction_id=f"ll-{identifier}")
    answer = client.post("/payhooks/notifications", data=body, headers=sign(body))
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return int(answer.get_json()["delivery_id"])


def _signals(app: Flask, *args: str) -> Any:
    return app.test_cli_runner().invoke(args=["payhooks", "signals", *args])


def test_a_raise_keeps_the_signal_owed_and_the_retry_runs_only_the_receiver_that_raised(
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    warehouse: Warehouse,
    mailer: Mailer,
) -> None:
    delivery_id = _pay(client, ledger, make_body, sign)

    (owed,) = ledger.signals.owed()
    assert (owed.signal, owed.attempts, owed.parked_at) == ("payment-succeeded", 1, None)
    assert "warehouse API down while shipping order-1" in (owed.error or "")
    assert owed.next_attempt_at is not None
    stored = ledger.receiver.delivery(delivery_id)
    assert stored is not None
    assert "warehouse API down" in (stored.signal_error or "")

    waiting = _signals(app, "--send")  # its backoff is a minute: nothing is due
    warehouse.down = False
    retried = _signals(app, "--send", "--now")

    assert waiting.exit_code == 0, waiting.output
    assert "Nothing was run: no owed signal was due." in waiting.output
    assert "1 waiting for a retry" in waiting.output
    assert retried.exit_code == 0, retried.output
    assert "Ran 1 receiver(s) for 1 delivery(ies): 1 returned, 0 raised." in retried.output
    assert warehouse.shipped == ["order-1"]
    assert len(mailer.sent) == 1  # it returned the first time: never run again
    assert ledger.signals.owed() == []
    stored = ledger.receiver.delivery(delivery_id)
    assert stored is not None
    assert stored.signal_error is None
    runs = [
        (run.receiver.rsplit(".", 1)[-1], run.error is None)
        for run in ledger.signals.runs([delivery_id])
    ]
    assert sorted(runs) == sorted([("Warehouse", False), ("Mailer", True), ("Warehouse", True)])


def test_the_last_round_parks_the_signal_and_only_retry_parked_runs_it(
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    warehouse: Warehouse,
) -> None:
    _pay(client, ledger, make_body, sign)

    second = _signals(app, "--now")  # round 2 of 2 raises: parked
    (parked,) = ledger.signals.owed()
    listed = _signals(app)
    now_only = _signals(app, "--now")
    warehouse.down = False
    rerun = _signals(app, "--retry-parked")

    assert second.exit_code == 1
    assert "1 raised (1 signal(s) parked)" in second.output
    assert parked.parked_at is not None
    assert parked.attempts == 2
    assert listed.exit_code == 0
    assert "parked" in listed.output
    assert "0 due, 0 waiting for a retry, 1 parked" in listed.output
    assert "Nothing was run" in now_only.output
    assert rerun.exit_code == 0, rerun.output
    assert "1 returned, 0 raised" in rerun.output
    assert warehouse.shipped == ["order-1"]
    assert warehouse.calls == 3
    assert ledger.signals.owed() == []


@pytest.fixture
def refunded_behind_parked(
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    warehouse: Warehouse,
) -> list[str]:
    """order-1 paid, its payment-succeeded parked (the warehouse down), then refunded: the
    payment statuses whose notification_received ran so far (a list that grows)."""
    heard: list[str] = []

    def on_any(sender: Flask, *, outcome: Any, **extra: Any) -> None:
        heard.append(outcome.payment_status)

    signals.notification_received.connect(on_any, sender=app, weak=False)
    _pay(client, ledger, make_body, sign)
    _signals(app, "--now")  # round 2 of 2 raises: parked
    refund = make_body(
        "wallet", external_identifier="order-1", transaction_id="ll-order-1", status="RF"
    )
    answer = client.post("/payhooks/notifications", data=refund, headers=sign(refund))
    assert answer.status_code == 200
    return heard


def test_a_payments_later_signals_wait_behind_its_parked_one_and_follow_once_it_returns(
    app: Flask, ledger: Ledger, warehouse: Warehouse, refunded_behind_parked: list[str]
) -> None:
    heard = refunded_behind_parked

    assert heard == ["PS"]  # the refund's signals wait behind the parked payment-succeeded
    assert {s.signal for s in ledger.signals.owed()} >= {"notification-received"}

    warehouse.down = False
    rerun = _signals(app, "--retry-parked", "--identifier", "order-1")

    assert rerun.exit_code == 0, rerun.output
    assert heard == ["PS", "RF"]
    assert ledger.signals.owed() == []


def test_the_identifier_option_runs_one_payments_signals_only(
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    warehouse: Warehouse,
) -> None:
    _pay(client, ledger, make_body, sign, "order-1")
    _pay(client, ledger, make_body, sign, "order-2")
    warehouse.down = False

    ran = _signals(app, "--now", "--identifier", "order-2")
    listed = _signals(app, "--identifier", "order-2")

    assert ran.exit_code == 0, ran.output
    assert warehouse.shipped == ["order-2"]
    assert [s.signal for s in ledger.signals.owed(identifier="order-1")] == ["payment-succeeded"]
    assert listed.output.strip() == "No signal is owed for order-2."


def test_the_receivers_check_fails_on_a_parked_signal_and_names_it(
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    warehouse: Warehouse,
) -> None:
    _pay(client, ledger, make_body, sign)
    retrying = {r.name: r for r in evaluate(ledger.vitals()).results}["receivers"]
    _signals(app, "--now")
    checked = app.test_cli_runner().invoke(args=["payhooks", "check", "--format", "json"])

    assert retrying.ok  # one round raised a moment ago: within the hour
    assert "1 signal(s) owed after a receiver raised, 0 of them parked" in retrying.detail
    assert checked.exit_code == 1
    report = json.loads(checked.output.splitlines()[0])
    (receivers,) = [c for c in report["checks"] if c["name"] == "receivers"]
    assert receivers["ok"] is False
    assert "1 of them parked" in receivers["detail"]
    assert "2 receiver run(s) raised in the last 24h" in receivers["detail"]


def test_a_dismissed_parked_signal_lets_the_payments_later_signals_follow_unrun(
    app: Flask, ledger: Ledger, warehouse: Warehouse, refunded_behind_parked: list[str]
) -> None:
    heard = refunded_behind_parked
    (parked,) = [s for s in ledger.signals.owed() if s.parked_at is not None]

    dismissed = _signals(app, "--dismiss", str(parked.id))
    again = _signals(app, "--dismiss", str(parked.id))
    _signals(app, "--send")

    assert dismissed.exit_code == 0, dismissed.output
    assert f"Signal #{parked.id} (payment-succeeded of outcome #" in dismissed.output
    assert "marked handled without running its receivers" in dismissed.output
    assert again.exit_code == 1
    assert "is not owed" in again.output
    assert warehouse.calls == 2  # never run for the dismissal
    assert heard == ["PS", "RF"]
    assert ledger.signals.owed() == []
    story = ledger.story("order-1")
    assert story is not None
    dismissals = [s for s in story.of("signal") if s["dismissed_at"] is not None]
    assert [s["signal"] for s in dismissals] == ["payment-succeeded"]


@pytest.mark.parametrize(
    "message",
    ["NUL \x00 in the message", "line one\nline two"],
    ids=["nul", "two-lines"],
)
def test_any_error_a_receiver_raises_is_stored_so_the_signal_can_park(
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    message: str,
) -> None:
    def broken(sender: Flask, **extra: Any) -> None:
        raise RuntimeError(message)

    signals.payment_succeeded.connect(broken, sender=app)
    _pay(client, ledger, make_body, sign)

    (owed,) = ledger.signals.owed()
    assert owed.attempts == 1
    assert owed.error is not None
    assert "\x00" not in owed.error
    kept = message.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    assert owed.error.endswith(kept)


def test_error_text_keeps_what_neither_engine_can_store_as_escapes() -> None:
    class Unreadable(Exception):
        def __str__(self) -> str:
            raise ValueError("no message")

    assert error_text(RuntimeError("a\x00b\ud800c")) == "RuntimeError: a\\x00b\\ud800c"
    assert error_text(Unreadable()) == "Unreadable: (its message could not be read)"
    assert len(error_text(RuntimeError("x" * 10_000))) == 500
