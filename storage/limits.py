"""The ledger's bounds: the largest amount it stores (so that its sums stay exact), and how
many rejected deliveries and returns it keeps by default.

SQLite adds ``INTEGER`` columns in 64-bit integers and raises on overflow, and a report that
cannot be computed is no report at all. Bounding each amount keeps every sum the reconciliation
makes (a payment's periods, a currency's totals) far from the limit; the parser refuses a larger
``payment_amount`` as an invalid payload, and the ledger refuses it on registration.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_MAX_REJECTED",
    "DEFAULT_MAX_RETURNS",
    "DEFAULT_POOL_SIZE",
    "MAX_AMOUNT_MINOR",
    "MAX_POOL_SIZE",
    "check_pool_size",
]

#: 10**15 minor units: ten trillion in a two-decimal currency (a real payment in IDR or VND is
#: far below it), while over 9,000 amounts at the bound still add up within 2**63 - 1.
MAX_AMOUNT_MINOR: Final = 10**15

#: How many rejected deliveries a ledger keeps by default; older ones are pruned.
DEFAULT_MAX_REJECTED: Final = 10_000

#: How many customer returns a ledger keeps per ``external_identifier`` by default; older ones
#: are pruned.
DEFAULT_MAX_RETURNS: Final = 50

#: The most connections one process's pool opens to a PostgreSQL database, unless set
#: otherwise (``PAYHOOKS_POSTGRES_POOL_SIZE``; a console's own pool is smaller).
DEFAULT_POOL_SIZE: Final = 10
#: The largest pool accepted: PostgreSQL's own ``max_connections`` is far below it.
MAX_POOL_SIZE: Final = 1000


def check_pool_size(size: object, argument: str = "pool_size") -> int:
    """:raises ValueError: naming ``argument``, for a size that is not an int from 1 to
    :data:`MAX_POOL_SIZE`."""
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_POOL_SIZE:
        raise ValueError(f"{argument} must be an int from 1 to {MAX_POOL_SIZE}; got {size!r}")
    return size
