"""Test card numbers: which outcome each card gives in the card flow.

The card flow has no payment page, so the card decides: the sandbox answers ``processing``
like the service, then sends the notification for the card's outcome. Only these numbers are
accepted (a real card number is refused with ``not_a_test_card``: the sandbox must never be
a place where real card data is typed).
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["TEST_CARDS", "card_outcome"]

#: Card number -> outcome (``pay``, ``fail``, ``cancel``; None: it stays ``processing`` until
#: settled by the control API, like a payment awaiting authentication).
TEST_CARDS: MappingProxyType[str, str | None] = MappingProxyType(
    {
        "4242424242424242": "pay",
        "5555555555554444": "pay",
        "4000000000000002": "fail",  # declined
        "4000000000009995": "fail",  # insufficient funds
        "4000000000003220": None,  # awaits authentication: settle it by hand
    }
)


def card_outcome(number: str) -> tuple[bool, str | None]:
    """``(known, outcome)`` for a card number."""
    if number not in TEST_CARDS:
        return False, None
    return True, TEST_CARDS[number]
