"""What the app fixtures share with the tests that use them: the test secret, the fixtures'
callable types, and the members that tell the three notification forms apart."""

from __future__ import annotations

import base64
from collections.abc import Callable

from flask import Flask

__all__ = ["FORM_MEMBERS", "TEST_SECRET", "AppFactory", "BodyFactory", "SignFunction"]

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
