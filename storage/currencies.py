"""ISO 4217 minor units: how many decimals each active currency has.

Both the parser (amount string to minor units) and the ledger (minor units back to a decimal
amount for reports) need this table, so it lives in ``storage``, which the receiver may import.
The table is the ISO 4217 list of active codes (List One), funds codes included; precious
metals, testing and "no currency" codes (``XAU``, ``XTS``, ``XXX``...) have no minor unit and are
refused as payment currencies.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from types import MappingProxyType

__all__ = [
    "MINOR_UNIT_EXPONENTS",
    "TIMES_MINOR_UNIT",
    "UnknownCurrencyError",
    "from_minor_units",
    "minor_unit_exponent",
    "to_minor_units",
]

_ZERO_DECIMAL = "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF"
_THREE_DECIMAL = "BHD IQD JOD KWD LYD OMR TND"
_FOUR_DECIMAL = "CLF UYW"
_TWO_DECIMAL = """
AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP BYN
BZD CAD CDF CHE CHF CHW CNY COP COU CRC CUC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP
GBP GEL GHS GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK
LBP LKR LRD LSL MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK
NPR NZD PAB PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP
STN SVC SYP SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD USN UYU UZS VED VES WST XCD XCG YER
ZAR ZMW ZWG ZWL
"""

#: Code -> number of decimals of its minor unit.
MINOR_UNIT_EXPONENTS: MappingProxyType[str, int] = MappingProxyType(
    {
        **dict.fromkeys(_TWO_DECIMAL.split(), 2),
        **dict.fromkeys(_ZERO_DECIMAL.split(), 0),
        **dict.fromkeys(_THREE_DECIMAL.split(), 3),
        **dict.fromkeys(_FOUR_DECIMAL.split(), 4),
    }
)


class UnknownCurrencyError(ValueError):
    """The code is not an active ISO 4217 currency with a minor unit."""

    code = "unknown_currency"

    def __init__(self, currency: str) -> None:
        self.currency = currency
        self.message = f"{currency!r} is not an active ISO 4217 currency code"
        super().__init__(self.message)


def minor_unit_exponent(currency: str) -> int:
    """The number of decimals of ``currency``'s minor unit (``JPY`` 0, ``KWD`` 3, most 2)."""
    try:
        return MINOR_UNIT_EXPONENTS[currency]
    except KeyError:
        raise UnknownCurrencyError(currency) from None


def to_minor_units(amount: Decimal, currency: str) -> int:
    """``amount`` (major units) as a whole number of minor units.

    Trailing zeros beyond the exponent are fine (``Decimal("2500.00")`` JPY is 2500); an amount
    that is not a whole number of minor units raises :class:`ValueError`, since rounding money
    silently would hide a mismatch.
    """
    exponent = minor_unit_exponent(currency)
    if not amount.is_finite():
        raise ValueError(f"{amount} is not a whole number of {currency} minor units")
    # Shift the exponent through the tuple form: exact, where ``scaleb`` would round to the
    # context's 28 digits and could turn a fraction of a minor unit into a whole one.
    sign, digits, amount_exponent = amount.as_tuple()
    assert isinstance(amount_exponent, int)
    scaled = Decimal((sign, digits, amount_exponent + exponent))
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{amount} is not a whole number of {currency} minor units")
    return int(scaled)


#: Code -> multiply by one minor unit (``Decimal("0.01").__mul__``): an int times it is the
#: amount in major units with exactly the currency's decimals. A report converts two amounts a
#: row, so this is one C call instead of a Decimal, a scaleb and a lookup; the reconciliation
#: row's properties call it directly. A plain dict, not a ``MappingProxyType`` like
#: :data:`MINOR_UNIT_EXPONENTS`, because its lookup is on that path: read it, never change it.
TIMES_MINOR_UNIT: dict[str, Callable[[int], Decimal]] = {
    code: Decimal(1).scaleb(-exponent).__mul__ for code, exponent in MINOR_UNIT_EXPONENTS.items()
}


def from_minor_units(amount_minor: int, currency: str) -> Decimal:
    """``amount_minor`` as a major-unit Decimal with the currency's decimals (2500 CNY -> 25.00)."""
    try:
        times_minor_unit = TIMES_MINOR_UNIT[currency]
    except KeyError:
        if amount_minor == 0:  # nothing, in any currency (a listed-only row's ``XXX`` totals)
            return Decimal(0)
        raise UnknownCurrencyError(currency) from None
    return times_minor_unit(amount_minor)
