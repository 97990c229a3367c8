"""The ``owed_signals`` table: owed in the commit that records an outcome, claimed with a lease
by one sender at a time, marked sent with what receivers raised."""

from __future__ import annotations

from datetime import timedelta

import pytest

from payhooks.storage import Ledger, OwedSignal, PaymentState
from tests.support.engines import tables
from tests.support.factories import FixedClock, make_outcome, record

LEASE = timedelta(minutes=5)


def names(signals: list[OwedSignal]) -> list[tuple[int, str]]:
    return [(s.outcome_id, s.signal) for s in signals]


def test_a_new_outcome_owes_its_signals_in_sending_order_in_its_own_commit(
    ledger: Ledger,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    owed = ledger.signals.owed()
    assert names(owed) == [
        (recorded.outcome_id, "notification-received"),
        (recorded.outcome_id, "payment-succeeded"),
    ]
    assert [s.position for s in owed] == [0, 1]
    assert {s.reconciliation for s in owed} == {"paid"}
    (delivery_id,) = {s.delivery_id for s in owed}
    assert ledger.signals.owed(delivery_id) == owed
    assert ledger.signals.owed(delivery_id + 1000) == []


def test_a_claim_is_exclusive_until_its_lease_passes(ledger: Ledger, clock: FixedClock) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    first = ledger.signals.claim([recorded.outcome_id], lease=LEASE)
    assert len(first) == 2
    assert ledger.signals.claim([recorded.outcome_id], lease=LEASE) == []
    assert ledger.signals.claim(None, lease=LEASE) == []
    assert not ledger.signals.has_unclaimed()
    clock.advance(LEASE.total_seconds())  # the sender died holding them
    assert ledger.signals.has_unclaimed()
    again = ledger.signals.claim(None, lease=LEASE)
    assert names(again) == names(first)


def test_signals_marked_sent_are_owed_no_more_and_keep_the_receivers_errors(
    ledger: Ledger,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    claimed = ledger.signals.claim([recorded.outcome_id], lease=LEASE)
    sent = ledger.signals.mark_sent(claimed, errors={"payment-succeeded": "ship raised"})
    assert sent == 2
    assert ledger.signals.owed() == []
    assert ledger.signals.claim([recorded.outcome_id], lease=LEASE) == []
    stored = dict(tables(ledger).execute("SELECT signal, error FROM owed_signals").fetchall())
    assert stored == {"notification-received": None, "payment-succeeded": "ship raised"}
    delivery = ledger.receiver.delivery(claimed[0].delivery_id)
    assert delivery is not None
    assert delivery.signal_error == "ship raised"


def test_a_redelivered_outcome_owes_nothing_new(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, make_outcome())
    record(ledger, make_outcome())  # another delivery of the same outcome: a duplicate
    assert len(ledger.signals.owed()) == 2


@pytest.mark.sqlite_only  # SQLite's query plans
def test_what_is_still_owed_is_found_through_the_partial_index(ledger: Ledger) -> None:
    steps = [
        row[3]
        for row in tables(ledger).execute(
            "EXPLAIN QUERY PLAN SELECT DISTINCT outcome_id FROM owed_signals "
            "WHERE sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= ?) "
            "ORDER BY outcome_id LIMIT 5",
            ("x",),
        )
    ]
    assert any("owed_signals_unsent" in step for step in steps), steps


def test_a_failed_outcome_of_an_unpaid_payment_owes_payment_failed(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    failed = record(ledger, make_outcome(payment_status="PF", state=PaymentState.FAILED))
    assert names(ledger.signals.owed()) == [
        (failed.outcome_id, "notification-received"),
        (failed.outcome_id, "payment-failed"),
    ]


def test_a_signal_owed_later_waits_while_its_outcome_is_held(ledger: Ledger) -> None:
    """One outcome, one sender at a time: the payment-succeeded a registration owes an outcome
    whose notification-received a sender still holds is left to that sender's lease."""
    recorded = record(ledger, make_outcome())  # unexpected: nobody registered order-1 yet
    held = ledger.signals.claim([recorded.outcome_id], lease=LEASE)
    assert [s.signal for s in held] == ["notification-received", "payment-mismatch"]
    ledger.expect_transaction("order-1", 2500, "CNY")  # owes payment-succeeded
    assert not ledger.signals.has_unclaimed()
    assert ledger.signals.claim(None, lease=LEASE) == []
    assert ledger.signals.claim([recorded.outcome_id], lease=LEASE) == []
    ledger.signals.mark_sent(held)
    assert [s.signal for s in ledger.signals.claim(None, lease=LEASE)] == ["payment-succeeded"]
