"""marshmallow fields for the three members whose text has rules: amount, currency, time.

Each takes the service's string and nothing else (a JSON number for the amount is refused:
it would have been a float somewhere). Patterns spell out ``[0-9]`` and use ``fullmatch``:
``\\d`` would also take digits from other scripts (fullwidth, Arabic-Indic...), and ``$``
a trailing newline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from marshmallow import fields

from payhooks.storage import UnknownCurrencyError, minor_unit_exponent

__all__ = ["Amount", "CurrencyCode", "PaymentTime"]

_AMOUNT = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)
_CURRENCY = re.compile(r"[A-Za-z]{3}", re.ASCII)
_PAYMENT_TIME = re.compile(r"[0-9]{14}", re.ASCII)


class Amount(fields.Field[Decimal]):
    """A decimal amount in major units, exactly as written: ``"25.00"`` is ``Decimal("25.00")``.

    ASCII digits, optionally a decimal point and more digits; signs, exponents, ``NaN``,
    spaces and separators are refused. Whether the amount is a whole number of minor units,
    and whether it may lack a decimal point, depend on the currency, so the schema checks both
    once both members are read: a bare ``2500`` is taken only in a zero-decimal currency
    (JPY), where minor and major units are the same; elsewhere it could be minor units, so
    it is refused rather than guessed.
    """

    default_error_messages = {
        "type": "Not a valid string.",
        "invalid": (
            "Not a valid amount: ASCII digits, a decimal point and digits (such as 25.00), "
            "with no sign, exponent, spaces or separators."
        ),
    }

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> Decimal:
        if not isinstance(value, str):
            raise self.make_error("type")
        if _AMOUNT.fullmatch(value) is None:
            raise self.make_error("invalid")
        return Decimal(value)


class CurrencyCode(fields.Field[str]):
    """An active ISO 4217 code with a minor unit, returned upper case.

    Lower case (``cny``, as some processors write it) is accepted and upper-cased: the letters
    name one currency either way. Codes with no minor unit (``XXX``, ``XAU``) are refused.
    """

    default_error_messages = {
        "type": "Not a valid string.",
        "invalid": "Not a currency code: three ASCII letters, such as CNY.",
        "unknown": "Not an active ISO 4217 currency code.",
    }

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> str:
        if not isinstance(value, str):
            raise self.make_error("type")
        if _CURRENCY.fullmatch(value) is None:
            raise self.make_error("invalid")
        code = value.upper()
        try:
            minor_unit_exponent(code)
        except UnknownCurrencyError as err:
            raise self.make_error("unknown") from err
        return code


class PaymentTime(fields.Field[datetime]):
    """``YYYYMMDDHHMMSS``: exactly fourteen ASCII digits naming a real calendar time.

    Returns a naive datetime: which zone it is in depends on the delivery, so the parser
    applies it. A leap second (``...235960``) is refused, as Python's datetime has none.
    """

    default_error_messages = {
        "type": "Not a valid string.",
        "format": "Not a payment time: fourteen ASCII digits, YYYYMMDDHHMMSS.",
        "invalid": "Not a real calendar time.",
    }

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> datetime:
        if not isinstance(value, str):
            raise self.make_error("type")
        if _PAYMENT_TIME.fullmatch(value) is None:
            raise self.make_error("format")
        # Fourteen ASCII digits (checked above): split as one number.
        rest, second = divmod(int(value), 100)
        rest, minute = divmod(rest, 100)
        rest, hour = divmod(rest, 100)
        rest, day = divmod(rest, 100)
        year, month = divmod(rest, 100)
        try:
            # Naive on purpose: the parser applies the delivery's zone.
            return datetime(year, month, day, hour, minute, second)
        except ValueError as err:
            raise self.make_error("invalid") from err
