"""Notification bodies in the canonical shape: the documented members at their documented
places, every value a non-empty string. The sorted-fields schemes accept only such bodies
(:mod:`payhooks.verify.notification_shape`), so tests that sign a body for every scheme use
these."""

from __future__ import annotations

import json
from typing import Any

from tests.support.app import FORM_MEMBERS

__all__ = ["NOTIFICATION", "PROVIDERS", "notification_document"]

#: The provider names of :data:`FORM_MEMBERS`: what a ``sorted-fields-hmac`` receiver must be
#: told (its ``providers`` option) to read the card and orchestrator forms.
PROVIDERS = ("stripe", "adyen")


def notification_document(form: str = "wallet", **payment_data: str) -> dict[str, Any]:
    """A notification of ``form`` for ``order-1`` (25.00 CNY, paid), ``payment_data``
    members added or replaced."""
    return {
        "ll_transaction_id": "ll-1",
        "merchant_transaction_id": "order-1",
        "payment_data": {
            "payment_status": "PS",
            "payment_amount": "25.00",
            "payment_currency_code": "CNY",
            "payment_time": "20261121120000",
            **FORM_MEMBERS[form],
            **payment_data,
        },
    }


#: A wallet notification as bytes: a body every scheme signs and accepts.
NOTIFICATION = json.dumps(notification_document()).encode()
