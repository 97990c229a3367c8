"""What the sandbox keeps in memory, and the wire forms it answers with.

The wire forms follow interface section 2; where the transaction's "further fields" are not
shown, the sandbox adds ``amount``, ``currency`` and ``created_at`` (sync needs them), and lists
transactions in the same object (payhooks' assumption).
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from payhooks.service.errors import ServiceError
from payhooks.service.interface import TransactionShape, minor_unit_exponent

__all__ = [
    "SandboxBuyer",
    "SandboxError",
    "SandboxSubscription",
    "SandboxTransaction",
    "major_units",
    "next_period",
    "trial_end_of",
]


class SandboxError(ServiceError):
    """A request the sandbox refuses: the HTTP status, a stable code, and the field if any.

    The interface does not show the service's error body; the sandbox answers
    ``{"type": "error", "status": ..., "code": ..., "message": ..., "field": ...}``.
    """

    def __init__(self, status: int, code: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message, code=code)
        self.status = status
        self.field = field

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": "error",
            "status": self.status,
            "code": self.code,
            "message": self.message,
        }
        if self.field is not None:
            body["field"] = self.field
        return body


@dataclass(slots=True, kw_only=True)
class SandboxTransaction:
    """One payment: a one-off transaction, or a subscription's first period."""

    id: str
    merchant: str
    shape: TransactionShape
    #: ``payment_method.method`` (for a subscription's period: the processor or ``checkout``).
    method: str
    external_identifier: str
    amount: int
    currency: str
    created_at: datetime
    #: ``processing``, then ``succeeded``, ``failed`` or ``cancelled``.
    status: str = "processing"
    notify_url: str | None = None
    #: Shape B: ``returnUrl``; shape C: ``redirect_url`` and ``cancel_url``.
    return_url: str | None = None
    redirect_url: str | None = None
    cancel_url: str | None = None
    payment_url: str | None = None
    #: The card processor's intent id or the orchestrator's PSP reference.
    provider_reference: str | None = None
    subscription_id: str | None = None

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": "transaction",
            "id": self.id,
            "status": self.status,
            "external_identifier": self.external_identifier,
            "amount": self.amount,
            "currency": self.currency,
            "created_at": self.created_at.isoformat(timespec="microseconds"),
        }
        if self.payment_url is not None:
            body["payment_url"] = self.payment_url
        if self.shape is TransactionShape.CARD and self.provider_reference is not None:
            body[f"{self.method}_payment_intent_id"] = self.provider_reference
        return body


@dataclass(slots=True, kw_only=True)
class SandboxSubscription:
    """One subscription and the request that made it."""

    id: str
    merchant: str
    request: dict[str, Any]
    created: datetime
    status: str
    current_period_start: datetime
    current_period_end: datetime
    first_transaction_id: str
    trial_end: datetime | None = None
    payment_url_link: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        request = self.request
        method = request["payment_method"]
        payment_method: dict[str, Any] = {"type": method["type"]}
        card = method.get("card")
        if card is not None:
            payment_method["card"] = {
                "last4": card["number"][-4:],
                "expiration_date": f"{card['exp_month']:02d}/{card['exp_year'] % 100:02d}",
            }
        return {
            "id": self.id,
            "object": "subscription",
            "external_identifier": request["external_identifier"],
            "amount": request["amount"],
            "currency": request["currency"],
            "created": self.created.isoformat(timespec="microseconds"),
            "customer": request["customer"],
            "plan": request["plan"],
            "payment_method": payment_method,
            "status": self.status,
            "current_period_start": self.current_period_start.isoformat(timespec="microseconds"),
            "current_period_end": self.current_period_end.isoformat(timespec="microseconds"),
            "next_billing_date": self.current_period_end.date().isoformat(),
            "trial_start": None
            if self.trial_end is None
            else self.created.isoformat(timespec="microseconds"),
            "trial_end": None
            if self.trial_end is None
            else self.trial_end.isoformat(timespec="microseconds"),
            # An object (2.4), so ``{}`` when the request had none.
            "metadata": request.get("metadata", {}),
            "payment_url_link": self.payment_url_link,
        }


@dataclass(slots=True, kw_only=True)
class SandboxBuyer:
    """2.2."""

    id: str
    merchant: str
    display_name: str
    external_identifier: str | None
    created_at: datetime
    updated_at: datetime

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "buyer",
            "display_name": self.display_name,
            "external_identifier": self.external_identifier,
            "created_at": self.created_at.isoformat(timespec="microseconds"),
            "updated_at": self.updated_at.isoformat(timespec="microseconds"),
        }


def major_units(amount_minor: int, currency: str) -> str:
    """``payment_amount``: major units with two decimals, as the interface writes it (2500 CNY
    -> ``25.00``, 3500 JPY -> ``3500.00``), and three for a three-decimal currency, whose
    amounts two cannot carry (12345 KWD -> ``12.345``)."""
    exponent = minor_unit_exponent(currency)
    return f"{Decimal(amount_minor).scaleb(-exponent):.{max(2, exponent)}f}"


def trial_end_of(request: Mapping[str, Any], now: datetime) -> datetime | None:
    """When the trial of a subscription created ``now`` ends: the request's ``trial_end``,
    else ``now`` plus ``plan.trial_period_days`` when that is above 0, else no trial."""
    if "trial_end" in request:
        return datetime.fromisoformat(request["trial_end"])
    days = request["plan"].get("trial_period_days")
    return now + timedelta(days=days) if days else None


def next_period(start: datetime, interval: str | None) -> datetime:
    """The end of the billing period that starts at ``start``.

    The interval's allowed values are not shown; the sandbox reads ``day``, ``week``,
    ``month`` (the default, also for anything else) and ``year``.
    """
    if interval == "day":
        return start + timedelta(days=1)
    if interval == "week":
        return start + timedelta(weeks=1)
    months = 12 if interval == "year" else 1
    month_index = start.month - 1 + months
    year, month = start.year + month_index // 12, month_index % 12 + 1
    day = min(start.day, calendar.monthrange(year, month)[1])
    return start.replace(year=year, month=month, day=day)
