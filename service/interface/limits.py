"""The interface's limits (section 8) and the choices payhooks makes where it shows none.

Every value the interface leaves open is named here once, so the client, the sandbox and
``docs/service.md`` agree; the sandbox's settings can override the ones a merchant may need
another answer for.
"""

from __future__ import annotations

from types import MappingProxyType

from payhooks.storage import MAX_AMOUNT_MINOR

__all__ = [
    "DEFAULT_PAGE_LIMIT",
    "DESCRIPTION_LENGTH",
    "EXTERNAL_IDENTIFIER_LENGTH",
    "MAX_AMOUNT_MINOR",
    "MAX_CURSOR_LENGTH",
    "MAX_PAGE_LIMIT",
    "MINOR_UNIT_EXPONENTS",
    "SUBJECT_MAX_LENGTH",
    "minor_unit_exponent",
]

#: external_identifier: 1 to 64 characters (section 8; the ledger holds transactions to it too).
EXTERNAL_IDENTIFIER_LENGTH = (1, 64)
#: description of a subscription: 1 to 255 characters.
DESCRIPTION_LENGTH = (1, 255)
#: subject of a direct redirect wallet transaction: at most 256 characters.
SUBJECT_MAX_LENGTH = 256
#: ``limit`` of the list endpoints: default and range are "not shown"; payhooks assumes 20 and
#: 1 to 100.
DEFAULT_PAGE_LIMIT = 20
MAX_PAGE_LIMIT = 100
#: A page's cursor: opaque, of no length shown; payhooks passes back and stores at most this.
MAX_CURSOR_LENGTH = 4096

_ZERO = "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF"
_THREE = "BHD IQD JOD KWD LYD OMR TND"

#: Decimals of a currency's minor unit where it is not two: the sandbox writes
#: ``payment_amount`` in major units with this many decimals.
MINOR_UNIT_EXPONENTS = MappingProxyType(
    {**dict.fromkeys(_ZERO.split(), 0), **dict.fromkeys(_THREE.split(), 3)}
)


def minor_unit_exponent(currency: str) -> int:
    """Decimals of ``currency``'s minor unit: 2 unless :data:`MINOR_UNIT_EXPONENTS` says."""
    return MINOR_UNIT_EXPONENTS.get(currency, 2)
