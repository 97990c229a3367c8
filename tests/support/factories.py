"""Test data shared by the storage tests: a fixed clock, outcomes, and recording them.

One definition of each, so a change to :class:`payhooks.storage.Outcome` or to the ledger's API is
made in one place. Not a test module (no ``test_`` prefix): pytest collects nothing here.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from payhooks.storage import Flow, Ledger, Outcome, PaymentState, ReceiverRun, SignalRound
from payhooks.storage.rows import OwedSignal, RecordedOutcome

__all__ = ["T0", "FixedClock", "make_outcome", "record"]

#: The moment every test starts from: what :class:`FixedClock` says until moved.
T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class FixedClock:
    """A clock that stays put until a test moves it (the ledger's ``clock=`` argument)."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def make_outcome(**overrides: Any) -> Outcome:
    """A succeeded wallet outcome of 25.00 CNY for ``order-1`` (transaction ``ll-1``) at T0,
    with ``overrides`` applied."""
    fields: dict[str, Any] = {
        "transaction_id": "ll-1",
        "external_identifier": "order-1",
        "flow": Flow.WALLET,
        "provider": None,
        "provider_reference": None,
        "provider_status": None,
        "payment_status": "PS",
        "state": PaymentState.SUCCEEDED,
        "amount": Decimal("25.00"),
        "currency": "CNY",
        "amount_minor": 2500,
        "paid_at": T0,
    }
    fields.update(overrides)
    return Outcome(**fields)


_delivery_keys = (f"msg_{n}" for n in itertools.count(1))


def record(ledger: Ledger, outcome: Outcome, *, dedupe_key: str | None = None) -> RecordedOutcome:
    """Store a delivery for ``outcome`` (a fresh dedupe key unless given) and record it."""
    key = dedupe_key or next(_delivery_keys)
    delivery = ledger.receiver.record_delivery(dedupe_key=key, body=key.encode(), headers={})
    return ledger.receiver.record_outcome(outcome, delivery_id=delivery.id)


def raise_in_round(
    ledger: Ledger,
    claimed: list[OwedSignal],
    errors: dict[str, str],
    *,
    retry_at: datetime | None = None,
    receiver: str = "shop.ship",
) -> int:
    """Record a round of claimed signals in which the receiver ``receiver`` raised
    ``errors[signal name]`` (and returned for the others): owed again from ``retry_at``, or
    parked when it is None. How many rounds were recorded."""
    now = datetime.now(UTC)
    rounds = [
        SignalRound(
            signal,
            now,
            (ReceiverRun(receiver, now, 1, errors.get(signal.signal)),),
            retry_at,
        )
        for signal in claimed
    ]
    return len(ledger.signals.finish(rounds))
