"""The interface's request rules: every break is refused naming the member at fault."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from payhooks.service import RequestValidationError
from payhooks.service.interface import (
    TransactionShape,
    validate_subscription,
    validate_transaction,
)
from tests.support.service import (
    card_transaction,
    direct_wallet_transaction,
    orchestrator_transaction,
    subscription,
    wire,
)

WALLET_CODES = frozenset({"WALLET"})
_DELETE = object()


def _set(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, last = path.split(".")
    target: Any = body
    for name in parents:
        target = target[name]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return body


CARD = "payment_method.payment_method_data.card"


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("amount", _DELETE, "amount"),
        ("amount", 25.0, "amount"),
        ("amount", True, "amount"),
        ("amount", 0, "amount"),
        ("currency", "cny", "currency"),
        ("currency", "CNYX", "currency"),
        ("external_identifier", "", "external_identifier"),
        ("external_identifier", "x" * 65, "external_identifier"),
        ("payment_method.method", _DELETE, "payment_method.method"),
        (
            "payment_method.payment_method_data.type",
            "wallet",
            "payment_method.payment_method_data.type",
        ),
        (f"{CARD}.exp_month", 13, f"{CARD}.exp_month"),
        (f"{CARD}.exp_month", 0, f"{CARD}.exp_month"),
        (f"{CARD}.exp_year", 30, f"{CARD}.exp_year"),
        (f"{CARD}.exp_year", "2030", f"{CARD}.exp_year"),
        (f"{CARD}.number", "4242 4242 4242 4242", f"{CARD}.number"),
        (f"{CARD}.cvc", 123, f"{CARD}.cvc"),
        ("description", "", "description"),
        ("metadata", ["a"], "metadata"),
        ("billing_address", {"city": 5}, "billing_address.city"),
    ],
)
def test_a_card_transaction_break_names_its_field(path: str, value: Any, field: str) -> None:
    body = _set(wire(card_transaction()), path, value)
    with pytest.raises(RequestValidationError) as exc_info:
        validate_transaction(body, TransactionShape.CARD)
    assert exc_info.value.field == field
    assert exc_info.value.code == "invalid_request"
    assert str(exc_info.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (
            "payment_method.payment_method_data.returnUrl",
            _DELETE,
            "payment_method.payment_method_data.returnUrl",
        ),
        (
            "payment_method.payment_method_data.returnUrl",
            "/return",
            "payment_method.payment_method_data.returnUrl",
        ),
        ("payment_method.payment_method_data.type", "", "payment_method.payment_method_data.type"),
        ("merchant_order_id", 7, "merchant_order_id"),
    ],
)
def test_an_orchestrator_transaction_break_names_its_field(
    path: str, value: Any, field: str
) -> None:
    body = _set(wire(orchestrator_transaction()), path, value)
    with pytest.raises(RequestValidationError) as exc_info:
        validate_transaction(body, TransactionShape.ORCHESTRATOR_WALLET)
    assert exc_info.value.field == field


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("payment_method.redirect_url", _DELETE, "payment_method.redirect_url"),
        ("payment_method.cancel_url", "ftp://shop.example/x", "payment_method.cancel_url"),
        ("subject", "s" * 257, "subject"),
        ("body", 1, "body"),
    ],
)
def test_a_direct_wallet_transaction_break_names_its_field(
    path: str, value: Any, field: str
) -> None:
    body = _set(wire(direct_wallet_transaction()), path, value)
    with pytest.raises(RequestValidationError) as exc_info:
        validate_transaction(body, TransactionShape.DIRECT_WALLET)
    assert exc_info.value.field == field


@pytest.mark.parametrize(
    ("request_", "shape"),
    [
        (card_transaction(), TransactionShape.CARD),
        (orchestrator_transaction(), TransactionShape.ORCHESTRATOR_WALLET),
        (direct_wallet_transaction(), TransactionShape.DIRECT_WALLET),
    ],
)
def test_each_shape_accepts_its_valid_body(request_: Any, shape: TransactionShape) -> None:
    validate_transaction(request_.to_wire(), shape)


def test_a_body_of_one_shape_is_not_accepted_as_another() -> None:
    with pytest.raises(RequestValidationError) as exc_info:
        validate_transaction(wire(direct_wallet_transaction()), TransactionShape.CARD)
    assert exc_info.value.field == "payment_method.payment_method_data"


@pytest.mark.parametrize(
    ("kind", "path", "value", "field"),
    [
        ("checkout", "external_identifier", "y" * 65, "external_identifier"),
        ("checkout", "description", "d" * 256, "description"),
        ("checkout", "description", "", "description"),
        ("checkout", "customer", _DELETE, "customer"),
        ("checkout", "customer.email_address", 3, "customer.email_address"),
        ("checkout", "plan.amount", "1990", "plan.amount"),
        ("checkout", "plan.payment_attempts", 0, "plan.payment_attempts"),
        ("checkout", "payment_method.type", _DELETE, "payment_method.type"),
        ("checkout", "payment_method.webhooks_url", "not a url", "payment_method.webhooks_url"),
        ("checkout", "trial_end", "2030-01-01T00:00:00", "trial_end"),
        ("checkout", "trial_end", "next week", "trial_end"),
        ("wallet", "billing_details", _DELETE, "billing_details"),
        ("wallet", "cart_items", _DELETE, "cart_items"),
        ("wallet", "cart_items", [], "cart_items"),
        ("wallet", "billing_details.address.country", 86, "billing_details.address.country"),
        ("direct", "browser_info", _DELETE, "browser_info"),
        ("direct", "browser_info.javascript_enabled", "yes", "browser_info.javascript_enabled"),
        ("direct", "browser_info.screen_width", 1.5, "browser_info.screen_width"),
        ("direct", "payment_method.card.exp_year", 31, "payment_method.card.exp_year"),
        ("direct", "payment_method.card.exp_month", 13, "payment_method.card.exp_month"),
    ],
)
def test_a_subscription_break_names_its_field(kind: str, path: str, value: Any, field: str) -> None:
    body = _set(wire(subscription(wallet=kind == "wallet", direct=kind == "direct")), path, value)
    with pytest.raises(RequestValidationError) as exc_info:
        validate_subscription(body, wallet_channel_codes=WALLET_CODES)
    assert exc_info.value.field == field


def test_a_cart_item_break_names_its_index() -> None:
    body = wire(subscription(wallet=True))
    body["cart_items"].append({"name": "Cup", "quantity": -1})
    with pytest.raises(RequestValidationError) as exc_info:
        validate_subscription(body, wallet_channel_codes=WALLET_CODES)
    assert exc_info.value.field == "cart_items[1].quantity"


def test_billing_details_and_cart_items_are_optional_off_the_wallet_channel() -> None:
    validate_subscription(wire(subscription()), wallet_channel_codes=WALLET_CODES)


def test_the_wallet_channel_is_the_configured_code() -> None:
    body = wire(subscription())  # payment_channel_code CARD, no billing details
    with pytest.raises(RequestValidationError) as exc_info:
        validate_subscription(body, wallet_channel_codes={"CARD"})
    assert exc_info.value.field == "billing_details"


@given(st.text(max_size=80))
def test_external_identifier_is_accepted_exactly_from_1_to_64_characters(reference: str) -> None:
    body = wire(subscription())
    body["external_identifier"] = reference
    if 1 <= len(reference) <= 64:
        validate_subscription(body, wallet_channel_codes=WALLET_CODES)
    else:
        with pytest.raises(RequestValidationError) as exc_info:
            validate_subscription(body, wallet_channel_codes=WALLET_CODES)
        assert exc_info.value.field == "external_identifier"


@given(st.integers(min_value=-10, max_value=20_000))
def test_exp_year_is_accepted_exactly_with_four_digits(year: int) -> None:
    body = wire(card_transaction())
    body["payment_method"]["payment_method_data"]["card"]["exp_year"] = year
    if 1000 <= year <= 9999:
        validate_transaction(body, TransactionShape.CARD)
    else:
        with pytest.raises(RequestValidationError) as exc_info:
            validate_transaction(body, TransactionShape.CARD)
        assert exc_info.value.field == f"{CARD}.exp_year"


@given(st.integers(min_value=0, max_value=400))
def test_subject_is_accepted_up_to_256_characters(length: int) -> None:
    body = wire(direct_wallet_transaction())
    body["subject"] = "s" * length
    if 1 <= length <= 256:
        validate_transaction(body, TransactionShape.DIRECT_WALLET)
    else:
        with pytest.raises(RequestValidationError) as exc_info:
            validate_transaction(body, TransactionShape.DIRECT_WALLET)
        assert exc_info.value.field == "subject"
