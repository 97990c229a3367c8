"""The sandbox's HTTP face through Flask's test client: access, headers, validation,
idempotency, cursors, the hosted page and the control API."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from payhooks.service.client import Customer
from payhooks.service.sandbox import Sandbox, SandboxSettings, create_app, issue_token
from tests.support.service import (
    MERCHANT,
    card_transaction,
    direct_wallet_transaction,
    orchestrator_transaction,
    subscription,
    wire,
)


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    made = Sandbox(SandboxSettings(merchant_account_ids=(MERCHANT, "other-shop")))
    yield made
    made.close()


@pytest.fixture
def web(sandbox: Sandbox) -> FlaskClient:
    return create_app(sandbox).test_client()


def _headers(sandbox: Sandbox, **extra: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {sandbox.issue_token()}",
        "x-merchant-account-id": MERCHANT,
        "X-Forwarded-For": "203.0.113.9",
        **extra,
    }


def _post(web: FlaskClient, path: str, body: Any, headers: dict[str, str]) -> Any:
    return web.post(path, data=json.dumps(body), headers=headers, content_type="application/json")


def _error(response: Any) -> tuple[int, str, str | None]:
    body = response.get_json()
    assert body["type"] == "error"
    assert body["status"] == response.status_code
    return response.status_code, body["code"], body.get("field")


# -- access ----------------------------------------------------------------------------------


def test_a_request_without_a_bearer_token_is_401(web: FlaskClient, sandbox: Sandbox) -> None:
    headers = _headers(sandbox)
    del headers["Authorization"]
    assert _error(_post(web, "/v4/transactions", {}, headers)) == (401, "unauthorized", None)


@pytest.mark.parametrize(
    ("token", "code"),
    [
        (issue_token("another-secret", ["transactions.write"]), "invalid_token"),
        ("not-a-jwt", "invalid_token"),
    ],
)
def test_a_token_the_sandbox_did_not_sign_is_401(
    web: FlaskClient, sandbox: Sandbox, token: str, code: str
) -> None:
    headers = _headers(sandbox, Authorization=f"Bearer {token}")
    assert _error(_post(web, "/v4/transactions", {}, headers))[:2] == (401, code)


def test_an_expired_token_is_401_with_its_own_code(web: FlaskClient, sandbox: Sandbox) -> None:
    expired = sandbox.issue_token(lifetime=-1)
    headers = _headers(sandbox, Authorization=f"Bearer {expired}")
    assert _error(web.get("/buyers", headers=headers))[:2] == (401, "token_expired")


def test_subscription_creation_needs_the_subscriptions_write_scope(
    web: FlaskClient, sandbox: Sandbox
) -> None:
    token = sandbox.issue_token(["transactions.write", "buyers.read"])
    headers = _headers(sandbox, Authorization=f"Bearer {token}")
    response = _post(web, "/v4/subscriptions", wire(subscription()), headers)
    assert _error(response)[:2] == (403, "insufficient_scope")


@pytest.mark.parametrize(
    ("path", "header", "field"),
    [
        ("/v4/subscriptions", "X-Forwarded-For", "X-Forwarded-For"),
        ("/v4/subscriptions", "x-merchant-account-id", "x-merchant-account-id"),
        ("/v4/transactions", "x-merchant-account-id", "x-merchant-account-id"),
    ],
)
def test_a_required_header_missing_is_400_naming_it(
    web: FlaskClient, sandbox: Sandbox, path: str, header: str, field: str
) -> None:
    headers = _headers(sandbox)
    del headers[header]
    body = wire(subscription()) if "subscriptions" in path else wire(card_transaction())
    assert _error(_post(web, path, body, headers)) == (400, "missing_header", field)


def test_a_merchant_account_the_sandbox_does_not_know_is_403(
    web: FlaskClient, sandbox: Sandbox
) -> None:
    headers = _headers(sandbox, **{"x-merchant-account-id": "stranger"})
    response = _post(web, "/v4/transactions", wire(card_transaction()), headers)
    assert _error(response)[:2] == (403, "unknown_merchant_account")


def test_a_token_for_one_merchant_cannot_act_for_another(
    web: FlaskClient, sandbox: Sandbox
) -> None:
    token = sandbox.issue_token(subject="other-shop")
    headers = _headers(sandbox, Authorization=f"Bearer {token}")
    response = _post(web, "/v4/transactions", wire(card_transaction()), headers)
    assert _error(response)[:2] == (403, "unknown_merchant_account")


# -- validation ------------------------------------------------------------------------------


def test_an_invalid_body_is_400_naming_the_field(web: FlaskClient, sandbox: Sandbox) -> None:
    body = wire(card_transaction())
    body["payment_method"]["payment_method_data"]["card"]["exp_year"] = 30
    assert _error(_post(web, "/v4/transactions", body, _headers(sandbox))) == (
        400,
        "invalid_request",
        "payment_method.payment_method_data.card.exp_year",
    )


def test_a_body_that_is_not_json_is_refused(web: FlaskClient, sandbox: Sandbox) -> None:
    response = web.post(
        "/v4/transactions", data=b"{", headers=_headers(sandbox), content_type="application/json"
    )
    assert _error(response)[:2] == (400, "malformed_json")
    response = web.post("/v4/transactions", data=b"a=1", headers=_headers(sandbox))
    assert _error(response)[:2] == (415, "unsupported_media_type")


def test_an_unknown_payment_method_is_400(web: FlaskClient, sandbox: Sandbox) -> None:
    body = wire(card_transaction(method="paypal"))
    assert _error(_post(web, "/v4/transactions", body, _headers(sandbox)))[2] == (
        "payment_method.method"
    )


@pytest.mark.parametrize(("amount", "accepted"), [(99_999, True), (100_000, False)])
def test_the_direct_wallet_sandbox_takes_amounts_below_1000_cny(
    web: FlaskClient, sandbox: Sandbox, amount: int, accepted: bool
) -> None:
    body = wire(direct_wallet_transaction(amount=amount))
    response = _post(web, "/v4/transactions", body, _headers(sandbox))
    if accepted:
        assert response.status_code == 200
    else:
        assert _error(response) == (400, "amount_over_sandbox_limit", "amount")


# -- idempotency -----------------------------------------------------------------------------


def test_the_same_key_and_body_replays_the_first_answer(web: FlaskClient, sandbox: Sandbox) -> None:
    headers = _headers(sandbox, **{"idempotency-key": "key-1"})
    first = _post(web, "/v4/subscriptions", wire(subscription()), headers)
    again = _post(web, "/v4/subscriptions", wire(subscription()), headers)
    assert first.status_code == again.status_code == 200
    assert again.get_json() == first.get_json()
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers


def test_the_same_key_with_another_body_is_409_with_its_code(
    web: FlaskClient, sandbox: Sandbox
) -> None:
    headers = _headers(sandbox, **{"idempotency-key": "key-2"})
    _post(web, "/v4/subscriptions", wire(subscription("sub-a")), headers)
    response = _post(web, "/v4/subscriptions", wire(subscription("sub-b")), headers)
    assert _error(response) == (409, "idempotency_key_reused", "idempotency-key")


def test_keys_are_per_merchant_account(web: FlaskClient, sandbox: Sandbox) -> None:
    mine = _headers(sandbox, **{"idempotency-key": "key-3"})
    theirs = {**mine, "x-merchant-account-id": "other-shop"}
    first = _post(web, "/v4/subscriptions", wire(subscription("sub-a")), mine)
    other = _post(web, "/v4/subscriptions", wire(subscription("sub-b")), theirs)
    assert other.status_code == 200
    assert other.get_json()["id"] != first.get_json()["id"]


# -- lists -----------------------------------------------------------------------------------


def test_a_page_echoes_the_limit_applied_and_defaults_to_20(
    web: FlaskClient, sandbox: Sandbox
) -> None:
    for n in range(25):
        sandbox.add_buyer(f"Buyer {n}")
    page = web.get("/buyers", headers=_headers(sandbox)).get_json()
    assert page["limit"] == 20
    assert len(page["items"]) == 20
    assert page["previous_cursor"] is None
    assert page["items"][0]["type"] == "buyer"
    rest = web.get(
        "/buyers", query_string={"cursor": page["next_cursor"]}, headers=_headers(sandbox)
    ).get_json()
    assert len(rest["items"]) == 5
    assert rest["next_cursor"] is None
    assert rest["previous_cursor"] is not None


@pytest.mark.parametrize("limit", ["0", "101", "ten", "-1"])
def test_a_limit_out_of_range_is_400(web: FlaskClient, sandbox: Sandbox, limit: str) -> None:
    response = web.get("/buyers", query_string={"limit": limit}, headers=_headers(sandbox))
    assert _error(response) == (400, "invalid_request", "limit")


def test_a_cursor_of_another_list_or_merchant_is_refused(
    web: FlaskClient, sandbox: Sandbox
) -> None:
    for n in range(3):
        sandbox.add_buyer(f"Buyer {n}")
    page = web.get("/buyers", query_string={"limit": 1}, headers=_headers(sandbox)).get_json()
    cursor = page["next_cursor"]
    elsewhere = web.get(
        "/v4/transactions", query_string={"cursor": cursor}, headers=_headers(sandbox)
    )
    assert _error(elsewhere) == (400, "invalid_cursor", "cursor")
    other = _headers(sandbox, **{"x-merchant-account-id": "other-shop"})
    assert _error(web.get("/buyers", query_string={"cursor": cursor}, headers=other))[1] == (
        "invalid_cursor"
    )


def test_a_subscription_customer_becomes_a_buyer_once(web: FlaskClient, sandbox: Sandbox) -> None:
    customer = Customer(display_name="Ann Lee", external_identifier="customer-ann")
    for reference in ("sub-1", "sub-2"):
        headers = _headers(sandbox, **{"idempotency-key": reference})
        response = _post(
            web, "/v4/subscriptions", wire(subscription(reference, customer=customer)), headers
        )
        assert response.status_code == 200
    buyers = web.get("/buyers", headers=_headers(sandbox)).get_json()["items"]
    assert [(b["display_name"], b["external_identifier"]) for b in buyers] == [
        ("Ann Lee", "customer-ann")
    ]


# -- the hosted page and the return ----------------------------------------------------------


def _create(web: FlaskClient, sandbox: Sandbox, request: Any) -> dict[str, Any]:
    response = _post(web, "/v4/transactions", wire(request), _headers(sandbox))
    assert response.status_code == 200, response.get_json()
    body: dict[str, Any] = response.get_json()
    return body


@pytest.mark.parametrize(
    ("outcome", "location"),
    [
        ("pay", "https://shop.example/paid"),
        ("cancel", "https://shop.example/cancelled"),
        ("fail", "https://shop.example/cancelled"),
    ],
)
def test_the_direct_wallet_sends_the_customer_to_redirect_or_cancel_url(
    web: FlaskClient, sandbox: Sandbox, outcome: str, location: str
) -> None:
    created = _create(web, sandbox, direct_wallet_transaction())
    path = f"/pay/{created['id']}"
    page = web.get(path)
    assert page.status_code == 200
    assert b"88.80 CNY" in page.data
    chosen = web.post(path, data={"outcome": outcome})
    assert chosen.status_code == 303
    assert chosen.headers["Location"] == location


@pytest.mark.parametrize(
    ("outcome", "code"), [("pay", "Authorised"), ("fail", "Refused"), ("cancel", "Cancelled")]
)
def test_the_orchestrator_wallet_returns_with_result_code(
    web: FlaskClient, sandbox: Sandbox, outcome: str, code: str
) -> None:
    created = _create(web, sandbox, orchestrator_transaction())
    chosen = web.post(f"/pay/{created['id']}", data={"outcome": outcome})
    assert chosen.headers["Location"] == f"https://shop.example/return?order=1&resultCode={code}"


def test_a_payment_is_settled_once(web: FlaskClient, sandbox: Sandbox) -> None:
    created = _create(web, sandbox, direct_wallet_transaction())
    web.post(f"/pay/{created['id']}", data={"outcome": "pay"})
    assert _error(web.post(f"/pay/{created['id']}", data={"outcome": "fail"}))[:2] == (
        409,
        "already_settled",
    )
    assert b"settled" in web.get(f"/pay/{created['id']}").data


def test_an_unknown_outcome_is_400(web: FlaskClient, sandbox: Sandbox) -> None:
    created = _create(web, sandbox, direct_wallet_transaction())
    response = web.post(f"/pay/{created['id']}", data={"outcome": "maybe"})
    assert _error(response) == (400, "invalid_outcome", "outcome")


def test_the_card_flow_has_no_payment_page(web: FlaskClient, sandbox: Sandbox) -> None:
    created = _create(web, sandbox, card_transaction())
    assert web.get(f"/pay/{created['id']}").status_code == 404
    assert web.get("/pay/no-such-id").status_code == 404


# -- control API -----------------------------------------------------------------------------


def test_the_control_api_settles_and_shows_the_log(web: FlaskClient, sandbox: Sandbox) -> None:
    created = _create(web, sandbox, orchestrator_transaction())
    settled = web.post(f"/sandbox/transactions/{created['id']}/fail").get_json()
    assert settled["return_url"].endswith("resultCode=Refused")
    assert settled["notification_id"] is None  # no notification URL configured
    assert web.get("/sandbox/notifications").get_json() == []
    assert _error(web.post("/sandbox/notifications/9/resend"))[:2] == (404, "not_found")


def test_the_drop_switch_is_set_by_the_control_api(web: FlaskClient, sandbox: Sandbox) -> None:
    assert web.put("/sandbox/drop-notifications", json=True).get_json() == {"dropping": True}
    assert sandbox.notifier.dropping is True
    assert _error(web.put("/sandbox/drop-notifications", json="yes"))[:2] == (
        400,
        "invalid_request",
    )


def test_a_failed_renewal_leaves_the_subscription_past_due(
    web: FlaskClient, sandbox: Sandbox
) -> None:
    created = _post(
        web, "/v4/subscriptions", wire(subscription(direct=True)), _headers(sandbox)
    ).get_json()
    assert created["status"] == "active"
    billed = web.post(f"/sandbox/subscriptions/{created['id']}/bill/fail").get_json()
    assert billed["outcome"] == "fail"
    assert sandbox.subscription(created["id"])["status"] == "past_due"
    assert sandbox.transaction(billed["transaction_id"]).amount == 1990  # the plan's amount


def test_a_subscription_is_billed_only_once_its_first_period_is_settled(
    web: FlaskClient, sandbox: Sandbox
) -> None:
    created = _post(web, "/v4/subscriptions", wire(subscription()), _headers(sandbox)).get_json()
    response = web.post(f"/sandbox/subscriptions/{created['id']}/bill/pay")
    assert _error(response)[:2] == (409, "not_billable")
    web.post(f"/sandbox/transactions/{created['payment_url_link'].rsplit('/', 1)[1]}/cancel")
    assert _error(web.post(f"/sandbox/subscriptions/{created['id']}/bill/pay"))[:2] == (
        409,
        "not_billable",
    )
    assert _error(web.post("/sandbox/subscriptions/nope/bill/pay"))[:2] == (404, "not_found")


# -- the subscription object as the interface types it ---------------------------------------


def test_plan_trial_period_days_gives_a_trial(web: FlaskClient, sandbox: Sandbox) -> None:
    request = wire(subscription())
    request["plan"]["trial_period_days"] = 14
    created = _post(web, "/v4/subscriptions", request, _headers(sandbox)).get_json()
    start = datetime.fromisoformat(created["trial_start"])
    end = datetime.fromisoformat(created["trial_end"])
    assert end - start == timedelta(days=14)
    assert created["current_period_start"] == created["trial_end"]


def test_an_explicit_trial_end_wins_over_the_plans_trial_days(
    web: FlaskClient, sandbox: Sandbox
) -> None:
    request = wire(subscription())
    request["plan"]["trial_period_days"] = 14
    request["trial_end"] = "2030-01-01T00:00:00+00:00"
    created = _post(web, "/v4/subscriptions", request, _headers(sandbox)).get_json()
    assert datetime.fromisoformat(created["trial_end"]) == datetime(2030, 1, 1, tzinfo=UTC)


def test_no_trial_without_trial_days_or_trial_end(web: FlaskClient, sandbox: Sandbox) -> None:
    request = wire(subscription())
    request["plan"]["trial_period_days"] = 0
    created = _post(web, "/v4/subscriptions", request, _headers(sandbox)).get_json()
    assert (created["trial_start"], created["trial_end"]) == (None, None)


def test_metadata_not_sent_is_answered_as_an_empty_object(
    web: FlaskClient, sandbox: Sandbox
) -> None:
    request = wire(subscription())
    request.pop("metadata", None)
    created = _post(web, "/v4/subscriptions", request, _headers(sandbox)).get_json()
    assert created["metadata"] == {}
    request = wire(subscription("sub-2"))
    request["metadata"] = {"order": "7"}
    assert _post(web, "/v4/subscriptions", request, _headers(sandbox)).get_json()["metadata"] == {
        "order": "7"
    }


# -- hostile tokens and bodies ---------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "token",
    [
        f"{_b64(b'[' * 100_000)}.e30.x",  # nested deeper than the parser's recursion
        f"{_b64(b'{}')}.{_b64(b'[' * 100_000)}.x",
        "x" * 20_000,
    ],
    ids=["deep-header", "deep-claims", "long"],
)
def test_a_malformed_access_token_is_a_clean_401(
    web: FlaskClient, sandbox: Sandbox, token: str
) -> None:
    answer = web.get("/buyers", headers={"Authorization": f"Bearer {token}"})
    assert _error(answer)[:2] == (401, "invalid_token")


def test_a_body_nested_too_deeply_is_a_clean_400(web: FlaskClient, sandbox: Sandbox) -> None:
    answer = web.post(
        "/v4/transactions",
        data="[" * 100_000,
        headers=_headers(sandbox),
        content_type="application/json",
    )
    assert _error(answer)[:2] == (400, "malformed_json")


# -- the control token -----------------------------------------------------------------------


@pytest.fixture
def guarded() -> Iterator[FlaskClient]:
    made = Sandbox(SandboxSettings(control_token="control-secret-1234567890"))
    yield create_app(made).test_client()
    made.close()


def test_with_a_control_token_the_control_api_needs_it(guarded: FlaskClient) -> None:
    assert _error(guarded.get("/sandbox/notifications"))[:2] == (401, "unauthorized")
    wrong = {"Authorization": "Bearer control-secret-0000000000"}
    assert _error(guarded.get("/sandbox/notifications", headers=wrong))[:2] == (
        401,
        "invalid_control_token",
    )
    right = {"Authorization": "Bearer control-secret-1234567890"}
    assert guarded.get("/sandbox/notifications", headers=right).get_json() == []


@pytest.mark.parametrize(
    "header",
    ["Bearer caf\u00e9-\u00e9t\u00e9", "Bearer ", "Basic abc", "Bearer a b", "\u00ff" * 5000],
    ids=["latin-1", "empty", "basic", "two-words", "long-latin-1"],
)
def test_a_malformed_control_token_is_a_clean_401(guarded: FlaskClient, header: str) -> None:
    environ = {"HTTP_AUTHORIZATION": header.encode("latin-1").decode("latin-1")}
    answer = guarded.get("/sandbox/notifications", environ_overrides=environ)
    status, code, _ = _error(answer)
    assert (status, code) in {(401, "unauthorized"), (401, "invalid_control_token")}


def test_without_a_control_token_the_control_api_stays_open_on_loopback(
    web: FlaskClient,
) -> None:
    assert web.get("/sandbox/notifications").status_code == 200


@pytest.mark.parametrize(
    ("body", "headers", "field", "names"),
    [
        (b"true", {"Content-Type": "application/x-www-form-urlencoded"}, "Content-Type", "JSON"),
        (b"true", {}, "Content-Type", "application/json"),
        (b'"yes"', {"Content-Type": "application/json"}, "body", "true or false"),
        (b"", {"Content-Type": "application/json"}, "body", "true or false"),
    ],
    ids=["curl-d", "no-type", "not-a-boolean", "empty"],
)
def test_the_drop_switch_says_what_its_request_lacks(
    body: bytes, headers: dict[str, str], field: str, names: str, web: FlaskClient
) -> None:
    answer = web.put("/sandbox/drop-notifications", data=body, headers=headers)

    assert _error(answer) == (400, "invalid_request", field)
    assert names in answer.get_json()["message"]
