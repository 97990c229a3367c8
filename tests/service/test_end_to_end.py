"""The whole flow over real sockets: the client creates a payment (the ledger expects it), a
person pays on the sandbox's hosted page, the sandbox signs a notification and sends it to a
real payhooks receiver, which reconciles the payment ``paid``. Once per signature scheme."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from flask import Flask

from payhooks.service import ServiceError
from payhooks.service.client import ServiceClient
from payhooks.service.sandbox import NotificationState, SandboxServer
from payhooks.service.sync import sync_transactions
from payhooks.storage import Ledger, ReconciliationState
from payhooks.verify import SCHEMES, generate_keypair
from tests.support.app import AppFactory
from tests.support.live_server import LiveServer
from tests.support.service import (
    card_transaction,
    direct_wallet_transaction,
    orchestrator_transaction,
    subscription,
)

#: The service's wing end to end, on each engine (tests/conftest.py: engines are opt-in here).
pytestmark = [pytest.mark.system, pytest.mark.both_engines]

Serve = Callable[[Flask], LiveServer]


def _receiver_and_sandbox(
    make_app: AppFactory,
    serve: Serve,
    start_sandbox: Callable[..., SandboxServer],
    scheme: str = "standard-webhooks",
    **sandbox_settings: Any,
) -> SandboxServer:
    pair = generate_keypair(scheme)
    key_config = (
        "PAYHOOKS_SECRETS" if SCHEMES[scheme].key_kind == "secret" else "PAYHOOKS_PUBLIC_KEYS"
    )
    # Under sorted-fields-hmac the receiver must be told the providers' names: its signed
    # string cannot show where a status ends and a provider's name begins
    # (docs/signature-security.md).
    options = {"providers": ["stripe", "adyen"]} if scheme == "sorted-fields-hmac" else {}
    receiver = serve(
        make_app(
            PAYHOOKS_SIGNATURE_SCHEME=scheme,
            PAYHOOKS_SIGNATURE_OPTIONS=options,
            **{key_config: [pair.verifying_key]},
        )
    )
    return start_sandbox(
        scheme=scheme,
        signing_key=pair.signing_key,
        notification_url=f"{receiver.url}/payhooks/notifications",
        **sandbox_settings,
    )


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_a_payment_made_on_the_hosted_page_is_reconciled_paid_by_the_receiver(
    make_app: AppFactory,
    serve: Serve,
    start_sandbox: Callable[..., SandboxServer],
    make_client: Callable[..., ServiceClient],
    ledger: Ledger,
    scheme: str,
) -> None:
    sandbox = _receiver_and_sandbox(make_app, serve, start_sandbox, scheme)
    client = make_client(access_token=sandbox.issue_token(), base_url=sandbox.url)
    created = client.create_transaction(orchestrator_transaction("order-e2e"))
    assert ledger.state("order-e2e") is ReconciliationState.PENDING
    assert created.payment_url is not None

    with httpx.Client() as person:
        page = person.get(created.payment_url)
        assert page.status_code == 200
        assert 'value="pay"' in page.text
        assert "199.00 CNY" in page.text
        chosen = person.post(created.payment_url, data={"outcome": "pay"})
    assert chosen.status_code == 303
    back = urlsplit(chosen.headers["location"])
    assert back.netloc == "shop.example"
    assert parse_qs(back.query) == {"order": ["1"], "resultCode": ["Authorised"]}

    assert sandbox.wait_for_notifications(10)
    (notification,) = sandbox.notifications()
    assert notification.state is NotificationState.DELIVERED, notification.tries
    assert ledger.state("order-e2e") is ReconciliationState.PAID


@pytest.mark.parametrize(
    ("build", "outcome", "state"),
    [
        (card_transaction, None, ReconciliationState.PAID),
        (direct_wallet_transaction, "pay", ReconciliationState.PAID),
        (direct_wallet_transaction, "fail", ReconciliationState.FAILED),
        (direct_wallet_transaction, "cancel", ReconciliationState.CANCELLED),
        (orchestrator_transaction, "fail", ReconciliationState.FAILED),
    ],
)
def test_every_form_and_outcome_reaches_the_receivers_reconciliation(
    make_app: AppFactory,
    serve: Serve,
    start_sandbox: Callable[..., SandboxServer],
    make_client: Callable[..., ServiceClient],
    ledger: Ledger,
    build: Callable[..., Any],
    outcome: str | None,
    state: ReconciliationState,
) -> None:
    sandbox = _receiver_and_sandbox(make_app, serve, start_sandbox)
    client = make_client(access_token=sandbox.issue_token(), base_url=sandbox.url)
    created = client.create_transaction(build("order-form"))
    if outcome is not None:  # the card flow settles by its test card
        sandbox.settle(created.id, outcome)
    assert sandbox.wait_for_notifications(10)
    assert ledger.state("order-form") is state


def test_a_checkout_subscription_paid_on_the_page_notifies_its_webhooks_url(
    make_app: AppFactory,
    serve: Serve,
    start_sandbox: Callable[..., SandboxServer],
    make_client: Callable[..., ServiceClient],
    ledger: Ledger,
) -> None:
    receiver = serve(make_app())
    sandbox = start_sandbox()  # no transaction notification URL: the subscription names it
    client = make_client(access_token=sandbox.issue_token(), base_url=sandbox.url)
    request = subscription("sub-e2e")
    method = request.payment_method.__class__(
        type="card", webhooks_url=f"{receiver.url}/payhooks/notifications"
    )
    created = client.create_subscription(
        subscription("sub-e2e", payment_method=method), client_ip="203.0.113.9"
    )
    assert created.payment_url_link is not None
    with httpx.Client() as person:
        person.post(created.payment_url_link, data={"outcome": "pay"})
    assert sandbox.wait_for_notifications(10)
    assert ledger.state("sub-e2e") is ReconciliationState.PAID
    assert sandbox.sandbox.subscription(created.id)["status"] == "active"


def test_a_dropped_notification_leaves_the_payment_pending_until_resent(
    make_app: AppFactory,
    serve: Serve,
    start_sandbox: Callable[..., SandboxServer],
    make_client: Callable[..., ServiceClient],
    ledger: Ledger,
) -> None:
    sandbox = _receiver_and_sandbox(make_app, serve, start_sandbox)
    client = make_client(access_token=sandbox.issue_token(), base_url=sandbox.url)
    sandbox.drop_notifications()
    created = client.create_transaction(direct_wallet_transaction("order-dropped"))
    sandbox.settle(created.id, "pay")
    assert sandbox.wait_for_notifications(10)
    (dropped,) = sandbox.notifications()
    assert dropped.state is NotificationState.DROPPED
    assert dropped.tries == ()
    assert ledger.state("order-dropped") is ReconciliationState.PENDING

    resent = sandbox.resend(dropped.id)
    assert resent.webhook_id == dropped.webhook_id
    assert sandbox.wait_for_notifications(10)
    assert ledger.state("order-dropped") is ReconciliationState.PAID


def test_a_later_period_billed_on_demand_is_reconciled_against_the_plan_amount(
    make_app: AppFactory,
    serve: Serve,
    start_sandbox: Callable[..., SandboxServer],
    make_client: Callable[..., ServiceClient],
    ledger: Ledger,
) -> None:
    # The periods are paid a minute apart, so the ledger can tell which came first.
    minutes = itertools.count()
    start = datetime.now(UTC) - timedelta(hours=1)
    sandbox = _receiver_and_sandbox(
        make_app,
        serve,
        start_sandbox,
        clock=lambda: start + timedelta(minutes=next(minutes)),
    )
    client = make_client(access_token=sandbox.issue_token(), base_url=sandbox.url)
    created = client.create_subscription(subscription("sub-periods", direct=True), client_ip="::1")
    assert created.status == "active"  # the test card paid the first period
    sandbox.bill_period(created.id, "pay")
    sandbox.bill_period(created.id, "pay")
    assert sandbox.wait_for_notifications(10)
    row = ledger.row("sub-periods")
    assert row is not None
    assert row.state is ReconciliationState.PAID
    assert row.received_amount_minor == 990 + 1990 * 2
    later = sandbox.sandbox.subscription(created.id)
    assert later["current_period_start"] > created.current_period_start.isoformat()


@pytest.mark.parametrize(
    ("currency", "amount", "plan_amount"),
    [("JPY", 3500, 1200), ("KWD", 12345, 4990)],
    ids=["zero-decimal", "three-decimal"],
)
def test_the_whole_flow_reconciles_in_a_currency_without_two_decimals(
    make_app: AppFactory,
    serve: Serve,
    start_sandbox: Callable[..., SandboxServer],
    make_client: Callable[..., ServiceClient],
    ledger: Ledger,
    currency: str,
    amount: int,
    plan_amount: int,
) -> None:
    """Every form, the hosted page, a billed period and a sync, in JPY (0 decimals) and
    KWD (3): each payment is ``paid`` with its amount in minor units, and the list agrees."""
    # A minute between payments, so the ledger can tell the first period from the second.
    minutes = itertools.count()
    start = datetime.now(UTC) - timedelta(hours=1)
    sandbox = _receiver_and_sandbox(
        make_app, serve, start_sandbox, clock=lambda: start + timedelta(minutes=next(minutes))
    )
    client = make_client(access_token=sandbox.issue_token(), base_url=sandbox.url)

    paged = client.create_transaction(
        orchestrator_transaction("order-page", amount=amount, currency=currency)
    )
    assert paged.payment_url is not None
    with httpx.Client() as person:
        person.post(paged.payment_url, data={"outcome": "pay"})
    client.create_transaction(card_transaction("order-card", amount=amount, currency=currency))
    wallet = client.create_transaction(
        direct_wallet_transaction("order-wallet", amount=amount, currency=currency)
    )
    sandbox.settle(wallet.id, "pay")
    plan = subscription().plan.__class__(
        amount=plan_amount, currency=currency, name="Monthly", interval="month"
    )
    created = client.create_subscription(
        subscription("sub-periods", direct=True, amount=amount, currency=currency, plan=plan),
        client_ip="::1",
    )
    sandbox.bill_period(created.id, "pay")
    assert sandbox.wait_for_notifications(10)

    assert {n.state for n in sandbox.notifications()} == {NotificationState.DELIVERED}
    for reference in ("order-page", "order-card", "order-wallet"):
        row = ledger.row(reference)
        assert row is not None
        assert (row.state, row.received_currency, row.received_amount_minor) == (
            ReconciliationState.PAID,
            currency,
            amount,
        )
    periods = ledger.row("sub-periods")
    assert periods is not None
    assert periods.state is ReconciliationState.PAID
    assert periods.received_amount_minor == amount + plan_amount

    report = sync_transactions(client, ledger)
    assert report.items == 5
    assert not report.has_drift, report.drift


@pytest.mark.parametrize("fault", ["lost", "late"])
def test_a_creation_whose_answer_was_lost_then_retried_charges_once_and_reconciles_paid(
    make_app: AppFactory,
    serve: Serve,
    start_sandbox: Callable[..., SandboxServer],
    make_client: Callable[..., ServiceClient],
    ledger: Ledger,
    fault: str,
) -> None:
    sandbox = _receiver_and_sandbox(make_app, serve, start_sandbox)
    client = make_client(access_token=sandbox.issue_token(), base_url=sandbox.url, timeout=0.5)
    if fault == "lost":
        sandbox.sandbox.lose_next_answers(1)  # made and paid by the test card; answered 503
    else:
        sandbox.sandbox.delay_next_answers(1.5)  # made and paid; answered after the timeout
    with pytest.raises(ServiceError):
        client.create_transaction(card_transaction("order-retried"))
    client.create_transaction(card_transaction("order-retried"))  # what a shop would do

    listed = [t.external_identifier for t in client.transactions()]
    assert listed == ["order-retried"]  # one charge
    assert sandbox.wait_for_notifications(10)
    assert len(sandbox.notifications()) == 1
    assert ledger.state("order-retried") is ReconciliationState.PAID
