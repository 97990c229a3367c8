"""The notifications the sandbox sends: their form per flow, their signature, and how they are
retried, logged, dropped and resent."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask, request

from payhooks.service.interface import TransactionShape
from payhooks.service.sandbox import (
    NotificationState,
    Sandbox,
    SandboxServer,
    SandboxSettings,
)
from payhooks.verify import get_verifier
from tests.support.app import TEST_SECRET
from tests.support.live_server import LiveServer
from tests.support.service import (
    MERCHANT,
    card_transaction,
    direct_wallet_transaction,
    orchestrator_transaction,
    wire,
)

FROZEN = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def make_sandbox() -> Iterator[Callable[..., Sandbox]]:
    made: list[Sandbox] = []

    def make(**settings: Any) -> Sandbox:
        sandbox = Sandbox(SandboxSettings(**settings), clock=lambda: FROZEN)
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()


def _payment_data(sandbox: Sandbox, request_: Any, outcome: str) -> dict[str, Any]:
    created = sandbox.create_transaction(MERCHANT, wire(request_))
    body = json.loads(sandbox.notification_body(sandbox.transaction(created["id"]), outcome))
    assert body["ll_transaction_id"] == created["id"]
    assert body["merchant_transaction_id"] == request_.external_identifier
    data: dict[str, Any] = body["payment_data"]
    return data


def test_the_card_form_carries_the_processors_intent_and_status(
    make_sandbox: Callable[..., Sandbox],
) -> None:
    sandbox = make_sandbox()
    request_ = card_transaction(
        card=card_transaction().card.__class__(
            number="4000000000003220", exp_month=1, exp_year=2030, cvc="123"
        )
    )
    created = sandbox.create_transaction(MERCHANT, wire(request_))
    data = json.loads(sandbox.notification_body(sandbox.transaction(created["id"]), "pay"))[
        "payment_data"
    ]
    assert data == {
        "payment_status": "PS",
        "payment_amount": "25.00",
        "payment_currency_code": "CNY",
        "payment_time": "20261121120000",
        "stripe_payment_intent_id": created["stripe_payment_intent_id"],
        "status": "succeeded",
    }


@pytest.mark.parametrize(
    ("outcome", "status", "result_code"),
    [("pay", "PS", "Authorised"), ("fail", "PF", "Refused"), ("cancel", "PC", "Cancelled")],
)
def test_the_orchestrator_form_carries_the_psp_reference_and_result_code(
    make_sandbox: Callable[..., Sandbox], outcome: str, status: str, result_code: str
) -> None:
    data = _payment_data(make_sandbox(), orchestrator_transaction(), outcome)
    assert data["payment_status"] == status
    assert data["result_code"] == result_code
    assert data["adyen_psp_reference"].isdigit()


def test_the_direct_wallet_sends_only_the_four_base_members(
    make_sandbox: Callable[..., Sandbox],
) -> None:
    data = _payment_data(make_sandbox(), direct_wallet_transaction(), "pay")
    assert set(data) == {
        "payment_status",
        "payment_amount",
        "payment_currency_code",
        "payment_time",
    }


@pytest.mark.parametrize(
    ("currency", "amount", "written"),
    [
        ("CNY", 2500, "25.00"),
        ("JPY", 2500, "2500.00"),
        ("KWD", 12345, "12.345"),
        ("KWD", 12340, "12.340"),
    ],
)
def test_the_amount_is_written_in_major_units_with_at_least_two_decimals(
    make_sandbox: Callable[..., Sandbox], currency: str, amount: int, written: str
) -> None:
    request_ = orchestrator_transaction(currency=currency, amount=amount)
    assert _payment_data(make_sandbox(), request_, "pay")["payment_amount"] == written


def test_payment_time_is_written_in_the_configured_zone(
    make_sandbox: Callable[..., Sandbox],
) -> None:
    sandbox = make_sandbox(payment_time_zone="Asia/Shanghai")
    assert _payment_data(sandbox, direct_wallet_transaction(), "pay")["payment_time"] == (
        "20261121200000"
    )


def test_the_status_codes_are_configurable(make_sandbox: Callable[..., Sandbox]) -> None:
    sandbox = make_sandbox(status_codes={"pay": "SUCCESS", "fail": "PF", "cancel": "PC"})
    assert _payment_data(sandbox, direct_wallet_transaction(), "pay")["payment_status"] == (
        "SUCCESS"
    )


def test_a_shape_is_chosen_by_the_configured_method_names(
    make_sandbox: Callable[..., Sandbox],
) -> None:
    sandbox = make_sandbox(card_processors=frozenset({"checkout_com"}))
    created = sandbox.create_transaction(MERCHANT, wire(card_transaction(method="checkout_com")))
    assert sandbox.transaction(created["id"]).shape is TransactionShape.CARD
    assert "checkout_com_payment_intent_id" in created


# -- delivery over HTTP ----------------------------------------------------------------------


class _Receiver:
    """A merchant endpoint that fails its first ``failures`` requests, recording each."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        self.app = Flask("flaky_receiver")
        self.app.add_url_rule("/hook", view_func=self.hook, methods=["POST"])

    def hook(self) -> tuple[str, int]:
        with self.lock:
            self.received.append((dict(request.headers), request.get_data()))
            return ("no", 503) if len(self.received) <= self.failures else ("ok", 200)


@pytest.mark.system
def test_a_notification_is_retried_with_backoff_until_delivered(
    serve: Callable[[Flask], LiveServer], start_sandbox: Callable[..., SandboxServer]
) -> None:
    receiver = _Receiver(failures=2)
    url = serve(receiver.app).url
    sandbox = start_sandbox(notification_url=f"{url}/hook", notify_attempts=4, notify_backoff=0.1)
    created = sandbox.sandbox.create_transaction(MERCHANT, wire(direct_wallet_transaction()))
    sandbox.settle(created["id"], "pay")
    assert sandbox.wait_for_notifications(10)
    (notification,) = sandbox.notifications()
    assert notification.state is NotificationState.DELIVERED
    assert [t.status for t in notification.tries] == [503, 503, 200]
    gaps = [
        (later.at - earlier.at).total_seconds()
        for earlier, later in zip(notification.tries, notification.tries[1:], strict=False)
    ]
    assert gaps[0] >= 0.1
    assert gaps[1] >= 0.2  # doubled
    # Every try is signed again under one webhook-id, and each verifies.
    verifier = get_verifier("standard-webhooks", TEST_SECRET)
    ids = set()
    for headers, body in receiver.received:
        assert body == notification.body
        ids.add(verifier.verify({k.lower(): v for k, v in headers.items()}, body).webhook_id)
    assert ids == {notification.webhook_id}


@pytest.mark.system
def test_a_notification_that_never_gets_through_is_logged_failed(
    serve: Callable[[Flask], LiveServer], start_sandbox: Callable[..., SandboxServer]
) -> None:
    receiver = _Receiver(failures=99)
    url = serve(receiver.app).url
    sandbox = start_sandbox(notification_url=f"{url}/hook", notify_attempts=3, notify_backoff=0.01)
    created = sandbox.sandbox.create_transaction(MERCHANT, wire(direct_wallet_transaction()))
    sandbox.settle(created["id"], "fail")
    assert sandbox.wait_for_notifications(10)
    (notification,) = sandbox.notifications()
    assert notification.state is NotificationState.FAILED
    assert len(notification.tries) == 3
    assert len(receiver.received) == 3

    receiver.failures = 0
    resent = sandbox.resend(notification.id)
    assert resent.resend_of == notification.id
    assert sandbox.wait_for_notifications(10)
    assert sandbox.sandbox.notifier.get(resent.id).state is NotificationState.DELIVERED  # type: ignore[union-attr]


@pytest.mark.system
def test_dropping_logs_notifications_without_sending_them(
    serve: Callable[[Flask], LiveServer], start_sandbox: Callable[..., SandboxServer]
) -> None:
    receiver = _Receiver(failures=0)
    url = serve(receiver.app).url
    sandbox = start_sandbox(notification_url=f"{url}/hook", drop_notifications=True)
    created = sandbox.sandbox.create_transaction(MERCHANT, wire(direct_wallet_transaction()))
    sandbox.settle(created["id"], "pay")
    assert sandbox.wait_for_notifications(5)
    assert [n.state for n in sandbox.notifications()] == [NotificationState.DROPPED]
    assert receiver.received == []
    sandbox.drop_notifications(False)
    created = sandbox.sandbox.create_transaction(
        MERCHANT, wire(direct_wallet_transaction("order-2"))
    )
    sandbox.settle(created["id"], "pay")
    assert sandbox.wait_for_notifications(5)
    assert len(receiver.received) == 1
