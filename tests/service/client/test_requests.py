"""Typed requests turn into the interface's wire form, and never show card data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from tests.support.service import (
    card_transaction,
    direct_wallet_transaction,
    orchestrator_transaction,
    subscription,
)


def test_the_card_shape_nests_card_data_under_payment_method_data() -> None:
    body = card_transaction().to_wire()
    assert body["payment_method"] == {
        "method": "stripe",
        "payment_method_data": {
            "type": "card",
            "card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"},
        },
    }
    assert body["amount"] == 2500
    assert isinstance(body["amount"], int)


def test_the_orchestrator_shape_sends_return_url_and_optional_members_at_top_level() -> None:
    body = orchestrator_transaction(merchant_order_id="internal-9").to_wire()
    assert body["payment_method"]["payment_method_data"] == {
        "type": "alipay_hk",
        "returnUrl": "https://shop.example/return?order=1",
    }
    assert body["merchant_order_id"] == "internal-9"


def test_the_direct_wallet_shape_puts_its_urls_in_payment_method() -> None:
    body = direct_wallet_transaction().to_wire()
    assert body["payment_method"] == {
        "method": "alipay",
        "redirect_url": "https://shop.example/paid",
        "cancel_url": "https://shop.example/cancelled",
    }
    assert body["subject"] == "A teapot"
    assert "body" not in body  # an optional member left None is omitted


def test_a_trial_end_is_sent_with_its_offset() -> None:
    moment = datetime(2030, 1, 1, 8, tzinfo=timezone(timedelta(hours=8)))
    assert subscription(trial_end=moment).to_wire()["trial_end"] == "2030-01-01T08:00:00+08:00"
    assert subscription(trial_end=moment.astimezone(UTC)).to_wire()["trial_end"].endswith("+00:00")


def test_a_wallet_subscription_sends_billing_details_and_cart_items() -> None:
    body = subscription(wallet=True).to_wire()
    assert body["billing_details"]["address"] == {"city": "Shanghai", "country": "CN"}
    assert body["cart_items"] == [{"name": "Tea box", "quantity": 1, "unit_amount": 990}]


def test_card_data_never_shows_in_a_repr() -> None:
    shown = repr(card_transaction()) + repr(subscription(direct=True))
    assert "4242424242424242" not in shown
    assert "cvc" not in shown
    assert "<...4242>" in shown
