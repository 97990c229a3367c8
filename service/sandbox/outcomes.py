"""What a settled payment produces: the notification's body, and where the customer goes back.

The notification follows interface section 6, in the form of the payment's flow: the card
form adds ``<processor>_payment_intent_id`` and ``status``, the orchestrator form
``<orchestrator>_psp_reference`` and ``result_code``, the direct wallet only the four base
members. The provider words for a failure or a cancellation are not shown by the interface;
these are the providers' usual ones.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from payhooks.service.interface import TransactionShape
from payhooks.service.sandbox.records import SandboxTransaction, major_units

__all__ = ["notification_body", "return_url"]

_CARD_STATUS = {"pay": "succeeded", "fail": "requires_payment_method", "cancel": "canceled"}
_RESULT_CODE = {"pay": "Authorised", "fail": "Refused", "cancel": "Cancelled"}


def notification_body(
    transaction: SandboxTransaction, outcome: str, *, status_code: str, now: datetime
) -> bytes:
    """The notification's bytes; ``now`` in the zone ``payment_time`` is written in."""
    data: dict[str, Any] = {
        "payment_status": status_code,
        "payment_amount": major_units(transaction.amount, transaction.currency),
        "payment_currency_code": transaction.currency,
        "payment_time": now.strftime("%Y%m%d%H%M%S"),
    }
    if transaction.shape is TransactionShape.CARD:
        data[f"{transaction.method}_payment_intent_id"] = transaction.provider_reference
        data["status"] = _CARD_STATUS[outcome]
    elif transaction.shape is TransactionShape.ORCHESTRATOR_WALLET:
        data[f"{transaction.method}_psp_reference"] = transaction.provider_reference
        data["result_code"] = _RESULT_CODE[outcome]
    body = {
        "ll_transaction_id": transaction.id,
        "merchant_transaction_id": transaction.external_identifier,
        "payment_data": data,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def return_url(transaction: SandboxTransaction, outcome: str) -> str | None:
    """Where the customer is sent back: shape B's ``returnUrl`` with ``resultCode`` added (its
    own query kept); shape C's ``redirect_url`` when paid, ``cancel_url`` otherwise (a failure
    included: the interface names no URL for it); None in the card flow."""
    if transaction.return_url is not None:
        return _with_query(transaction.return_url, resultCode=_RESULT_CODE[outcome])
    if outcome == "pay":
        return transaction.redirect_url
    return transaction.cancel_url


def _with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), *params.items()]
    return urlunsplit(parts._replace(query=urlencode(query)))
