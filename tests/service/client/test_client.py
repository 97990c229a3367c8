"""The client against the sandbox on a real loopback socket: creation in every shape, the
ledger expectation, the creation record, typed errors, retries and cursor iteration."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from payhooks.service import (
    AlreadyCreatedError,
    AuthenticationError,
    ConflictError,
    CreationInProgressError,
    ExpectationConflictError,
    PermissionDeniedError,
    RequestValidationError,
    ServiceResponseError,
    ServiceUnavailableError,
    TransportError,
)
from payhooks.service.client import CreationAttempt, CreationState, ServiceClient
from payhooks.service.sandbox import SandboxServer
from payhooks.storage import Ledger, ReconciliationState
from tests.support.service import (
    DECLINED_CARD,
    card_transaction,
    direct_wallet_transaction,
    orchestrator_transaction,
    subscription,
)

pytestmark = pytest.mark.system


@pytest.mark.parametrize(
    "build", [card_transaction, orchestrator_transaction, direct_wallet_transaction]
)
def test_each_transaction_shape_is_created_processing_and_expected_in_the_ledger(
    client: ServiceClient, ledger: Ledger, build: Callable[..., object]
) -> None:
    request = build("order-42")
    created = client.create_transaction(request)  # type: ignore[arg-type]
    assert created.status == "processing"
    assert created.external_identifier == "order-42"
    assert ledger.state("order-42") is ReconciliationState.PENDING
    attempt = _latest(ledger, "order-42")
    assert attempt is not None
    assert attempt.state is CreationState.CREATED
    assert attempt.service_id == created.id


def test_the_card_flow_names_its_processor_and_intent(client: ServiceClient) -> None:
    created = client.create_transaction(card_transaction())
    assert created.payment_url is None
    assert created.processor == "stripe"
    assert created.processor_payment_intent_id


def test_redirect_flows_carry_a_payment_url_on_the_sandbox(
    client: ServiceClient, sandbox: SandboxServer
) -> None:
    created = client.create_transaction(orchestrator_transaction())
    assert created.payment_url is not None
    assert created.payment_url.startswith(f"{sandbox.url}/pay/")


def test_a_subscription_is_created_with_aware_times_and_expected(
    client: ServiceClient, ledger: Ledger
) -> None:
    created = client.create_subscription(subscription("sub-7"), client_ip="203.0.113.9")
    assert created.external_identifier == "sub-7"
    assert created.status in {"failed", "active", "past_due", "cancelled"}
    assert created.created.utcoffset() is not None
    assert created.current_period_end > created.current_period_start
    assert created.payment_url_link is not None  # checkout mode
    row = ledger.row("sub-7")
    assert row is not None
    assert row.state is ReconciliationState.PENDING


def test_a_direct_mode_subscription_reports_the_card_summary(client: ServiceClient) -> None:
    created = client.create_subscription(subscription(direct=True), client_ip="2001:db8::1")
    assert created.card is not None
    assert created.card.last4 == "4242"
    assert created.card.expiration_date == "01/31"
    assert created.status == "active"


def test_an_invalid_request_is_neither_sent_nor_expected(
    client: ServiceClient, ledger: Ledger, sandbox: SandboxServer
) -> None:
    with pytest.raises(RequestValidationError) as exc_info:
        client.create_transaction(card_transaction("order-bad", amount=-1))
    assert exc_info.value.field == "amount"
    assert ledger.state("order-bad") is None
    assert sandbox.sandbox.requests == []


def test_a_naive_trial_end_is_refused_before_sending(client: ServiceClient) -> None:
    request = subscription(trial_end=datetime(2030, 1, 1))  # naive: the point
    with pytest.raises(RequestValidationError) as exc_info:
        client.create_subscription(request, client_ip="203.0.113.9")
    assert exc_info.value.field == "trial_end"


def test_an_aware_trial_end_is_sent_and_starts_the_first_period(client: ServiceClient) -> None:
    trial_end = datetime(2030, 1, 1, tzinfo=UTC)
    created = client.create_subscription(subscription(trial_end=trial_end), client_ip="::1")
    assert created.trial_end == trial_end
    assert created.current_period_start == trial_end


def test_a_client_ip_that_is_not_an_address_is_refused(client: ServiceClient) -> None:
    with pytest.raises(RequestValidationError) as exc_info:
        client.create_subscription(subscription(), client_ip="shop.example")
    assert exc_info.value.field == "X-Forwarded-For"


def test_an_unknown_currency_is_refused_by_the_ledger_before_sending(
    client: ServiceClient, sandbox: SandboxServer
) -> None:
    with pytest.raises(RequestValidationError) as exc_info:
        client.create_transaction(card_transaction(currency="XYZ"))
    assert exc_info.value.field == "currency"
    assert sandbox.sandbox.requests == []


def test_a_reference_the_ledger_expects_with_other_data_is_not_sent(
    client: ServiceClient, ledger: Ledger, sandbox: SandboxServer
) -> None:
    ledger.expect_transaction("order-1", 100, "CNY")
    with pytest.raises(ExpectationConflictError) as exc_info:
        client.create_transaction(card_transaction("order-1"))
    assert "amount_minor" in exc_info.value.fields
    assert sandbox.sandbox.requests == []


@pytest.mark.parametrize(
    "build",
    [
        orchestrator_transaction,
        lambda reference: direct_wallet_transaction(reference, subject=None),
        lambda reference: card_transaction(reference, description=None),
    ],
    ids=["orchestrator-wallet", "direct-wallet-without-subject", "card-without-description"],
)
def test_a_request_without_a_description_keeps_the_one_registered(
    client: ServiceClient, ledger: Ledger, build: Callable[[str], Any]
) -> None:
    request = build("order-tea")
    registered: dict[str, Any] = {"description": "Tea set", "metadata": {"sku": "T-1"}}
    ledger.expect_transaction("order-tea", request.amount, "CNY", **registered)

    created = client.create_transaction(request)

    assert created.external_identifier == "order-tea"
    # Registering what the checkout registered is still the same payment: nothing changed.
    assert ledger.expect_transaction("order-tea", request.amount, "CNY", **registered) is False


def test_a_request_stating_another_description_is_not_sent(
    client: ServiceClient, ledger: Ledger, sandbox: SandboxServer
) -> None:
    ledger.expect_transaction("order-tea", 8880, "CNY", description="Tea set")
    with pytest.raises(ExpectationConflictError) as exc_info:
        client.create_transaction(direct_wallet_transaction("order-tea"))
    assert exc_info.value.fields == ("description",)
    assert sandbox.sandbox.requests == []


def test_a_refused_creation_is_recorded_refused_with_the_services_code(
    client: ServiceClient, ledger: Ledger
) -> None:
    request = card_transaction("order-real-card")
    card = request.card.__class__(number="4111111111111111", exp_month=1, exp_year=2030, cvc="1")
    with pytest.raises(RequestValidationError):  # cvc too short: refused before sending
        client.create_transaction(card_transaction("order-real-card", card=card))
    card = request.card.__class__(number="4111111111111111", exp_month=1, exp_year=2030, cvc="123")
    with pytest.raises(ServiceResponseError) as exc_info:
        client.create_transaction(card_transaction("order-real-card", card=card))
    assert exc_info.value.status == 400
    assert exc_info.value.service_code == "not_a_test_card"
    assert exc_info.value.field == "payment_method.payment_method_data.card.number"
    assert b"not_a_test_card" in exc_info.value.body
    attempt = _latest(ledger, "order-real-card")
    assert attempt is not None
    assert attempt.state is CreationState.REFUSED
    assert attempt.http_status == 400
    assert attempt.error_code == "not_a_test_card"
    # Expected first, then marked in the ledger: nobody was charged.
    assert ledger.state("order-real-card") is ReconciliationState.NOT_CREATED
    failure = ledger.service.creation_failure("order-real-card")
    assert failure is not None
    assert failure.certain
    assert failure.reason.startswith("not_a_test_card: ")
    # A retry that the service accepts clears the mark (and the test card pays at once).
    client.create_transaction(card_transaction("order-real-card"))
    assert ledger.service.creation_failure("order-real-card") is None
    assert ledger.state("order-real-card") is not ReconciliationState.NOT_CREATED


def _latest(ledger: Ledger, reference: str) -> CreationAttempt | None:
    attempts = ledger.service.creation_attempts(reference)
    return attempts[-1] if attempts else None


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_no_answer_is_a_transport_error_recorded_uncertain(
    make_client: Callable[..., ServiceClient], ledger: Ledger
) -> None:
    client = make_client(base_url=f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(TransportError) as exc_info:
        client.create_transaction(direct_wallet_transaction("order-lost"))
    assert exc_info.value.code == "transport_error"
    attempt = _latest(ledger, "order-lost")
    assert attempt is not None
    assert attempt.state is CreationState.UNCERTAIN
    # It may exist at the service: pending until a sync or an outcome tells.
    assert ledger.state("order-lost") is ReconciliationState.PENDING
    failure = ledger.service.creation_failure("order-lost")
    assert failure is not None
    assert not failure.certain


def test_a_transaction_is_not_retried_after_a_lost_answer(
    client: ServiceClient, sandbox: SandboxServer, ledger: Ledger
) -> None:
    sandbox.sandbox.lose_next_answers(1)
    with pytest.raises(ServiceUnavailableError) as exc_info:
        client.create_transaction(direct_wallet_transaction("order-once"))
    assert exc_info.value.status == 503
    assert len(sandbox.sandbox.requests) == 1  # a second try could have charged twice
    attempt = _latest(ledger, "order-once")
    assert attempt is not None
    assert attempt.state is CreationState.UNCERTAIN


def test_a_subscription_retry_reuses_its_idempotency_key_and_is_made_once(
    client: ServiceClient, sandbox: SandboxServer
) -> None:
    sandbox.sandbox.lose_next_answers(1)
    created = client.create_subscription(subscription("sub-retry"), client_ip="203.0.113.9")
    posts = [key for method, _, key in sandbox.sandbox.requests if method == "POST"]
    assert len(posts) == 2
    assert posts[0] is not None
    assert posts[0] == posts[1]
    # The second answer is the first one replayed: one subscription exists.
    assert sandbox.sandbox.subscription(created.id)["id"] == created.id
    assert [t.external_identifier for t in client.transactions()] == ["sub-retry"]


def test_a_caller_retry_with_the_same_key_gets_the_same_subscription(
    client: ServiceClient,
) -> None:
    first = client.create_subscription(subscription(), client_ip="::1", idempotency_key="k-1")
    again = client.create_subscription(subscription(), client_ip="::1", idempotency_key="k-1")
    assert again.id == first.id


def test_a_key_reused_with_another_body_is_a_conflict_with_its_code(
    client: ServiceClient, ledger: Ledger
) -> None:
    client.create_subscription(subscription("sub-a"), client_ip="::1", idempotency_key="k-2")
    with pytest.raises(ConflictError) as exc_info:
        client.create_subscription(subscription("sub-b"), client_ip="::1", idempotency_key="k-2")
    assert exc_info.value.status == 409
    assert exc_info.value.service_code == "idempotency_key_reused"
    attempt = _latest(ledger, "sub-b")
    assert attempt is not None
    assert attempt.state is CreationState.REFUSED


def test_a_token_not_from_the_service_is_an_authentication_error(
    make_client: Callable[..., ServiceClient],
) -> None:
    client = make_client(access_token="a.b.c")
    with pytest.raises(AuthenticationError) as exc_info:
        list(client.buyers())
    assert exc_info.value.status == 401


def test_a_token_without_the_scope_is_refused_with_403(
    make_client: Callable[..., ServiceClient], sandbox: SandboxServer
) -> None:
    client = make_client(access_token=sandbox.issue_token(["transactions.write"]))
    with pytest.raises(PermissionDeniedError) as exc_info:
        client.create_subscription(subscription(), client_ip="::1")
    assert exc_info.value.service_code == "insufficient_scope"


def test_buyers_are_iterated_across_pages_with_cursors_passed_back_unchanged(
    client: ServiceClient, sandbox: SandboxServer
) -> None:
    added = [sandbox.sandbox.add_buyer(f"Buyer {n}")["id"] for n in range(11)]
    pages = list(client.buyer_pages(limit=4))
    assert [len(page.items) for page in pages] == [4, 4, 3]
    assert all(page.limit == 4 for page in pages)
    assert pages[-1].next_cursor is None
    assert pages[0].previous_cursor is None
    assert pages[1].previous_cursor is not None
    assert [buyer.id for buyer in client.buyers(limit=4)] == added
    # A cursor given back is honoured: the second page again, from its cursor.
    resumed = next(client.buyer_pages(limit=4, cursor=pages[0].next_cursor))
    assert [b.id for b in resumed.items] == [b.id for b in pages[1].items]


def test_transactions_are_iterated_across_pages(client: ServiceClient) -> None:
    references = [f"order-{n}" for n in range(7)]
    for reference in references:
        client.create_transaction(direct_wallet_transaction(reference))
    assert [t.external_identifier for t in client.transactions(limit=3)] == references


def test_a_tampered_cursor_is_refused_by_the_service(client: ServiceClient) -> None:
    with pytest.raises(ServiceResponseError) as exc_info:
        next(client.buyer_pages(cursor="not-a-cursor"))
    assert exc_info.value.service_code == "invalid_cursor"


@pytest.mark.parametrize("limit", [0, 101, True])
def test_a_limit_out_of_range_is_refused_before_sending(client: ServiceClient, limit: int) -> None:
    with pytest.raises(RequestValidationError) as exc_info:
        client.buyer_pages(limit=limit)
    assert exc_info.value.field == "limit"


def test_a_declined_test_card_is_created_and_then_fails(
    client: ServiceClient, sandbox: SandboxServer
) -> None:
    request = card_transaction("order-declined")
    card = request.card.__class__(number=DECLINED_CARD, exp_month=1, exp_year=2030, cvc="123")
    created = client.create_transaction(card_transaction("order-declined", card=card))
    assert created.status == "processing"
    listed = {t.id: t.status for t in client.transactions()}
    assert listed[created.id] == "failed"


def test_a_reference_already_created_is_not_sent_again(
    client: ServiceClient, sandbox: SandboxServer
) -> None:
    created = client.create_transaction(direct_wallet_transaction("order-twice"))
    with pytest.raises(AlreadyCreatedError) as exc_info:
        client.create_transaction(direct_wallet_transaction("order-twice"))
    assert exc_info.value.service_id == created.id
    assert len(sandbox.sandbox.requests) == 1


def test_a_refused_creation_may_be_retried(
    make_client: Callable[..., ServiceClient], ledger: Ledger
) -> None:
    stale = make_client(access_token="a.b.c")  # a token the service does not accept
    with pytest.raises(AuthenticationError):
        stale.create_transaction(direct_wallet_transaction("order-again"))
    fresh = make_client()
    created = fresh.create_transaction(direct_wallet_transaction("order-again"))
    assert created.status == "processing"
    assert [a.state for a in ledger.service.creation_attempts("order-again")] == [
        CreationState.REFUSED,
        CreationState.CREATED,
    ]


def test_a_timed_out_subscription_is_retried_with_its_key_and_made_once(
    make_client: Callable[..., ServiceClient], sandbox: SandboxServer
) -> None:
    # Processed, but answered after the timeout; the retry must be answered within it, which
    # on a loaded machine took more than the 0.3 s this test once allowed.
    client = make_client(timeout=2.0)
    sandbox.sandbox.delay_next_answers(4.0)
    created = client.create_subscription(subscription("sub-slow"), client_ip="::1")
    keys = [key for method, _, key in sandbox.sandbox.requests if method == "POST"]
    assert len(keys) == 2
    assert keys[0] == keys[1]
    assert [t.external_identifier for t in client.transactions()] == ["sub-slow"]
    assert created.external_identifier == "sub-slow"


def test_a_timed_out_transaction_is_not_retried_and_recorded_uncertain(
    make_client: Callable[..., ServiceClient], sandbox: SandboxServer, ledger: Ledger
) -> None:
    client = make_client(timeout=0.3)
    sandbox.sandbox.delay_next_answers(1.0)
    with pytest.raises(TransportError):
        client.create_transaction(direct_wallet_transaction("order-slow"))
    assert len(sandbox.sandbox.requests) == 1
    attempt = _latest(ledger, "order-slow")
    assert attempt is not None
    assert attempt.state is CreationState.UNCERTAIN
    assert attempt.error_code == "transport_error"


def _posts(sandbox: SandboxServer) -> int:
    return sum(1 for method, _, _ in sandbox.sandbox.requests if method == "POST")


def test_a_lost_answer_then_a_retry_finds_the_transaction_listed_and_sends_nothing(
    client: ServiceClient, sandbox: SandboxServer, ledger: Ledger
) -> None:
    sandbox.sandbox.lose_next_answers(1)  # processed: the service has it
    with pytest.raises(ServiceUnavailableError):
        client.create_transaction(direct_wallet_transaction("order-lost-answer"))
    again = client.create_transaction(direct_wallet_transaction("order-lost-answer"))
    assert _posts(sandbox) == 1
    (listed,) = client.transactions()
    assert again.id == listed.id
    assert again.payment_url is not None  # the sandbox lists what it answered
    (attempt,) = ledger.service.creation_attempts("order-lost-answer")
    assert attempt.state is CreationState.CREATED
    assert attempt.service_id == listed.id
    assert attempt.http_status == 503  # the lost answer stays on record
    assert ledger.service.creation_failure("order-lost-answer") is None
    # Now created: a third call is refused as any created reference is.
    with pytest.raises(AlreadyCreatedError) as exc_info:
        client.create_transaction(direct_wallet_transaction("order-lost-answer"))
    assert exc_info.value.service_id == listed.id
    assert _posts(sandbox) == 1


def test_a_timed_out_transaction_retried_is_found_at_the_service_and_made_once(
    make_client: Callable[..., ServiceClient], sandbox: SandboxServer, ledger: Ledger
) -> None:
    client = make_client(timeout=0.3)
    sandbox.sandbox.delay_next_answers(1.0)  # processed, answered after the timeout
    with pytest.raises(TransportError):
        client.create_transaction(direct_wallet_transaction("order-late"))
    again = client.create_transaction(direct_wallet_transaction("order-late"))
    assert _posts(sandbox) == 1
    assert [t.id for t in client.transactions()] == [again.id]
    assert [a.state for a in ledger.service.creation_attempts("order-late")] == [
        CreationState.CREATED
    ]


def test_an_uncertain_creation_the_service_lacks_is_sent_again(
    make_client: Callable[..., ServiceClient], sandbox: SandboxServer, ledger: Ledger
) -> None:
    unreachable = make_client(base_url=f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(TransportError):
        unreachable.create_transaction(direct_wallet_transaction("order-unsent"))
    created = make_client().create_transaction(direct_wallet_transaction("order-unsent"))
    assert _posts(sandbox) == 1
    assert [t.id for t in make_client().transactions()] == [created.id]
    assert [a.state for a in ledger.service.creation_attempts("order-unsent")] == [
        CreationState.UNCERTAIN,
        CreationState.CREATED,
    ]
    assert ledger.service.creation_failure("order-unsent") is None


def test_an_attempt_still_sending_and_not_listed_is_not_sent_twice(
    client: ServiceClient, sandbox: SandboxServer, ledger: Ledger
) -> None:
    ledger.expect_transaction("order-busy", 8880, "CNY", description="A teapot")
    assert ledger.service.begin_creation("order-busy", "transaction") is not None
    with pytest.raises(CreationInProgressError) as exc_info:
        client.create_transaction(direct_wallet_transaction("order-busy"))
    assert exc_info.value.code == "creation_in_progress"
    assert _posts(sandbox) == 0


def test_an_attempt_left_sending_past_the_timeout_and_not_listed_is_sent_again(
    make_client: Callable[..., ServiceClient], sandbox: SandboxServer, ledger: Ledger
) -> None:
    client = make_client(timeout=0.05)
    ledger.expect_transaction("order-crashed", 8880, "CNY", description="A teapot")
    ledger.service.begin_creation("order-crashed", "transaction")  # its sender died
    time.sleep(0.1)
    client.create_transaction(direct_wallet_transaction("order-crashed"))
    assert _posts(sandbox) == 1
    assert [a.state for a in ledger.service.creation_attempts("order-crashed")] == [
        CreationState.SENDING,
        CreationState.CREATED,
    ]


def test_an_uncertain_subscription_asked_again_with_a_new_key_is_found_listed(
    client: ServiceClient, sandbox: SandboxServer, ledger: Ledger
) -> None:
    sandbox.sandbox.lose_next_answers(3)  # every try of the call, under one key
    with pytest.raises(ServiceUnavailableError):
        client.create_subscription(subscription("sub-lost"), client_ip="::1")
    with pytest.raises(AlreadyCreatedError) as exc_info:
        client.create_subscription(subscription("sub-lost"), client_ip="::1")
    (listed,) = client.transactions()
    assert exc_info.value.service_id == listed.id
    assert _posts(sandbox) == 3
    (attempt,) = ledger.service.creation_attempts("sub-lost")
    assert attempt.state is CreationState.CREATED
