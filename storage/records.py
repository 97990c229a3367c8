"""The outcome record: the one shape every notification form is turned into.

The parser in :mod:`receiver` produces :class:`Outcome`; the ledger stores and reconciles it.
It lives here, in ``storage``, because the ledger is what gives it meaning, and because
imports point one way (``receiver -> storage``): the parser may import this module, never the
reverse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import Any

__all__ = [
    "DEFAULT_STATUS_MAP",
    "MISMATCH_STATES",
    "STATE_RANK",
    "Flow",
    "Outcome",
    "PaymentState",
    "ReconciliationState",
]


class Flow(StrEnum):
    """Which of the three notification forms an outcome came in."""

    CARD = "card"
    ORCHESTRATOR = "orchestrator"
    WALLET = "wallet"


class PaymentState(StrEnum):
    """Where one transaction stands in its lifecycle, as the service's status code says."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REFUND_PENDING = "refund_pending"
    PARTIALLY_REFUNDED = "partially_refunded"
    REFUNDED = "refunded"
    CHARGED_BACK = "charged_back"
    #: A status code the map does not know, or a provider status that disagrees with it.
    #: Stored and flagged, never dropped.
    UNKNOWN = "unknown"


#: The service SDK's ``payment_status`` codes and the state each one means. Merchants may pass
#: their own map (``PAYHOOKS_STATUS_MAP``); codes missing from it give ``unknown``.
DEFAULT_STATUS_MAP: Mapping[str, PaymentState] = MappingProxyType(
    {
        "IN": PaymentState.PENDING,
        "WP": PaymentState.PENDING,
        "PP": PaymentState.PENDING,
        "PS": PaymentState.SUCCEEDED,
        "PF": PaymentState.FAILED,
        "ER": PaymentState.FAILED,
        "PC": PaymentState.CANCELLED,
        "RP": PaymentState.REFUND_PENDING,
        "PR": PaymentState.PARTIALLY_REFUNDED,
        "RS": PaymentState.REFUNDED,
        "CB": PaymentState.CHARGED_BACK,
    }
)

#: How far along the lifecycle a state is. A transaction only moves to a higher rank, so a late
#: ``pending`` after ``succeeded`` is stored but changes nothing. ``unknown`` ranks below
#: everything: it never hides a known state, and it is reported on its own.
STATE_RANK: Mapping[PaymentState, int] = MappingProxyType(
    {
        PaymentState.UNKNOWN: -1,
        PaymentState.PENDING: 0,
        PaymentState.FAILED: 1,
        PaymentState.CANCELLED: 1,
        PaymentState.SUCCEEDED: 2,
        PaymentState.REFUND_PENDING: 3,
        PaymentState.PARTIALLY_REFUNDED: 4,
        PaymentState.REFUNDED: 5,
        PaymentState.CHARGED_BACK: 6,
    }
)


class ReconciliationState(StrEnum):
    """What the ledger concludes for one expected payment (or one unexpected outcome)."""

    PENDING = "pending"
    PAID = "paid"
    FAILED = "failed"
    CANCELLED = "cancelled"
    AMOUNT_MISMATCH = "amount_mismatch"
    CURRENCY_MISMATCH = "currency_mismatch"
    DUPLICATE_PAYMENT = "duplicate_payment"
    REFUND_PENDING = "refund_pending"
    PARTIALLY_REFUNDED = "partially_refunded"
    REFUNDED = "refunded"
    CHARGED_BACK = "charged_back"
    UNKNOWN_STATUS = "unknown_status"
    UNEXPECTED = "unexpected"
    #: The service refused to create it (``Ledger.service.mark_creation_failed(certain=True)``), and
    #: nothing since says otherwise: nobody was charged.
    NOT_CREATED = "not_created"


#: The states that need a person: money that differs from what was expected, money nobody
#: expected, or news nobody can read. ``payhooks reconcile --fail-on-mismatch`` fails on them
#: (and on drift) and the ``payment_mismatch`` signal is sent for them; every other state is an
#: ordinary step of a payment's life (``failed``, ``cancelled`` and ``not_created`` included:
#: nobody was charged). What the service's list says is a row's ``drift``, never its state.
MISMATCH_STATES: frozenset[ReconciliationState] = frozenset(
    {
        ReconciliationState.AMOUNT_MISMATCH,
        ReconciliationState.CURRENCY_MISMATCH,
        ReconciliationState.DUPLICATE_PAYMENT,
        ReconciliationState.UNEXPECTED,
        ReconciliationState.UNKNOWN_STATUS,
    }
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One payment outcome, whichever of the three forms it arrived in.

    Money is exact: ``amount`` is the service's string as a :class:`~decimal.Decimal`
    (``"25.00"`` stays ``Decimal("25.00")``) and ``amount_minor`` the same amount in the
    currency's minor units. ``paid_at`` is always timezone-aware.
    """

    #: ``ll_transaction_id``: the service's id for this transaction.
    transaction_id: str
    #: ``merchant_transaction_id``: the ``external_identifier`` the merchant sent at creation.
    external_identifier: str
    flow: Flow
    #: The member prefix naming the processor or orchestrator (``stripe``, ``adyen``); None for
    #: the direct wallet.
    provider: str | None
    #: The processor's payment intent id or the orchestrator's PSP reference.
    provider_reference: str | None
    #: The provider's own word: card ``status`` or orchestrator ``result_code``.
    provider_status: str | None
    #: ``payment_status`` exactly as sent (``PS``).
    payment_status: str
    state: PaymentState
    amount: Decimal
    #: ISO 4217 code, upper case.
    currency: str
    amount_minor: int
    paid_at: datetime
    #: Members of the body not named above, kept as sent.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.paid_at.tzinfo is None or self.paid_at.utcoffset() is None:
            raise ValueError("Outcome.paid_at must be timezone-aware")
        if not isinstance(self.amount, Decimal):
            raise TypeError("Outcome.amount must be a Decimal, never a float")
