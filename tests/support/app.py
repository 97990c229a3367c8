"""What the app fixtures share with the tests that use them: the test secret, the fixtures'
callable types, the members that tell the three notification forms apart, and the body
builder and signer behind the ``make_body`` and ``sign`` fixtures (for fixtures of a wider
scope too)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime

from flask import Flask
from standardwebhooks import Webhook

__all__ = [
    "FORM_MEMBERS",
    "TEST_SECRET",
    "AppFactory",
    "BodyFactory",
    "SignFunction",
    "notification_body",
    "standard_webhooks_signer",
]

#: A Standard Webhooks secret for tests: ``whsec_`` and the base64 of 32 bytes.
TEST_SECRET = "whsec_" + base64.b64encode(b"payhooks-test-secret-0123456789!").decode()

AppFactory = Callable[..., Flask]
BodyFactory = Callable[..., bytes]
SignFunction = Callable[..., dict[str, str]]


#: ``payment_data`` members that only one form carries.
FORM_MEMBERS: dict[str, dict[str, str]] = {
    "card": {"stripe_payment_intent_id": "pi_3Pq", "status": "succeeded"},
    "orchestrator": {"adyen_psp_reference": "PSP8812", "result_code": "Authorised"},
    "wallet": {},
}


def notification_body(
    form: str = "wallet",
    *,
    external_identifier: str = "order-1",
    transaction_id: str = "ll-1",
    status: str = "PS",
    amount: str = "25.00",
    currency: str = "CNY",
    payment_time: str = "20261121120000",
    **payment_data: str,
) -> bytes:
    """A notification body in one of the three forms, as the service writes it."""
    data = {
        "payment_status": status,
        "payment_amount": amount,
        "payment_currency_code": currency,
        "payment_time": payment_time,
        **FORM_MEMBERS[form],
        **payment_data,
    }
    body = {
        "ll_transaction_id": transaction_id,
        "merchant_transaction_id": external_identifier,
        "payment_data": data,
    }
    return json.dumps(body).encode()


def standard_webhooks_signer(secret: str) -> SignFunction:
    """``sign(body, msg_id=..., timestamp=...)``: the three headers, signed by the
    ``standardwebhooks`` package (an independent sender); ids count up from ``msg_test_1``."""
    webhook = Webhook(secret)
    counter = iter(range(1, 1_000_000))

    def signed(
        body: bytes, *, msg_id: str | None = None, timestamp: datetime | None = None
    ) -> dict[str, str]:
        msg_id = msg_id or f"msg_test_{next(counter)}"
        when = timestamp or datetime.now(UTC)
        return {
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(when.timestamp())),
            "webhook-signature": webhook.sign(msg_id, when, body.decode()),
            "content-type": "application/json",
        }

    return signed
