"""Typed answers: the transaction (2.3), subscription (2.4), buyer (2.2) and page (2.1).

Timestamps become aware datetimes, ``next_billing_date`` a date, amounts stay integers in minor
units. Members the interface does not list are kept in ``extra`` rather than dropped or refused:
the service's records have "further fields: not shown", and a new one must not break a merchant.
A member the interface lists with the wrong type is a
:class:`~payhooks.service.errors.MalformedResponseError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Generic, TypeVar

from payhooks.service.errors import MalformedResponseError
from payhooks.service.interface import MAX_CURSOR_LENGTH

__all__ = ["Buyer", "CardSummary", "Page", "Subscription", "Transaction"]

_T = TypeVar("_T")
_INTENT_SUFFIX = "_payment_intent_id"


@dataclass(frozen=True, slots=True, kw_only=True)
class Transaction:
    """A transaction as the service answers it (creation) or lists it (``GET /v4/transactions``,
    assumed to carry the same object)."""

    id: str
    #: ``processing`` on creation in every flow.
    status: str
    external_identifier: str
    #: Redirect-wallet flows: where to send the customer.
    payment_url: str | None = None
    #: Card flow: the processor's name (``stripe`` from ``stripe_payment_intent_id``).
    processor: str | None = None
    #: Card flow: the payment intent id at the processor.
    processor_payment_intent_id: str | None = None
    #: Members the interface does not list, as received.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_wire(cls, data: Any) -> Transaction:
        obj = _object(data, "transaction")
        processor = intent = None
        extra: dict[str, Any] = {}
        for name, value in obj.items():
            if name.endswith(_INTENT_SUFFIX) and len(name) > len(_INTENT_SUFFIX):
                processor, intent = name[: -len(_INTENT_SUFFIX)], _text(obj, name, "transaction")
            elif name not in ("type", "id", "status", "external_identifier", "payment_url"):
                extra[name] = value
        return cls(
            id=_text(obj, "id", "transaction"),
            status=_text(obj, "status", "transaction"),
            external_identifier=_text(obj, "external_identifier", "transaction"),
            payment_url=_optional_text(obj, "payment_url", "transaction"),
            processor=processor,
            processor_payment_intent_id=intent,
            extra=extra,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CardSummary:
    """2.7's response form for a card: last four digits and ``MM/YY``."""

    last4: str
    expiration_date: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """2.4."""

    id: str
    external_identifier: str
    amount: int
    currency: str
    created: datetime
    #: One of ``failed``, ``active``, ``past_due``, ``cancelled``.
    status: str
    current_period_start: datetime
    current_period_end: datetime
    next_billing_date: date
    customer: Mapping[str, Any]
    plan: Mapping[str, Any]
    payment_method_type: str
    card: CardSummary | None = None
    trial_start: datetime | None = None
    trial_end: datetime | None = None
    metadata: Mapping[str, Any] | None = None
    #: Checkout mode, or further payment steps: where to send the customer.
    payment_url_link: str | None = None

    @classmethod
    def from_wire(cls, data: Any) -> Subscription:
        obj = _object(data, "subscription")
        where = "subscription"
        method = _object(obj.get("payment_method"), f"{where}.payment_method")
        card_data = method.get("card")
        card = None
        if card_data is not None:
            card_obj = _object(card_data, f"{where}.payment_method.card")
            card = CardSummary(
                last4=_text(card_obj, "last4", f"{where}.payment_method.card"),
                expiration_date=_text(card_obj, "expiration_date", f"{where}.payment_method.card"),
            )
        metadata = obj.get("metadata")
        return cls(
            id=_text(obj, "id", where),
            external_identifier=_text(obj, "external_identifier", where),
            amount=_integer(obj, "amount", where),
            currency=_text(obj, "currency", where),
            created=_timestamp(obj, "created", where),
            status=_text(obj, "status", where),
            current_period_start=_timestamp(obj, "current_period_start", where),
            current_period_end=_timestamp(obj, "current_period_end", where),
            next_billing_date=_date(obj, "next_billing_date", where),
            customer=_object(obj.get("customer"), f"{where}.customer"),
            plan=_object(obj.get("plan"), f"{where}.plan"),
            payment_method_type=_text(method, "type", f"{where}.payment_method"),
            card=card,
            trial_start=_optional_timestamp(obj, "trial_start", where),
            trial_end=_optional_timestamp(obj, "trial_end", where),
            metadata=None if metadata is None else _object(metadata, f"{where}.metadata"),
            payment_url_link=_optional_text(obj, "payment_url_link", where),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Buyer:
    """2.2."""

    id: str
    display_name: str
    external_identifier: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_wire(cls, data: Any) -> Buyer:
        obj = _object(data, "buyer")
        return cls(
            id=_text(obj, "id", "buyer"),
            display_name=_text(obj, "display_name", "buyer"),
            external_identifier=_optional_text(obj, "external_identifier", "buyer"),
            created_at=_timestamp(obj, "created_at", "buyer"),
            updated_at=_timestamp(obj, "updated_at", "buyer"),
        )


@dataclass(frozen=True, slots=True)
class Page(Generic[_T]):
    """2.1: one page of a list. Cursors are opaque: pass them back unchanged."""

    items: Sequence[_T]
    limit: int
    next_cursor: str | None
    previous_cursor: str | None


def page_from_wire(data: Any, item: Any) -> Page[Any]:
    """Read a page envelope, each item with ``item`` (a ``from_wire``)."""
    obj = _object(data, "page")
    items = obj.get("items")
    if not isinstance(items, list):
        raise MalformedResponseError("page.items", "is not an array")
    return Page(
        items=[item(entry) for entry in items],
        limit=_integer(obj, "limit", "page"),
        next_cursor=_cursor(obj, "next_cursor"),
        previous_cursor=_cursor(obj, "previous_cursor"),
    )


# -- readers -------------------------------------------------------------------------------


def _cursor(obj: Mapping[str, Any], name: str) -> str | None:
    """A cursor to pass back (and store): printable, at most :data:`MAX_CURSOR_LENGTH` long."""
    value = _optional_text(obj, name, "page")
    if value is not None and not (0 < len(value) <= MAX_CURSOR_LENGTH and value.isprintable()):
        raise MalformedResponseError(
            f"page.{name}",
            f"is not 1 to {MAX_CURSOR_LENGTH} printable characters",
            code="bad_cursor",
        )
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedResponseError(where, "is not an object")
    return value


def _text(obj: Mapping[str, Any], name: str, where: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise MalformedResponseError(f"{where}.{name}", "is not a string")
    return value


def _optional_text(obj: Mapping[str, Any], name: str, where: str) -> str | None:
    return None if obj.get(name) is None else _text(obj, name, where)


def _integer(obj: Mapping[str, Any], name: str, where: str) -> int:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedResponseError(f"{where}.{name}", "is not an integer")
    return value


def _timestamp(obj: Mapping[str, Any], name: str, where: str) -> datetime:
    text = _text(obj, name, where)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise MalformedResponseError(f"{where}.{name}", "is not an ISO 8601 timestamp") from None
    if moment.utcoffset() is None:
        raise MalformedResponseError(f"{where}.{name}", "has no UTC offset")
    return moment


def _optional_timestamp(obj: Mapping[str, Any], name: str, where: str) -> datetime | None:
    return None if obj.get(name) is None else _timestamp(obj, name, where)


def _date(obj: Mapping[str, Any], name: str, where: str) -> date:
    try:
        return date.fromisoformat(_text(obj, name, where))
    except ValueError:
        raise MalformedResponseError(f"{where}.{name}", "is not a YYYY-MM-DD date") from None
