"""The interface's request rules, checked on the wire form (the JSON object sent).

One checker for both sides: the client runs it on what it is about to send, so a mistake is
reported before anything leaves the process (and before the ledger expects anything); the
sandbox runs it on what it receives, so it refuses what the service would. Checking the wire
form rather than the client's dataclasses means what is checked is exactly what is sent.

Each failure is a :class:`~payhooks.service.errors.RequestValidationError` naming the member by
its dotted wire path (``payment_method.payment_method_data.card.exp_year``,
``cart_items[1].quantity``). The first failure found is reported. Members the interface does
not list are left alone (the service's record has "further fields: not shown").
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from payhooks.service.errors import RequestValidationError
from payhooks.service.interface.limits import (
    DESCRIPTION_LENGTH,
    EXTERNAL_IDENTIFIER_LENGTH,
    MAX_AMOUNT_MINOR,
    SUBJECT_MAX_LENGTH,
)

__all__ = [
    "TransactionShape",
    "is_direct_mode",
    "validate_subscription",
    "validate_transaction",
]

_CURRENCY = re.compile(r"[A-Z]{3}", re.ASCII)
_CARD_NUMBER = re.compile(r"[0-9]{12,19}", re.ASCII)
_CVC = re.compile(r"[0-9]{3,4}", re.ASCII)
_ADDRESS_MEMBERS = (
    "city",
    "country",
    "postal_code",
    "state",
    "state_code",
    "house_number_or_name",
    "line1",
    "line2",
    "organization",
)
_CUSTOMER_MEMBERS = (
    "display_name",
    "external_identifier",
    "first_name",
    "last_name",
    "email_address",
    "phone_number",
    "account_number",
)
_CART_TEXT = ("name", "description", "external_identifier", "sku", "product_url", "image_url")
_CART_INTEGERS = ("quantity", "unit_amount", "discount_amount", "tax_amount")
_BROWSER_BOOLEANS = ("javascript_enabled", "java_enabled")
_BROWSER_TEXT = ("language", "user_agent", "user_device", "accept_header")
_BROWSER_INTEGERS = ("color_depth", "screen_height", "screen_width", "time_zone_offset")


class TransactionShape(StrEnum):
    """The three bodies of ``POST /v4/transactions`` (interface 4.2)."""

    #: A. Card via a card processor.
    CARD = "card"
    #: B. Redirect wallet via a payment orchestrator.
    ORCHESTRATOR_WALLET = "orchestrator_wallet"
    #: C. Direct redirect wallet.
    DIRECT_WALLET = "direct_wallet"


def validate_transaction(body: Mapping[str, Any], shape: TransactionShape) -> None:
    """Check a transaction body of ``shape``.

    :raises RequestValidationError: naming the first member at fault.
    """
    _check_payment_basics(body, "")
    method = _object(body, "payment_method", "", required=True)
    assert method is not None
    _text(method, "method", "payment_method.", required=True)
    if shape is TransactionShape.CARD:
        data = _object(method, "payment_method_data", "payment_method.", required=True)
        assert data is not None
        path = "payment_method.payment_method_data."
        if data.get("type") != "card":
            raise RequestValidationError(f"{path}type", "must be 'card' for a card transaction")
        _card(data, f"{path}card", required=True)
        _text(body, "description", "", required=False)
        _object(body, "metadata", "", required=False)
    elif shape is TransactionShape.ORCHESTRATOR_WALLET:
        data = _object(method, "payment_method_data", "payment_method.", required=True)
        assert data is not None
        path = "payment_method.payment_method_data."
        _text(data, "type", path, required=True)
        _url(data, "returnUrl", path, required=True)
        _text(body, "merchant_order_id", "", required=False)
    else:
        _url(method, "redirect_url", "payment_method.", required=True)
        _url(method, "cancel_url", "payment_method.", required=True)
        _text(body, "subject", "", required=False, longest=SUBJECT_MAX_LENGTH)
        _text(body, "body", "", required=False)
        _text(body, "timeout_express", "", required=False)
    if shape is not TransactionShape.DIRECT_WALLET:
        for name in ("billing_address", "shipping_address"):
            _address(body, name, "")


def is_direct_mode(body: Mapping[str, Any]) -> bool:
    """Whether a subscription sends card data (Direct API mode) rather than using checkout.

    The interface does not show how checkout mode is selected; payhooks' assumption: a
    ``payment_method.card`` object (the card members of shape A) is Direct API mode, its
    absence is checkout mode (the answer carries ``payment_url_link``).
    """
    method = body.get("payment_method")
    return isinstance(method, Mapping) and "card" in method


def validate_subscription(
    body: Mapping[str, Any], *, wallet_channel_codes: Collection[str]
) -> None:
    """Check a subscription body (interface 4.1 and section 8).

    :param wallet_channel_codes: the ``payment_channel_code`` values that make
        ``billing_details`` and ``cart_items`` required (the interface's
        ``<wallet_channel_code>``).
    :raises RequestValidationError: naming the first member at fault.
    """
    _check_payment_basics(body, "")
    customer = _object(body, "customer", "", required=True)
    assert customer is not None
    for name in _CUSTOMER_MEMBERS:
        _text(customer, name, "customer.", required=False)
    plan = _object(body, "plan", "", required=True)
    assert plan is not None
    for name in ("name", "interval", "billing_cycle_anchor"):
        _text(plan, name, "plan.", required=False)
    if "currency" in plan:
        _currency(plan, "currency", "plan.")
    _integer(plan, "amount", "plan.", required=False, low=0, high=MAX_AMOUNT_MINOR)
    _integer(plan, "trial_period_days", "plan.", required=False, low=0)
    _integer(plan, "payment_attempts", "plan.", required=False, low=1)
    _integer(plan, "interval_time", "plan.", required=False, low=0)

    method = _object(body, "payment_method", "", required=True)
    assert method is not None
    _text(method, "payment_channel_code", "payment_method.", required=False)
    _text(method, "type", "payment_method.", required=True)
    _url(method, "redirect_url", "payment_method.", required=False)
    _url(method, "webhooks_url", "payment_method.", required=False)
    _card(method, "payment_method.card", required=False)

    wallet = method.get("payment_channel_code") in wallet_channel_codes
    billing = _object(body, "billing_details", "", required=wallet)
    if billing is not None:
        for name in ("first_name", "last_name", "email_address", "phone_number"):
            _text(billing, name, "billing_details.", required=False)
        _address(billing, "address", "billing_details.")
    _cart_items(body, required=wallet)
    browser = _object(body, "browser_info", "", required=is_direct_mode(body))
    if browser is not None:
        for name in _BROWSER_BOOLEANS:
            _boolean(browser, name, "browser_info.")
        for name in _BROWSER_TEXT:
            _text(browser, name, "browser_info.", required=False)
        for name in _BROWSER_INTEGERS:
            _integer(browser, name, "browser_info.", required=False)
    if "trial_end" in body:
        _timestamp(body, "trial_end", "")
    low, high = DESCRIPTION_LENGTH
    _text(body, "description", "", required=False, shortest=low, longest=high)
    _object(body, "metadata", "", required=False)


# -- members -------------------------------------------------------------------------------


def _check_payment_basics(body: Mapping[str, Any], path: str) -> None:
    if not isinstance(body, Mapping):
        raise RequestValidationError("body", "must be a JSON object")
    low, high = EXTERNAL_IDENTIFIER_LENGTH
    _text(body, "external_identifier", path, required=True, shortest=low, longest=high)
    _integer(body, "amount", path, required=True, low=1, high=MAX_AMOUNT_MINOR)
    _currency(body, "currency", path)


def _present(obj: Mapping[str, Any], name: str, path: str, required: bool) -> bool:
    if name in obj and obj[name] is not None:
        return True
    if required:
        raise RequestValidationError(f"{path}{name}", "is required")
    return False


def _text(
    obj: Mapping[str, Any],
    name: str,
    path: str,
    *,
    required: bool,
    shortest: int = 1,
    longest: int | None = None,
) -> None:
    if not _present(obj, name, path, required):
        return
    value = obj[name]
    if not isinstance(value, str):
        raise RequestValidationError(f"{path}{name}", "must be a string")
    if len(value) < shortest or (longest is not None and len(value) > longest):
        span = f"{shortest} to {longest}" if longest is not None else f"at least {shortest}"
        raise RequestValidationError(
            f"{path}{name}", f"must be {span} characters long, not {len(value)}"
        )


def _integer(
    obj: Mapping[str, Any],
    name: str,
    path: str,
    *,
    required: bool,
    low: int | None = None,
    high: int | None = None,
) -> None:
    if not _present(obj, name, path, required):
        return
    value = obj[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestValidationError(f"{path}{name}", "must be an integer")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"from {low}" if low is not None else ""
        bounds += f" to {high}" if high is not None else " or more"
        raise RequestValidationError(f"{path}{name}", f"must be {bounds.strip()}, not {value}")


def _boolean(obj: Mapping[str, Any], name: str, path: str) -> None:
    if _present(obj, name, path, False) and not isinstance(obj[name], bool):
        raise RequestValidationError(f"{path}{name}", "must be true or false")


def _currency(obj: Mapping[str, Any], name: str, path: str) -> None:
    _present(obj, name, path, True)
    value = obj[name]
    if not isinstance(value, str) or _CURRENCY.fullmatch(value) is None:
        raise RequestValidationError(
            f"{path}{name}", "must be a three-letter upper-case ISO 4217 code"
        )


def _object(
    obj: Mapping[str, Any], name: str, path: str, *, required: bool
) -> Mapping[str, Any] | None:
    if not _present(obj, name, path, required):
        return None
    value = obj[name]
    if not isinstance(value, Mapping):
        raise RequestValidationError(f"{path}{name}", "must be an object")
    return value


def _url(obj: Mapping[str, Any], name: str, path: str, *, required: bool) -> None:
    _text(obj, name, path, required=required, longest=2048)
    if name in obj and obj[name] is not None:
        parts = urlsplit(obj[name])
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise RequestValidationError(f"{path}{name}", "must be an absolute http(s) URL")


def _timestamp(obj: Mapping[str, Any], name: str, path: str) -> None:
    _text(obj, name, path, required=True)
    try:
        moment = datetime.fromisoformat(obj[name])
    except ValueError:
        raise RequestValidationError(f"{path}{name}", "must be an ISO 8601 timestamp") from None
    if moment.utcoffset() is None:
        raise RequestValidationError(f"{path}{name}", "must carry a UTC offset")


def _card(obj: Mapping[str, Any], path: str, *, required: bool) -> None:
    parent, _, name = path.rpartition(".")
    card = _object(obj, name, f"{parent}.", required=required)
    if card is None:
        return
    number = card.get("number")
    if not isinstance(number, str) or _CARD_NUMBER.fullmatch(number) is None:
        raise RequestValidationError(f"{path}.number", "must be a string of 12 to 19 digits")
    _integer(card, "exp_month", f"{path}.", required=True, low=1, high=12)
    _integer(card, "exp_year", f"{path}.", required=True, low=1000, high=9999)
    cvc = card.get("cvc")
    if not isinstance(cvc, str) or _CVC.fullmatch(cvc) is None:
        raise RequestValidationError(f"{path}.cvc", "must be a string of 3 or 4 digits")


def _address(obj: Mapping[str, Any], name: str, path: str) -> None:
    address = _object(obj, name, path, required=False)
    if address is not None:
        for member in _ADDRESS_MEMBERS:
            _text(address, member, f"{path}{name}.", required=False)


def _cart_items(body: Mapping[str, Any], *, required: bool) -> None:
    if not _present(body, "cart_items", "", required):
        return
    items = body["cart_items"]
    if not isinstance(items, list) or (required and not items):
        raise RequestValidationError("cart_items", "must be a non-empty array")
    for index, item in enumerate(items):
        path = f"cart_items[{index}]."
        if not isinstance(item, Mapping):
            raise RequestValidationError(path[:-1], "must be an object")
        for name in (*_CART_TEXT, "product_type"):
            _text(item, name, path, required=False)
        for name in _CART_INTEGERS:
            _integer(item, name, path, required=name == "quantity", low=0)
        categories = item.get("categories")
        if categories is not None and (
            not isinstance(categories, list) or not all(isinstance(c, str) for c in categories)
        ):
            raise RequestValidationError(f"{path}categories", "must be an array of strings")
