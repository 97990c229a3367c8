"""The marshmallow schemas of a notification body and the records they load into.

Fields are declared on the class with ``data_key`` naming the service's members. Unknown
members are neither refused nor mixed into the loaded data (where one named like an attribute
could overwrite a checked value): the schemas exclude them, and the ``post_load`` hooks collect
them from the original input into ``extra``, shaped like the body::

    {"<unknown top-level member>": ..., "payment_data": {"<unknown member>": ...}}

(``payment_data`` appears in ``extra`` only when it has unknown members.) The schemas hold no
per-call state, so one instance of each serves every thread; the zone and the status map are
applied afterwards, in :mod:`receiver.payloads.parse`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from marshmallow import (
    EXCLUDE,
    Schema,
    ValidationError,
    fields,
    post_load,
    validate,
    validates_schema,
)

from receiver.payloads.fields import Amount, CurrencyCode, PaymentTime
from receiver.payloads.forms import FormMatch, detect_form
from storage import MAX_AMOUNT_MINOR as STORAGE_MAX_AMOUNT_MINOR
from storage.currencies import to_minor_units

__all__ = [
    "MAX_AMOUNT_MINOR",
    "MAX_EXTERNAL_IDENTIFIER_LENGTH",
    "MAX_TRANSACTION_ID_LENGTH",
    "Notification",
    "NotificationSchema",
    "PaymentData",
    "PaymentDataSchema",
]

#: The largest amount in minor units: the ledger's own bound (:data:`storage.MAX_AMOUNT_MINOR`),
#: so that an amount the ledger would refuse is an invalid payload (422, not retried) rather
#: than a failure after the delivery was stored (503, retried for ever).
MAX_AMOUNT_MINOR = STORAGE_MAX_AMOUNT_MINOR
#: ``merchant_transaction_id`` is the merchant's ``external_identifier``: 1 to 64 characters.
MAX_EXTERNAL_IDENTIFIER_LENGTH = 64
#: ``ll_transaction_id`` has no published limit; this bounds what the ledger indexes.
MAX_TRANSACTION_ID_LENGTH = 255
#: ``payment_status``, ``status`` and ``result_code`` are short codes.
_MAX_CODE_LENGTH = 64


@dataclass(frozen=True, slots=True)
class PaymentData:
    """A checked ``payment_data`` object; ``local_time`` is still naive."""

    payment_status: str
    amount: Decimal
    currency: str
    amount_minor: int
    local_time: datetime
    form: FormMatch
    provider_status: str | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notification:
    """A checked notification body, before the zone and the status map are applied."""

    transaction_id: str
    external_identifier: str
    payment_data: PaymentData
    extra: dict[str, Any] = field(default_factory=dict)


def _code_field(**kwargs: Any) -> fields.String:
    return fields.String(validate=validate.Length(1, _MAX_CODE_LENGTH), **kwargs)


def _unknown_members(original: Any, known: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in original.items() if key not in known}


def _minor_units(amount: Decimal, currency: str) -> int:
    try:
        amount_minor = to_minor_units(amount, currency)
    except ValueError as err:
        raise ValidationError(
            f"Not a whole number of {currency} minor units.", field_name="amount"
        ) from err
    if amount_minor > MAX_AMOUNT_MINOR:
        raise ValidationError("Too large an amount.", field_name="amount")
    return amount_minor


class PaymentDataSchema(Schema):
    """``payment_data``: the four base members, and the form's own members."""

    class Meta:
        unknown = EXCLUDE

    payment_status = _code_field(required=True)
    amount = Amount(data_key="payment_amount", required=True)
    currency = CurrencyCode(data_key="payment_currency_code", required=True)
    local_time = PaymentTime(data_key="payment_time", required=True)
    status = _code_field()
    result_code = _code_field()

    _KNOWN = frozenset(
        {"payment_status", "payment_amount", "payment_currency_code", "payment_time"}
        | {"status", "result_code"}
    )

    # The validators keep what they worked out under these keys of the loaded data (never a
    # member name: those are excluded or renamed), so that the post_load hook, which runs
    # only when they passed, does not work it out a second time.
    _FORM = "__form"
    _AMOUNT_MINOR = "__amount_minor"

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def _fits_one_form(self, data: dict[str, Any], original_data: Any, **kwargs: Any) -> None:
        if isinstance(original_data, Mapping):
            data[self._FORM] = detect_form(original_data)

    @validates_schema(skip_on_field_errors=False)
    def _whole_minor_units(self, data: dict[str, Any], **kwargs: Any) -> None:
        if "amount" in data and "currency" in data:
            data[self._AMOUNT_MINOR] = _minor_units(data["amount"], data["currency"])

    @post_load(pass_original=True)
    def _make_payment_data(
        self, data: dict[str, Any], original_data: Mapping[str, Any], **kwargs: Any
    ) -> PaymentData:
        form = data.get(self._FORM) or detect_form(original_data)
        amount_minor = data.get(self._AMOUNT_MINOR)
        if amount_minor is None:
            amount_minor = _minor_units(data["amount"], data["currency"])
        known = self._KNOWN if form.member is None else self._KNOWN | {form.member}
        return PaymentData(
            payment_status=data["payment_status"],
            amount=data["amount"],
            currency=data["currency"],
            amount_minor=amount_minor,
            local_time=data["local_time"],
            form=form,
            provider_status=data.get(form.status_member) if form.status_member else None,
            extra=_unknown_members(original_data, known),
        )


class NotificationSchema(Schema):
    """A notification body (interface section 6)."""

    class Meta:
        unknown = EXCLUDE

    transaction_id = fields.String(
        data_key="ll_transaction_id",
        required=True,
        validate=validate.Length(1, MAX_TRANSACTION_ID_LENGTH),
    )
    external_identifier = fields.String(
        data_key="merchant_transaction_id",
        required=True,
        validate=validate.Length(1, MAX_EXTERNAL_IDENTIFIER_LENGTH),
    )
    payment_data = fields.Nested(PaymentDataSchema, required=True)

    _KNOWN = frozenset({"ll_transaction_id", "merchant_transaction_id", "payment_data"})

    @post_load(pass_original=True)
    def _make_notification(
        self, data: dict[str, Any], original_data: Mapping[str, Any], **kwargs: Any
    ) -> Notification:
        extra = _unknown_members(original_data, self._KNOWN)
        payment_data: PaymentData = data["payment_data"]
        if payment_data.extra:
            extra["payment_data"] = payment_data.extra
        return Notification(
            transaction_id=data["transaction_id"],
            external_identifier=data["external_identifier"],
            payment_data=payment_data,
            extra=extra,
        )
