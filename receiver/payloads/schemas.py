"""The marshmallow schemas of a notification body and the record they load into.

Fields are declared on the class with ``data_key`` naming the service's members. Unknown
members are neither refused nor mixed into the loaded data (where one named like an attribute
could overwrite a checked value): the schemas exclude them, and the ``post_load`` hook collects
them from the original input into ``extra``, shaped like the body::

    {"<unknown top-level member>": ..., "payment_data": {"<unknown member>": ...}}

(``payment_data`` appears in ``extra`` only when it has unknown members.) The schemas hold no
per-call state, so one instance of each serves every thread; the zone and the status map are
applied afterwards, in :mod:`payhooks.receiver.payloads.parse`.

Hooks run on every notification, so there are two: one ``validates_schema`` on
``payment_data`` for the checks that read more than one member, and one ``post_load`` on the
notification, which runs only when both levels are valid and builds the one record from both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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

from payhooks.receiver.payloads.fields import Amount, CurrencyCode, PaymentTime
from payhooks.receiver.payloads.forms import FormMatch, detect_form
from payhooks.storage import MAX_AMOUNT_MINOR as STORAGE_MAX_AMOUNT_MINOR
from payhooks.storage import minor_unit_exponent, to_minor_units

__all__ = [
    "MAX_AMOUNT_MINOR",
    "MAX_EXTERNAL_IDENTIFIER_LENGTH",
    "MAX_TRANSACTION_ID_LENGTH",
    "Notification",
    "NotificationSchema",
    "PaymentDataSchema",
]

#: The largest amount in minor units: the ledger's own bound
#: (:data:`payhooks.storage.MAX_AMOUNT_MINOR`), so that an amount the ledger would refuse is an
#: invalid payload (422, not retried) rather than a failure after the delivery was stored (503,
#: retried for ever).
MAX_AMOUNT_MINOR = STORAGE_MAX_AMOUNT_MINOR
#: ``merchant_transaction_id`` is the merchant's ``external_identifier``: 1 to 64 characters.
MAX_EXTERNAL_IDENTIFIER_LENGTH = 64
#: ``ll_transaction_id`` has no published limit; this bounds what the ledger indexes.
MAX_TRANSACTION_ID_LENGTH = 255
#: ``payment_status``, ``status`` and ``result_code`` are short codes.
_MAX_CODE_LENGTH = 64

_AMOUNT_MEMBER = "payment_amount"
# The validator keeps what it worked out under these keys of the loaded ``payment_data`` (never
# a member name: those are excluded or renamed), so that the post_load hook, which runs only
# when it passed, does not work it out a second time.
_FORM = "__form"
_AMOUNT_MINOR = "__amount_minor"
_BARE_AMOUNT_WITHOUT_CURRENCY = (
    "An amount without a decimal point is taken only in a zero-decimal currency (such as JPY)."
)


@dataclass(slots=True)
class Notification:
    """A checked notification body, before the zone and the status map are applied.

    Not frozen: it lives only inside :func:`~payhooks.receiver.payloads.parse_notification`,
    which builds it and reads it once.
    """

    transaction_id: str
    external_identifier: str
    payment_status: str
    amount: Decimal
    currency: str
    amount_minor: int
    #: ``payment_time``, still naive.
    local_time: datetime
    form: FormMatch
    provider_status: str | None
    extra: dict[str, Any]


def _code_field(**kwargs: Any) -> fields.String:
    return fields.String(validate=validate.Length(1, _MAX_CODE_LENGTH), **kwargs)


def _unknown_members(
    original: Mapping[str, Any], known: frozenset[str], also_known: str | None = None
) -> dict[str, Any]:
    return {key: value for key, value in original.items() if key not in known and key != also_known}


def _minor_units(amount: Decimal, currency: str) -> int:
    """``amount`` in ``currency``'s minor units, within the ledger's bound.

    An amount written without a decimal point (its exponent is 0) is taken only in a
    zero-decimal currency, where it cannot be mistaken for minor units.

    :raises ValidationError: with the message for the amount member.
    """
    if amount.as_tuple().exponent == 0 and minor_unit_exponent(currency) != 0:
        raise ValidationError(f"A {currency} amount needs a decimal point (such as 25.00).")
    try:
        amount_minor = to_minor_units(amount, currency)
    except ValueError as err:
        raise ValidationError(f"Not a whole number of {currency} minor units.") from err
    if amount_minor > MAX_AMOUNT_MINOR:
        raise ValidationError("Too large an amount.")
    return amount_minor


class PaymentDataSchema(Schema):
    """``payment_data``: the four base members, and the form's own members.

    Loads into a dict (the notification's ``post_load`` makes the record), which also holds
    the form and the amount in minor units.
    """

    class Meta:
        unknown = EXCLUDE

    payment_status = _code_field(required=True)
    amount = Amount(data_key=_AMOUNT_MEMBER, required=True)
    currency = CurrencyCode(data_key="payment_currency_code", required=True)
    local_time = PaymentTime(data_key="payment_time", required=True)
    status = _code_field()
    result_code = _code_field()

    _KNOWN = frozenset(
        {"payment_status", _AMOUNT_MEMBER, "payment_currency_code", "payment_time"}
        | {"status", "result_code"}
    )

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def _check_across_members(
        self, data: dict[str, Any], original_data: Any, **kwargs: Any
    ) -> None:
        """The form, told by the members' names, and the amount in minor units, which needs
        the currency too.

        Both run even when a field failed, so that every problem is reported at once; their
        messages are merged as marshmallow would merge two validators' (the form's are keyed
        by provider member, status member or ``"_schema"``, never by the amount's member).
        """
        errors: dict[str, Any] = {}
        if isinstance(original_data, Mapping):
            try:
                data[_FORM] = detect_form(original_data)
            except ValidationError as err:
                errors.update(err.messages_dict)
        if "amount" in data and "currency" in data:
            try:
                data[_AMOUNT_MINOR] = _minor_units(data["amount"], data["currency"])
            except ValidationError as err:
                errors[_AMOUNT_MEMBER] = err.messages
        elif "amount" in data and data["amount"].as_tuple().exponent == 0:
            # No currency to tell whether a bare amount is major units: refused with it.
            errors[_AMOUNT_MEMBER] = [_BARE_AMOUNT_WITHOUT_CURRENCY]
        if errors:
            raise ValidationError(errors)


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
        # Runs only when nothing failed, so payment_data was a mapping and the validator
        # kept both of its results.
        payment: dict[str, Any] = data["payment_data"]
        form: FormMatch = payment[_FORM]
        extra = _unknown_members(original_data, self._KNOWN)
        payment_extra = _unknown_members(
            original_data["payment_data"], PaymentDataSchema._KNOWN, form.member
        )
        if payment_extra:
            extra["payment_data"] = payment_extra
        return Notification(
            transaction_id=data["transaction_id"],
            external_identifier=data["external_identifier"],
            payment_status=payment["payment_status"],
            amount=payment["amount"],
            currency=payment["currency"],
            amount_minor=payment[_AMOUNT_MINOR],
            local_time=payment["local_time"],
            form=form,
            provider_status=payment.get(form.status_member) if form.status_member else None,
            extra=extra,
        )
