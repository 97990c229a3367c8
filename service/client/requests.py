"""Typed requests: the three transaction shapes of interface 4.2 and the subscription of 4.1.

Amounts are integers in the currency's minor unit, as the wire has them (never a float);
times are aware datetimes. Each request turns itself into its wire form with ``to_wire()``;
the client checks that form with :mod:`payhooks.service.interface` before sending it. Card
data never shows in a ``repr`` (only its last four digits), so a logged request leaks nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, ClassVar

from payhooks.service.errors import RequestValidationError
from payhooks.service.interface import TransactionShape

__all__ = [
    "Address",
    "BillingDetails",
    "BrowserInfo",
    "Card",
    "CardTransaction",
    "CartItem",
    "Customer",
    "DirectWalletTransaction",
    "OrchestratorWalletTransaction",
    "Plan",
    "SubscriptionPaymentMethod",
    "SubscriptionRequest",
    "TransactionRequest",
]


def _compact(values: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the members left None: the interface sends an optional member or omits it."""
    return {name: value for name, value in values.items() if value is not None}


def _wire(value: Any) -> Any:
    """A member's wire form: a request part's own, times in ISO 8601, sequences as lists."""
    if isinstance(value, _WireObject):
        return value.to_wire()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_wire(item) for item in value]
    return value


class _WireObject:
    """A request part whose members, in their order, are named as on the wire."""

    __slots__ = ()

    def to_wire(self) -> dict[str, Any]:
        return _compact({f.name: _wire(getattr(self, f.name)) for f in fields(self)})  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, kw_only=True)
class Card(_WireObject):
    """Card data (shape A, and a Direct API mode subscription)."""

    number: str = field(repr=False)
    exp_month: int
    #: Four digits: 2030, not 30.
    exp_year: int
    cvc: str = field(repr=False)

    def __repr__(self) -> str:
        return (
            f"Card(number=<...{self.number[-4:]}>, exp_month={self.exp_month}, "
            f"exp_year={self.exp_year})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Address(_WireObject):
    """Address data (2.8's address members; also ``billing_address``/``shipping_address``)."""

    city: str | None = None
    country: str | None = None
    postal_code: str | None = None
    state: str | None = None
    state_code: str | None = None
    house_number_or_name: str | None = None
    line1: str | None = None
    line2: str | None = None
    organization: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _TransactionBase:
    #: The merchant's reference: the ledger's key, echoed back and in the notification.
    external_identifier: str
    #: In the currency's minor unit (2500 is 25.00 CNY).
    amount: int
    currency: str
    #: ``payment_method.method``: the processor, orchestrator or wallet identifier.
    method: str

    shape: ClassVar[TransactionShape]

    def _base(self) -> dict[str, Any]:
        return {
            "amount": self.amount,
            "currency": self.currency,
            "external_identifier": self.external_identifier,
        }

    def ledger_description(self) -> str | None:
        """What the ledger keeps as the payment's description."""
        return None

    def ledger_metadata(self) -> Mapping[str, Any] | None:
        """What the ledger keeps as the payment's metadata."""
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class CardTransaction(_TransactionBase):
    """A. Card via a card processor: no redirect; the outcome comes by notification."""

    card: Card
    billing_address: Address | None = None
    shipping_address: Address | None = None
    description: str | None = None
    metadata: Mapping[str, Any] | None = None

    shape: ClassVar[TransactionShape] = TransactionShape.CARD

    def to_wire(self) -> dict[str, Any]:
        return _compact(
            {
                **self._base(),
                "payment_method": {
                    "method": self.method,
                    "payment_method_data": {"type": "card", "card": self.card.to_wire()},
                },
                "billing_address": _wire(self.billing_address),
                "shipping_address": _wire(self.shipping_address),
                "description": self.description,
                "metadata": None if self.metadata is None else dict(self.metadata),
            }
        )

    def ledger_description(self) -> str | None:
        return self.description

    def ledger_metadata(self) -> Mapping[str, Any] | None:
        return self.metadata


@dataclass(frozen=True, slots=True, kw_only=True)
class OrchestratorWalletTransaction(_TransactionBase):
    """B. Redirect wallet via a payment orchestrator: the customer is sent to ``payment_url``
    and comes back to ``return_url`` with ``resultCode`` (``Authorised`` is success).

    Where its optional members sit is not shown; payhooks sends them at the top level.
    """

    #: ``payment_method_data.type``: the wallet type identifier.
    wallet_type: str
    #: ``payment_method_data.returnUrl``.
    return_url: str
    billing_address: Address | None = None
    shipping_address: Address | None = None
    merchant_order_id: str | None = None

    shape: ClassVar[TransactionShape] = TransactionShape.ORCHESTRATOR_WALLET

    def to_wire(self) -> dict[str, Any]:
        return _compact(
            {
                **self._base(),
                "payment_method": {
                    "method": self.method,
                    "payment_method_data": {"type": self.wallet_type, "returnUrl": self.return_url},
                },
                "billing_address": _wire(self.billing_address),
                "shipping_address": _wire(self.shipping_address),
                "merchant_order_id": self.merchant_order_id,
            }
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectWalletTransaction(_TransactionBase):
    """C. Direct redirect wallet: ``redirect_url`` after payment, ``cancel_url`` after a
    cancellation. Optional members at the top level (their place is not shown)."""

    redirect_url: str
    cancel_url: str
    #: At most 256 characters.
    subject: str | None = None
    body: str | None = None
    timeout_express: str | None = None

    shape: ClassVar[TransactionShape] = TransactionShape.DIRECT_WALLET

    def to_wire(self) -> dict[str, Any]:
        return _compact(
            {
                **self._base(),
                "payment_method": {
                    "method": self.method,
                    "redirect_url": self.redirect_url,
                    "cancel_url": self.cancel_url,
                },
                "subject": self.subject,
                "body": self.body,
                "timeout_express": self.timeout_express,
            }
        )

    def ledger_description(self) -> str | None:
        return self.subject


TransactionRequest = CardTransaction | OrchestratorWalletTransaction | DirectWalletTransaction


@dataclass(frozen=True, slots=True, kw_only=True)
class Customer(_WireObject):
    """2.5: every member a string; which are required is not shown, so none is here."""

    display_name: str | None = None
    external_identifier: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    email_address: str | None = None
    phone_number: str | None = None
    account_number: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan(_WireObject):
    """2.6. ``amount`` is what each later period costs, in minor units."""

    amount: int
    currency: str
    name: str | None = None
    interval: str | None = None
    trial_period_days: int | None = None
    billing_cycle_anchor: str | None = None
    payment_attempts: int | None = None
    interval_time: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionPaymentMethod(_WireObject):
    """2.7's request form. ``card`` given means Direct API mode (``browser_info`` becomes
    required); without it the subscription uses checkout mode (payhooks' assumption)."""

    payment_channel_code: str | None = None
    type: str
    redirect_url: str | None = None
    webhooks_url: str | None = None
    card: Card | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BillingDetails(_WireObject):
    """2.8."""

    first_name: str | None = None
    last_name: str | None = None
    email_address: str | None = None
    phone_number: str | None = None
    address: Address | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CartItem(_WireObject):
    """2.9. Amounts in minor units."""

    name: str
    quantity: int
    unit_amount: int | None = None
    description: str | None = None
    external_identifier: str | None = None
    sku: str | None = None
    product_url: str | None = None
    image_url: str | None = None
    product_type: str | None = None
    discount_amount: int | None = None
    tax_amount: int | None = None
    categories: Sequence[str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BrowserInfo(_WireObject):
    """2.10: the customer's browser, for the service's anti-fraud (Direct API mode)."""

    javascript_enabled: bool | None = None
    java_enabled: bool | None = None
    language: str | None = None
    user_agent: str | None = None
    user_device: str | None = None
    accept_header: str | None = None
    color_depth: int | None = None
    screen_height: int | None = None
    screen_width: int | None = None
    time_zone_offset: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionRequest(_WireObject):
    """4.1's body. ``amount`` is the first period; ``plan.amount`` the later ones."""

    external_identifier: str
    amount: int
    currency: str
    customer: Customer
    plan: Plan
    payment_method: SubscriptionPaymentMethod
    billing_details: BillingDetails | None = None
    cart_items: Sequence[CartItem] | None = None
    browser_info: BrowserInfo | None = None
    #: Aware; sent as ISO 8601 with its offset.
    trial_end: datetime | None = None
    #: 1 to 255 characters.
    description: str | None = None
    metadata: Mapping[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        if self.trial_end is not None and self.trial_end.utcoffset() is None:
            raise RequestValidationError("trial_end", "must be an aware datetime")
        return _WireObject.to_wire(self)
