"""What the ledger hands back: deliveries, recorded outcomes, reconciliation and summary rows.

Plain frozen dataclasses with no database handle, so they can cross threads, be pickled and be
compared in tests. Amounts are exact: ``int`` minor units as stored, and ``Decimal`` major
units derived from them with the currency's ISO 4217 exponent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import NamedTuple

from payhooks.storage.currencies import TIMES_MINOR_UNIT, from_minor_units
from payhooks.storage.records import PaymentState, ReconciliationState
from payhooks.storage.sync_rows import DriftKind

__all__ = [
    "FINISHED_DELIVERY_STATUSES",
    "CopyReport",
    "Delivery",
    "DeliveryStatus",
    "OwedSignal",
    "PaymentKind",
    "ReconciliationRow",
    "RecordedOutcome",
    "ReturnKind",
    "SummaryRow",
]


class PaymentKind(StrEnum):
    """What the merchant registered: a one-off transaction or a subscription."""

    TRANSACTION = "transaction"
    SUBSCRIPTION = "subscription"


class DeliveryStatus(StrEnum):
    """Where one stored delivery stands."""

    #: Stored and not processed yet. The receiver stores a delivery with its outcome in one
    #: commit, so only a direct ``Ledger.receiver.record_delivery`` leaves one here; a retry
    #: or ``payhooks reprocess`` finishes it.
    RECEIVED = "received"
    #: Its outcome was recorded.
    PROCESSED = "processed"
    #: A distinct delivery whose (``transaction_id``, ``payment_status``) outcome was already
    #: recorded from another delivery. (A repeat of the same ``dedupe_key`` and bytes is not a
    #: new delivery at all: it only counts as another attempt.)
    DUPLICATE = "duplicate"
    #: A distinct delivery of an outcome already recorded from another delivery, that says
    #: something else: another amount, currency, state, payment or provider reference. The
    #: first word stands (one outcome per ``transaction_id`` and ``payment_status``); this one
    #: is kept with an ``error`` naming the fields that differ, for a person to look at.
    CONFLICTING_OUTCOME = "conflicting_outcome"
    #: The body is not one unambiguous JSON text; ``error`` holds the answer sent.
    MALFORMED_JSON = "malformed_json"
    #: The body is JSON but not a notification; ``error`` holds the answer sent, per field.
    INVALID_PAYLOAD = "invalid_payload"
    #: Processing failed on our side (a bug, a fault of the file); a retry or ``payhooks
    #: reprocess`` finishes it.
    PROCESSING_ERROR = "processing_error"


#: The statuses of a delivery with nothing left to do: a redelivery of it only counts an
#: attempt, and ``Ledger.receiver.mark_delivery`` never overwrites them.
FINISHED_DELIVERY_STATUSES: frozenset[DeliveryStatus] = frozenset(
    {DeliveryStatus.PROCESSED, DeliveryStatus.DUPLICATE, DeliveryStatus.CONFLICTING_OUTCOME}
)


class ReturnKind(StrEnum):
    """Which redirect brought the customer back."""

    RETURN = "return"
    CANCEL = "cancel"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One authenticated delivery as stored, and what became of it: the one record of a
    delivery, which the receiver stores, the log lists and the console and ``payhooks
    deliveries show`` read whole.

    The log reads it without its headers and body (None there; ``body_size`` says how large
    the body is): a page of a thousand deliveries never loads their bytes.
    """

    id: int
    #: The ``webhook-id`` where the scheme has one, else SHA-256 of the body. When a key
    #: already stored comes again with other bytes, this delivery is stored apart under
    #: ``"<key>#<body_sha256>"`` and :attr:`reused_key_of` names the first.
    dedupe_key: str
    #: The delivery whose ``dedupe_key`` this one arrived under with different bytes (a
    #: reused ``webhook-id``), else None.
    reused_key_of: int | None
    received_at: datetime
    #: The selected headers stored with it (lower-case names); None when not read (the log).
    headers: Mapping[str, str] | None = field(repr=False)
    #: The raw body, exactly as received; None when not read (the log).
    body: bytes | None = field(repr=False)
    #: SHA-256 of the body as received, hex.
    body_sha256: str = field(repr=False)
    #: The stored body's length in bytes (0 once pruned).
    body_size: int
    status: DeliveryStatus
    #: Why parsing or processing failed, for the statuses that say it did.
    error: str | None
    #: How many times this ``dedupe_key`` was received with these bytes.
    attempts: int
    #: The outcome this delivery recorded or duplicated, once processed.
    outcome_id: int | None
    #: What signal receivers raised after it was processed, if anything.
    signal_error: str | None
    #: When the row last changed.
    updated_at: datetime
    #: When ``payhooks prune`` archived and emptied its body and headers; None while kept.
    pruned_at: datetime | None = None
    #: The archive's file name they went into (``read_archive`` gives them back).
    pruned_into: str | None = None
    #: The payment it is about, when known (its outcome's, or the one a refused body names).
    external_identifier: str | None = None
    #: Its outcome's status code, amount and currency, once it has one.
    payment_status: str | None = None
    amount: Decimal | None = None
    currency: str | None = None
    #: True when this call stored it; False when the ``dedupe_key`` was already known (or the
    #: row was read back later).
    is_new: bool = False


@dataclass(frozen=True, slots=True)
class RecordedOutcome:
    """What ``Ledger.receiver.record_outcome`` did, all in one transaction."""

    outcome_id: int
    #: False when this (``transaction_id``, ``payment_status``) was already stored; then
    #: ``outcome_id`` is the stored one.
    is_new: bool
    #: The reconciliation state of the outcome's ``external_identifier`` after the write.
    reconciliation: ReconciliationState
    #: What the delivery was marked: ``processed``; ``duplicate`` when another delivery had
    #: already recorded this outcome; ``conflicting_outcome`` when it had, and said something
    #: else (the delivery's ``error`` names the fields). Recording the same delivery again
    #: stays ``processed``.
    delivery_status: DeliveryStatus = DeliveryStatus.PROCESSED


class OwedSignal(NamedTuple):
    """A signal the merchant's code is owed for an outcome: a row of ``owed_signals``."""

    #: The outcome it is for: the stable id receivers are given to be idempotent with.
    outcome_id: int
    #: The delivery that first recorded the outcome.
    delivery_id: int
    #: The signal's name (``payment-succeeded``...).
    signal: str
    #: Its place in an outcome's sending order, from 0.
    position: int
    #: The payment's reconciliation state the signal was decided on, sent with it.
    reconciliation: str
    #: When it became owed: the commit that recorded the outcome, or the later one that
    #: changed its payment's state (a registration, a late outcome).
    owed_at: str
    #: When every receiver had returned; None while it is owed.
    sent_at: str | None
    #: Its row's id (``signal_runs.owed_signal_id``).
    id: int = 0
    #: Rounds of its receivers run so far; more than 0 while owed: a receiver raised.
    attempts: int = 0
    #: When the next round is due after a raise (backoff); None: due now.
    next_attempt_at: str | None = None
    #: When it was parked (its last allowed round raised): owed, retried only by a person.
    parked_at: str | None = None
    #: What its last round's receivers raised, if one did.
    error: str | None = None
    #: The end of the lease its sender holds (the claim's token: a round is recorded only
    #: while it is still this sender's); None when nobody holds it.
    claimed_until: str | None = None


class ReconciliationRow(NamedTuple):
    """One payment's reconciliation row, expected or unexpected: what
    :func:`payhooks.storage.rules.reconcile` decides, ``payment_states`` stores field for field
    and the ``reconciliation`` view shows, in this order. A new column is a field here, its
    rule there, a column of both engines' ``payment_states`` and a line of
    :func:`payhooks.storage.reconciliation.to_row`.

    A named tuple rather than a dataclass because a report streams a million of them: it is
    built at C speed, and it is just as immutable. ``currency`` is the expected currency, or for
    an ``unexpected`` row the currency its outcomes came in; ``received_currency`` differs from
    it only for ``currency_mismatch``.
    """

    external_identifier: str
    #: None for an ``unexpected`` row: nothing was registered.
    kind: PaymentKind | None
    state: ReconciliationState
    currency: str
    #: The registered amount; for a subscription, the first period plus the plan amount for
    #: every later period paid. None for ``unexpected``.
    expected_amount_minor: int | None
    #: Where money arrived: ``currency``, or the other one when a period was paid in another
    #: currency (``currency_mismatch``, or a ``duplicate_payment`` in two currencies). None
    #: when nothing succeeded.
    received_currency: str | None
    #: The sum of every paid transaction (period), refunded ones included. When some period
    #: was paid in another currency, only those: the amount in ``received_currency``. None
    #: when nothing succeeded, or when an unexpected payment came in several currencies.
    received_amount_minor: int | None
    #: When it was registered, or for ``unexpected`` the earliest ``paid_at``: what
    #: ``reconcile(since=, until=)`` filters on.
    opened_at: datetime
    #: The furthest lifecycle state any of its outcomes reached (None: no outcome yet). It
    #: tells a refunded ``amount_mismatch`` from an open one.
    lifecycle_state: PaymentState | None
    #: Succeeded transactions: billing periods for a subscription.
    periods_paid: int
    #: Every transaction id seen for it, sorted.
    transaction_ids: tuple[str, ...]
    #: Outcomes whose status code the map did not know; they never decide the state.
    unknown_outcomes: int
    #: The latest ``paid_at`` of its outcomes.
    last_outcome_at: datetime | None
    #: How the service's list (``payhooks sync``) disagrees with the notifications; None when
    #: it agrees or was never read. A flag for a person: it never changes :attr:`state`.
    drift: DriftKind | None = None
    #: Of the money received, the periods refunded in full, and those charged back.
    refunded_amount_minor: int = 0
    charged_back_amount_minor: int = 0
    #: Received, less refunded and charged back; None when nothing was received.
    net_amount_minor: int | None = None
    #: Authenticated deliveries about it whose body was refused (400, 422): they arrived, and
    #: recorded nothing.
    refused_deliveries: int = 0
    #: Deliveries that contradicted a stored outcome (``conflicting_outcome``).
    conflicting_deliveries: int = 0
    #: The newest refused or conflicting delivery's reason.
    latest_problem: str | None = None
    #: Money received in ``currency`` itself when some came in ``received_currency``, another
    #: one (a payment paid in two currencies); 0 otherwise. The totals count it in ``currency``.
    home_received_amount_minor: int = 0

    @property
    def expected_amount(self) -> Decimal | None:
        """``expected_amount_minor`` in major units of ``currency`` (``2500`` CNY: 25.00)."""
        amount = self.expected_amount_minor
        if amount is None:
            return None
        # from_minor_units inlined (a report reads this a million times): keep the two alike.
        try:
            return TIMES_MINOR_UNIT[self.currency](amount)
        except KeyError:
            return from_minor_units(amount, self.currency)  # zero, or UnknownCurrencyError

    @property
    def refund_amount_unknown(self) -> bool:
        """Whether some of its money went back by a partial refund, whose notification does not
        say how much: ``refunded_amount_minor`` (full refunds only) then tells less than went
        back, and ``net_amount_minor`` more than was kept."""
        return (
            self.state is ReconciliationState.PARTIALLY_REFUNDED
            or self.lifecycle_state is PaymentState.PARTIALLY_REFUNDED
        )

    @property
    def received_amount(self) -> Decimal | None:
        """``received_amount_minor`` in major units of ``received_currency``."""
        amount, currency = self.received_amount_minor, self.received_currency
        if amount is None or currency is None:
            return None
        try:  # as expected_amount
            return TIMES_MINOR_UNIT[currency](amount)
        except KeyError:
            return from_minor_units(amount, currency)


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """Counts and totals of the reconciliation for one currency and state.

    ``received_amount_minor`` counts only money received in ``currency``: what a
    ``currency_mismatch`` payment received in another currency is listed row by row by
    :meth:`payhooks.storage.Ledger.reconcile`, never added to a total of a different currency.
    """

    currency: str
    state: ReconciliationState
    count: int
    expected_amount_minor: int
    received_amount_minor: int
    #: ``expected_amount_minor`` in major units of ``currency``.
    expected_total: Decimal
    #: ``received_amount_minor`` in major units of ``currency``.
    received_total: Decimal
    #: Of the money received in ``currency``, refunded in full and charged back.
    refunded_amount_minor: int = 0
    charged_back_amount_minor: int = 0

    @property
    def net_amount_minor(self) -> int:
        """Received, less refunded and charged back."""
        return (
            self.received_amount_minor
            - self.refunded_amount_minor
            - (self.charged_back_amount_minor)
        )


@dataclass
class CopyReport:
    """What :func:`copy_ledger` copied and what its check found."""

    #: table -> (rows in SQLite, rows in PostgreSQL).
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: One sentence per difference found; empty when the copy checks out.
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the copy checks out."""
        return not self.problems
