"""The ``owed_signals`` table: owed in the commit that records an outcome, claimed with a lease
by one sender at a time, marked sent with what receivers raised."""

from __future__ import annotations

from datetime import timedelta

import pytest

from payhooks.storage import Ledger, PaymentState, ReceiverRun, SignalRound
from payhooks.storage.rows import OwedSignal
from tests.support.engines import tables
from tests.support.factories import FixedClock, make_outcome, raise_in_round, record

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


def test_signals_whose_receivers_returned_are_owed_no_more(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    claimed = ledger.signals.claim([recorded.outcome_id], lease=LEASE)
    assert ledger.signals.mark_sent(claimed) == 2
    assert ledger.signals.owed() == []
    assert ledger.signals.claim([recorded.outcome_id], lease=LEASE) == []
    assert ledger.signals.failing() == []


def test_a_raise_keeps_only_that_signal_owed_with_its_error_attempts_and_next_round(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    claimed = ledger.signals.claim([recorded.outcome_id], lease=LEASE)
    retry_at = clock.now + timedelta(minutes=1)
    raise_in_round(ledger, claimed, {"payment-succeeded": "RuntimeError: down"}, retry_at=retry_at)
    (owed,) = ledger.signals.owed()
    assert (owed.signal, owed.attempts, owed.parked_at) == ("payment-succeeded", 1, None)
    assert owed.error == "shop.ship: RuntimeError: down"
    assert owed.next_attempt_at is not None
    delivery = ledger.receiver.delivery(owed.delivery_id)
    assert delivery is not None
    assert delivery.signal_error == "shop.ship: RuntimeError: down"
    (failing,) = ledger.signals.failing()
    assert (failing.signal.id, failing.external_identifier, failing.parked) == (
        owed.id,
        "order-1",
        False,
    )


def test_a_retry_is_claimed_only_once_due_unless_asked_now(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    claimed = ledger.signals.claim([recorded.outcome_id], lease=LEASE)
    raise_in_round(
        ledger, claimed, {"payment-succeeded": "boom"}, retry_at=clock.now + timedelta(minutes=1)
    )
    assert not ledger.signals.has_unclaimed()
    assert ledger.signals.claim(None, lease=LEASE) == []
    assert names(ledger.signals.claim(None, lease=LEASE, waiting=True)) == [
        (recorded.outcome_id, "payment-succeeded")
    ]
    clock.advance(LEASE.total_seconds())  # that sender died; the backoff is long over
    assert ledger.signals.has_unclaimed()


def test_a_parked_signal_is_claimed_only_when_a_person_asks(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    claimed = ledger.signals.claim([recorded.outcome_id], lease=LEASE)
    raise_in_round(ledger, claimed, {"payment-succeeded": "boom"}, retry_at=None)
    (owed,) = ledger.signals.owed()
    assert owed.parked_at is not None
    assert ledger.signals.claim(None, lease=LEASE, waiting=True) == []
    (again,) = ledger.signals.claim(None, lease=LEASE, parked=True)
    assert again.id == owed.id
    assert ledger.signals.failing()[0].parked


def test_a_retry_knows_which_receivers_returned(ledger: Ledger, clock: FixedClock) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    claimed = ledger.signals.claim([recorded.outcome_id], lease=LEASE)
    succeeded = [s for s in claimed if s.signal == "payment-succeeded"]
    now = clock.now
    rounds = [
        SignalRound(
            succeeded[0],
            now,
            (
                ReceiverRun("shop.mail", now, 3),
                ReceiverRun("shop.ship", now, 5, "RuntimeError: down"),
            ),
            now,
        )
    ]
    assert len(ledger.signals.finish(rounds)) == 1
    (owed,) = [s for s in ledger.signals.owed() if s.signal == "payment-succeeded"]
    assert ledger.signals.returned_receivers([owed]) == {owed.id: {"shop.mail"}}
    runs = ledger.signals.runs([owed.delivery_id])
    assert [(r.signal, r.receiver, r.error) for r in runs] == [
        ("payment-succeeded", "shop.mail", None),
        ("payment-succeeded", "shop.ship", "RuntimeError: down"),
    ]


def test_a_clean_first_round_is_kept_on_the_signal_row_alone(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    claimed = ledger.signals.claim([recorded.outcome_id], lease=LEASE)
    now = clock.now
    rounds = [SignalRound(s, now, (ReceiverRun("shop.ship", now, 7),)) for s in claimed]
    assert len(ledger.signals.finish(rounds)) == 2
    assert tables(ledger).execute("SELECT count(*) FROM signal_runs").fetchone()[0] == 0
    runs = ledger.signals.runs([claimed[0].delivery_id])
    assert [(r.signal, r.receiver, r.duration_ms, r.error) for r in runs] == [
        ("notification-received", "shop.ship", 7, None),
        ("payment-succeeded", "shop.ship", 7, None),
    ]


def test_a_later_outcome_of_the_payment_waits_behind_a_signal_whose_receiver_raised(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    first = record(ledger, make_outcome())
    claimed = ledger.signals.claim([first.outcome_id], lease=LEASE)
    raise_in_round(ledger, claimed, {"payment-succeeded": "boom"}, retry_at=None)
    refund = record(
        ledger,
        make_outcome(payment_status="RF", state=PaymentState.REFUNDED, transaction_id="txn-1"),
    )
    assert refund.is_new
    assert ledger.signals.claim([refund.outcome_id], lease=LEASE) == []
    assert ledger.signals.claim(None, lease=LEASE, waiting=True) == []
    # Dealt with: the parked signal re-run and returned; the refund's signals follow.
    (parked,) = ledger.signals.claim(None, lease=LEASE, parked=True)
    assert parked.outcome_id == first.outcome_id
    assert ledger.signals.mark_sent([parked]) == 1
    later = ledger.signals.claim(None, lease=LEASE)
    assert {s.outcome_id for s in later} == {refund.outcome_id}


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


def test_a_round_whose_lease_passed_is_not_recorded_over_the_next_senders(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    stale = ledger.signals.claim([recorded.outcome_id], lease=LEASE)
    clock.advance(LEASE.total_seconds() + 1)  # the first sender's lease passed mid-run
    current = ledger.signals.claim([recorded.outcome_id], lease=LEASE)

    assert ledger.signals.mark_sent(stale) == 0
    assert len(ledger.signals.owed()) == 2
    assert ledger.signals.mark_sent(current) == 2
    assert ledger.signals.owed() == []


def test_a_signal_held_by_a_sender_cannot_be_dismissed(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    (first, second) = ledger.signals.claim([recorded.outcome_id], lease=LEASE)

    assert ledger.signals.dismiss(first.id) is None
    assert ledger.signals.mark_sent([second]) == 1
    assert len(ledger.signals.owed()) == 1
