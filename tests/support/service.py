"""What the service tests share: valid requests of every kind, in typed and wire form.

Each builder returns a request the interface accepts; tests change one member to break it.
"""

from __future__ import annotations

import copy
from typing import Any

from payhooks.service.client import (
    Address,
    BillingDetails,
    BrowserInfo,
    Card,
    CardTransaction,
    CartItem,
    Customer,
    DirectWalletTransaction,
    OrchestratorWalletTransaction,
    Plan,
    SubscriptionPaymentMethod,
    SubscriptionRequest,
)

__all__ = [
    "MERCHANT",
    "PAYING_CARD",
    "card_transaction",
    "direct_wallet_transaction",
    "orchestrator_transaction",
    "subscription",
    "wire",
]

#: The sandbox's default merchant account.
MERCHANT = "sandbox-merchant"
PAYING_CARD = "4242424242424242"
DECLINED_CARD = "4000000000000002"


def card_transaction(reference: str = "order-card-1", **changes: Any) -> CardTransaction:
    values: dict[str, Any] = {
        "external_identifier": reference,
        "amount": 2500,
        "currency": "CNY",
        "method": "stripe",
        "card": Card(number=PAYING_CARD, exp_month=12, exp_year=2030, cvc="123"),
        "description": "Two mugs",
        **changes,
    }
    return CardTransaction(**values)


def orchestrator_transaction(
    reference: str = "order-orch-1", **changes: Any
) -> OrchestratorWalletTransaction:
    values: dict[str, Any] = {
        "external_identifier": reference,
        "amount": 19900,
        "currency": "CNY",
        "method": "adyen",
        "wallet_type": "alipay_hk",
        "return_url": "https://shop.example/return?order=1",
        **changes,
    }
    return OrchestratorWalletTransaction(**values)


def direct_wallet_transaction(
    reference: str = "order-wallet-1", **changes: Any
) -> DirectWalletTransaction:
    values: dict[str, Any] = {
        "external_identifier": reference,
        "amount": 8880,
        "currency": "CNY",
        "method": "alipay",
        "redirect_url": "https://shop.example/paid",
        "cancel_url": "https://shop.example/cancelled",
        "subject": "A teapot",
        **changes,
    }
    return DirectWalletTransaction(**values)


def subscription(
    reference: str = "sub-1", *, wallet: bool = False, direct: bool = False, **changes: Any
) -> SubscriptionRequest:
    """A checkout-mode card subscription; ``wallet`` on the wallet channel (billing details
    and cart items given), ``direct`` with card data (browser info given)."""
    values: dict[str, Any] = {
        "external_identifier": reference,
        "amount": 990,
        "currency": "CNY",
        "customer": Customer(display_name="Ann Lee", external_identifier=f"customer-{reference}"),
        "plan": Plan(amount=1990, currency="CNY", name="Monthly", interval="month"),
        "payment_method": SubscriptionPaymentMethod(
            type="card",
            payment_channel_code="WALLET" if wallet else "CARD",
            redirect_url="https://shop.example/subscribed",
            card=Card(number=PAYING_CARD, exp_month=1, exp_year=2031, cvc="999")
            if direct
            else None,
        ),
        "description": "Tea of the month",
    }
    if wallet:
        values["billing_details"] = BillingDetails(
            first_name="Ann", address=Address(city="Shanghai", country="CN")
        )
        values["cart_items"] = [CartItem(name="Tea box", quantity=1, unit_amount=990)]
    if direct:
        values["browser_info"] = BrowserInfo(
            javascript_enabled=True, language="en", user_agent="test", color_depth=24
        )
    values.update(changes)
    return SubscriptionRequest(**values)


def wire(request: Any) -> dict[str, Any]:
    """A deep copy of a request's wire form, free to break."""
    return copy.deepcopy(request.to_wire())
