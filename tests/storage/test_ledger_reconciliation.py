"""The reconciliation view: every state, arrival order, subscriptions, filters, summary, plans."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import datetime, timedelta
from decimal import Decimal
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlite_utils import Database

from payhooks.storage import (
    MAX_AMOUNT_MINOR,
    MISMATCH_STATES,
    Ledger,
    PaymentKind,
    PaymentState,
    ReconciliationRow,
    ReconciliationState,
)
from payhooks.storage.records import STATE_RANK
from tests.support.engines import tables
from tests.support.factories import T0, FixedClock, make_outcome, record

R = ReconciliationState

#: payment_status code -> (state, code) of the default map, for building outcomes.
CODES = {
    "WP": PaymentState.PENDING,
    "PS": PaymentState.SUCCEEDED,
    "PF": PaymentState.FAILED,
    "PC": PaymentState.CANCELLED,
    "RP": PaymentState.REFUND_PENDING,
    "PR": PaymentState.PARTIALLY_REFUNDED,
    "RS": PaymentState.REFUNDED,
    "CB": PaymentState.CHARGED_BACK,
    "ZZ": PaymentState.UNKNOWN,
}


def outcome(code: str, *, minutes: int = 0, **overrides: Any) -> Any:
    """An outcome with status ``code`` for ``order-1``, ``minutes`` after T0."""
    fields: dict[str, Any] = {
        "payment_status": code,
        "state": CODES[code],
        "paid_at": T0 + timedelta(minutes=minutes),
    }
    fields.update(overrides)
    if "amount_minor" in overrides and "amount" not in overrides:
        fields["amount"] = Decimal(fields["amount_minor"]).scaleb(-2)
    return make_outcome(**fields)


def row_of(ledger: Ledger, external_identifier: str = "order-1") -> ReconciliationRow:
    found = ledger.row(external_identifier)
    assert found is not None
    assert ledger.state(external_identifier) is found.state
    return found


# -- every state ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codes", "state"),
    [
        ([], R.PENDING),
        (["WP"], R.PENDING),
        (["PS"], R.PAID),
        (["PF"], R.FAILED),
        (["WP", "PF"], R.FAILED),
        (["PC"], R.CANCELLED),
        (["RP"], R.REFUND_PENDING),
        (["PS", "RP"], R.REFUND_PENDING),
        (["PS", "PR"], R.PARTIALLY_REFUNDED),
        (["PS", "RP", "PR", "RS"], R.REFUNDED),
        (["PS", "CB"], R.CHARGED_BACK),
        (["PS", "RS", "CB"], R.CHARGED_BACK),
        (["ZZ"], R.UNKNOWN_STATUS),
        (["WP", "ZZ"], R.UNKNOWN_STATUS),
        (["PF", "ZZ"], R.UNKNOWN_STATUS),
        (["PC", "ZZ"], R.UNKNOWN_STATUS),
        (["PS", "ZZ"], R.UNKNOWN_STATUS),
        (["PS", "RP", "ZZ"], R.UNKNOWN_STATUS),
        (["ZZ", "WP"], R.PENDING),
        (["ZZ", "PF"], R.FAILED),
        (["ZZ", "PS"], R.PAID),
        (["PS", "ZZ", "RS"], R.REFUNDED),
        (["PF", "WP"], R.FAILED),
        (["PC", "PF"], R.FAILED),
        (["PF", "PC"], R.CANCELLED),
        (["PS", "PC"], R.PAID),
    ],
)
def test_one_transaction_reconciles_by_its_furthest_state_unless_the_latest_is_unknown(
    ledger: Ledger, codes: list[str], state: ReconciliationState
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    for minute, code in enumerate(codes):
        record(ledger, outcome(code, minutes=minute))
    assert row_of(ledger).state is state


def test_a_paid_row_carries_the_amounts_ids_and_times(ledger: Ledger, clock: FixedClock) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("WP", minutes=1))
    record(ledger, outcome("PS", minutes=5))
    row = row_of(ledger)
    assert row == ReconciliationRow(
        external_identifier="order-1",
        kind=PaymentKind.TRANSACTION,
        state=R.PAID,
        currency="CNY",
        expected_amount_minor=2500,
        received_currency="CNY",
        received_amount_minor=2500,
        opened_at=clock.now,
        lifecycle_state=PaymentState.SUCCEEDED,
        periods_paid=1,
        transaction_ids=("ll-1",),
        unknown_outcomes=0,
        last_outcome_at=T0 + timedelta(minutes=5),
        net_amount_minor=2500,
    )
    assert row.expected_amount == Decimal("25.00")
    assert row.received_amount == Decimal("25.00")


def test_a_pending_payment_has_no_received_amount(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "JPY")
    row = row_of(ledger)
    assert (row.state, row.lifecycle_state, row.transaction_ids) == (R.PENDING, None, ())
    assert (row.expected_amount, row.received_amount) == (Decimal(2500), None)
    assert (row.periods_paid, row.last_outcome_at, row.received_currency) == (0, None, None)


def test_a_different_amount_is_an_amount_mismatch(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PS", amount_minor=2400))
    row = row_of(ledger)
    assert row.state is R.AMOUNT_MISMATCH
    assert (row.expected_amount, row.received_amount) == (Decimal("25.00"), Decimal("24.00"))


def test_a_different_currency_is_a_currency_mismatch_with_what_arrived(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PS", currency="USD", amount_minor=350))
    row = row_of(ledger)
    assert row.state is R.CURRENCY_MISMATCH
    assert (row.currency, row.received_currency) == ("CNY", "USD")
    assert row.received_amount == Decimal("3.50")


def test_two_succeeded_transactions_for_one_transaction_are_a_duplicate_payment(
    ledger: Ledger,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PS", transaction_id="ll-1"))
    record(ledger, outcome("PS", transaction_id="ll-2", minutes=3))
    row = row_of(ledger)
    assert row.state is R.DUPLICATE_PAYMENT
    assert row.transaction_ids == ("ll-1", "ll-2")
    assert (row.periods_paid, row.received_amount_minor) == (2, 5000)


def test_a_failed_attempt_then_a_success_is_paid_not_a_duplicate(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PF", transaction_id="ll-1"))
    record(ledger, outcome("PS", transaction_id="ll-2", minutes=3))
    row = row_of(ledger)
    assert (row.state, row.periods_paid, row.transaction_ids) == (R.PAID, 1, ("ll-1", "ll-2"))


@pytest.mark.parametrize(
    ("first", "second", "state"),
    [("PF", "PC", R.CANCELLED), ("PC", "PF", R.FAILED)],
)
def test_between_failed_and_cancelled_the_latest_paid_at_decides(
    ledger: Ledger, first: str, second: str, state: ReconciliationState
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    # Recorded in reverse: the time of the outcome decides, not the time of arrival.
    record(ledger, outcome(second, transaction_id="ll-2", minutes=10))
    record(ledger, outcome(first, transaction_id="ll-1", minutes=0))
    assert row_of(ledger).state is state


def test_a_cancellation_does_not_undo_a_success(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PS", transaction_id="ll-1"))
    record(ledger, outcome("PC", transaction_id="ll-2", minutes=9))
    assert row_of(ledger).state is R.PAID


@pytest.mark.parametrize(
    ("code", "state"),
    [
        ("RP", R.REFUND_PENDING),
        ("PR", R.PARTIALLY_REFUNDED),
        ("RS", R.REFUNDED),
        ("CB", R.CHARGED_BACK),
    ],
)
def test_refunds_and_chargebacks_keep_the_amounts(
    ledger: Ledger, code: str, state: ReconciliationState
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PS"))
    record(ledger, outcome(code, minutes=60, amount_minor=1000))
    row = row_of(ledger)
    assert row.state is state
    assert (row.expected_amount_minor, row.received_amount_minor) == (2500, 2500)


def test_a_refunded_mismatch_stays_a_mismatch_and_says_refunded(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PS", amount_minor=2600))
    record(ledger, outcome("RS", minutes=60, amount_minor=2600))
    row = row_of(ledger)
    assert (row.state, row.lifecycle_state) == (R.AMOUNT_MISMATCH, PaymentState.REFUNDED)


def test_unknown_status_codes_are_counted_and_flagged(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("ZZ"))
    row = row_of(ledger)
    assert (row.state, row.lifecycle_state, row.unknown_outcomes) == (
        R.UNKNOWN_STATUS,
        PaymentState.UNKNOWN,
        1,
    )
    record(ledger, outcome("PS", minutes=1))
    row = row_of(ledger)
    assert (row.state, row.unknown_outcomes) == (R.PAID, 1)


def test_an_unmapped_code_after_a_success_needs_a_person_and_keeps_the_amounts(
    ledger: Ledger,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PS"))
    record(ledger, outcome("ZZ", minutes=60))  # a dispute code the map does not know
    row = row_of(ledger)
    assert (row.state, row.lifecycle_state, row.unknown_outcomes) == (
        R.UNKNOWN_STATUS,
        PaymentState.SUCCEEDED,
        1,
    )
    assert (row.expected_amount_minor, row.received_amount_minor) == (2500, 2500)
    assert R.UNKNOWN_STATUS in MISMATCH_STATES


def test_an_unmapped_code_dated_before_the_success_does_not_decide(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PS", minutes=5))
    record(ledger, outcome("ZZ", minutes=0))  # arrives last, but happened first
    assert row_of(ledger).state is R.PAID


@pytest.mark.parametrize(
    ("arrival", "state"),
    [(["PS", "ZZ"], R.UNKNOWN_STATUS), (["ZZ", "PS"], R.PAID)],
)
def test_at_the_same_paid_at_the_later_arrival_is_the_latest(
    ledger: Ledger, arrival: list[str], state: ReconciliationState
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    for code in arrival:
        record(ledger, outcome(code, minutes=7))
    assert row_of(ledger).state is state


def test_a_money_problem_wins_over_an_unknown_latest_outcome(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PS", amount_minor=2400))
    record(ledger, outcome("ZZ", minutes=1))
    assert row_of(ledger).state is R.AMOUNT_MISMATCH


@pytest.mark.parametrize("closed", ["PF", "PC"])
def test_a_retry_still_pending_after_a_failure_or_cancellation_is_pending(
    ledger: Ledger, closed: str
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome(closed, transaction_id="ll-1", minutes=0))
    record(ledger, outcome("WP", transaction_id="ll-2", minutes=5))
    row = row_of(ledger)
    assert (row.state, row.lifecycle_state) == (R.PENDING, PaymentState.PENDING)
    assert row.transaction_ids == ("ll-1", "ll-2")
    # The retry fails too: failed again.
    record(ledger, outcome("PF", transaction_id="ll-2", minutes=6))
    assert row_of(ledger).state is R.FAILED


def test_the_transaction_with_the_latest_outcome_decides_by_its_own_lifecycle(
    ledger: Ledger,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    # ll-1 failed, then a late `pending` of the same transaction (dated after) arrives; a
    # retry ll-2 is pending in between. ll-1 has the latest outcome, and it stays failed.
    record(ledger, outcome("PF", transaction_id="ll-1", minutes=0))
    record(ledger, outcome("WP", transaction_id="ll-2", minutes=5))
    record(ledger, outcome("WP", transaction_id="ll-1", minutes=9))
    row = row_of(ledger)
    assert (row.state, row.lifecycle_state) == (R.FAILED, PaymentState.FAILED)


def test_an_unknown_latest_outcome_without_a_period_keeps_the_last_known_state(
    ledger: Ledger,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PF", transaction_id="ll-1", minutes=0))
    record(ledger, outcome("ZZ", transaction_id="ll-2", minutes=3))
    row = row_of(ledger)
    assert (row.state, row.lifecycle_state, row.unknown_outcomes) == (
        R.UNKNOWN_STATUS,
        PaymentState.FAILED,
        1,
    )


def test_an_outcome_no_payment_names_is_unexpected(ledger: Ledger) -> None:
    record(ledger, outcome("PS", external_identifier="stray", currency="USD", amount_minor=100))
    row = row_of(ledger, "stray")
    assert row.state is R.UNEXPECTED
    assert (row.kind, row.expected_amount_minor, row.expected_amount) == (None, None, None)
    assert (row.currency, row.received_currency, row.received_amount) == (
        "USD",
        "USD",
        Decimal("1.00"),
    )
    assert row.opened_at == T0
    assert ledger.state("nobody") is None
    assert ledger.row("nobody") is None


def test_an_unexpected_failure_has_nothing_received(ledger: Ledger) -> None:
    record(ledger, outcome("PF", external_identifier="stray"))
    row = row_of(ledger, "stray")
    assert (row.state, row.lifecycle_state, row.received_amount) == (
        R.UNEXPECTED,
        PaymentState.FAILED,
        None,
    )


# -- arrival order -------------------------------------------------------------------------


def test_a_late_pending_after_success_changes_nothing(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    assert record(ledger, outcome("PS", minutes=5)).reconciliation is R.PAID
    late = record(ledger, outcome("WP", minutes=0))
    assert late.is_new
    assert late.reconciliation is R.PAID
    assert row_of(ledger).lifecycle_state is PaymentState.SUCCEEDED


def test_a_refund_that_arrives_before_its_success_is_refunded_either_way(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    assert record(ledger, outcome("RS", minutes=60)).reconciliation is R.REFUNDED
    assert record(ledger, outcome("PS", minutes=0)).reconciliation is R.REFUNDED
    row = row_of(ledger)
    assert (row.periods_paid, row.received_amount_minor) == (1, 2500)


def test_the_success_amount_is_preferred_over_a_later_refund_amount(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, outcome("PR", minutes=60, amount_minor=500))
    assert row_of(ledger).state is R.AMOUNT_MISMATCH  # all we know so far is 5.00
    record(ledger, outcome("PS", minutes=0))
    row = row_of(ledger)
    assert (row.state, row.received_amount_minor) == (R.PARTIALLY_REFUNDED, 2500)


def test_an_outcome_recorded_before_its_payment_becomes_paid_once_registered(
    ledger: Ledger,
) -> None:
    assert record(ledger, outcome("PS")).reconciliation is R.UNEXPECTED
    ledger.expect_transaction("order-1", 2500, "CNY")
    row = row_of(ledger)
    assert (row.state, row.kind, row.received_amount_minor) == (
        R.PAID,
        PaymentKind.TRANSACTION,
        2500,
    )
    assert [r.external_identifier for r in ledger.reconcile()] == ["order-1"]


# -- subscriptions -------------------------------------------------------------------------


def subscribe(ledger: Ledger, first: int = 999, plan: int = 1999) -> None:
    ledger.expect_subscription("sub-1", first, "USD", plan)


def period(n: int, amount_minor: int, code: str = "PS") -> Any:
    return outcome(
        code,
        external_identifier="sub-1",
        transaction_id=f"ll-p{n}",
        currency="USD",
        amount_minor=amount_minor,
        minutes=n * 30 * 24 * 60,
    )


def test_subscription_periods_are_counted_first_at_its_amount_then_the_plan(
    ledger: Ledger,
) -> None:
    subscribe(ledger)
    for n, amount in enumerate([999, 1999, 1999]):
        record(ledger, period(n, amount))
    row = row_of(ledger, "sub-1")
    assert row.state is R.PAID
    assert row.periods_paid == 3
    assert (row.expected_amount_minor, row.received_amount_minor) == (999 + 2 * 1999,) * 2
    assert row.expected_amount == Decimal("49.97")
    assert row.transaction_ids == ("ll-p0", "ll-p1", "ll-p2")


def test_a_subscription_not_yet_paid_expects_its_first_period(ledger: Ledger) -> None:
    subscribe(ledger)
    row = row_of(ledger, "sub-1")
    assert (row.state, row.expected_amount_minor, row.kind) == (
        R.PENDING,
        999,
        PaymentKind.SUBSCRIPTION,
    )


@pytest.mark.parametrize(
    "amounts",
    [
        [999, 1999, 1500],  # a later period below the plan
        [1999, 1999, 1999],  # the first period charged at the plan amount
        [999, 999],  # a later period charged at the first amount
        [999, 1999, 2500],  # the last period above the plan
        [999, 2500, 1999, 1999],  # one period in between above the plan
    ],
)
def test_a_subscription_period_at_the_wrong_amount_is_an_amount_mismatch(
    ledger: Ledger, amounts: list[int]
) -> None:
    subscribe(ledger)
    for n, amount in enumerate(amounts):
        record(ledger, period(n, amount))
    row = row_of(ledger, "sub-1")
    assert row.state is R.AMOUNT_MISMATCH
    assert row.received_amount_minor == sum(amounts)


def test_the_first_period_is_the_earliest_paid_whatever_the_arrival_order(
    ledger: Ledger,
) -> None:
    subscribe(ledger)
    record(ledger, period(2, 1999))
    record(ledger, period(1, 1999))
    record(ledger, period(0, 999))
    assert row_of(ledger, "sub-1").state is R.PAID


@pytest.mark.parametrize(
    ("first", "plan", "state"),
    [(999, 1999, R.AMOUNT_MISMATCH), (1999, 1999, R.PAID)],
)
def test_two_periods_paid_at_the_same_time_and_amount_are_the_first_and_a_later_one(
    ledger: Ledger, first: int, plan: int, state: ReconciliationState
) -> None:
    ledger.expect_subscription("sub-1", first, "USD", plan)
    for n in range(2):
        record(
            ledger,
            outcome(
                "PS",
                external_identifier="sub-1",
                transaction_id=f"ll-twin-{n}",
                currency="USD",
                amount_minor=first,
            ),
        )
    assert row_of(ledger, "sub-1").state is state


def test_a_subscription_with_equal_first_and_plan_amounts(ledger: Ledger) -> None:
    ledger.expect_subscription("sub-1", 1999, "USD", 1999)
    for n in range(4):
        record(ledger, period(n, 1999))
    row = row_of(ledger, "sub-1")
    assert (row.state, row.periods_paid, row.expected_amount_minor) == (R.PAID, 4, 4 * 1999)


def test_a_refunded_subscription_period_is_reported(ledger: Ledger) -> None:
    subscribe(ledger)
    record(ledger, period(0, 999))
    record(ledger, period(1, 1999))
    refund = period(1, 1999, code="RS")
    record(ledger, refund)
    row = row_of(ledger, "sub-1")
    assert (row.state, row.periods_paid) == (R.REFUNDED, 2)


def test_a_subscription_period_in_another_currency_is_a_currency_mismatch(
    ledger: Ledger,
) -> None:
    subscribe(ledger)
    record(ledger, period(0, 999))
    record(
        ledger,
        outcome(
            "PS",
            external_identifier="sub-1",
            transaction_id="ll-eur",
            currency="EUR",
            amount_minor=1800,
            minutes=60 * 24 * 30,
        ),
    )
    row = row_of(ledger, "sub-1")
    assert row.state is R.CURRENCY_MISMATCH
    assert (row.received_currency, row.received_amount) == ("EUR", Decimal("18.00"))


# -- filters, summary ----------------------------------------------------------------------


def test_reconcile_streams_rows_filtered_by_state_and_opening_time(
    ledger: Ledger, clock: FixedClock
) -> None:
    for n in range(4):
        ledger.expect_transaction(f"order-{n}", 2500, "CNY")
        clock.advance(3600)
    record(ledger, outcome("PS", external_identifier="order-1"))
    record(
        ledger,
        outcome(
            "PS",
            external_identifier="stray",
            transaction_id="ll-9",
            paid_at=T0 + timedelta(hours=2, minutes=30),
        ),
    )
    rows = ledger.reconcile()
    assert isinstance(rows, Iterator)
    assert [r.external_identifier for r in rows] == [
        "order-0",
        "order-1",
        "order-2",
        "order-3",
        "stray",
    ]
    assert [r.external_identifier for r in ledger.reconcile(state="paid")] == ["order-1"]
    assert [r.external_identifier for r in ledger.reconcile(state=R.UNEXPECTED)] == ["stray"]
    window = ledger.reconcile(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=3))
    assert [r.external_identifier for r in window] == ["order-1", "order-2", "stray"]
    with pytest.raises(ValueError, match="state"):
        ledger.reconcile(state="settled")
    with pytest.raises(ValueError, match="since"):
        ledger.reconcile(since=datetime(2026, 1, 1))


def test_reconcile_by_paid_time_keeps_payments_whose_money_arrived_in_the_window(
    ledger: Ledger,
) -> None:
    """Paid yesterday: a succeeded outcome's ``paid_at`` in the window, whatever came after (a
    refund) and whenever the payment was registered; a failure in the window is not money."""
    day = timedelta(days=1)
    for name in ("before", "inside", "refunded", "failed", "edge"):
        ledger.expect_transaction(name, 2500, "CNY")
    ledger.expect_subscription("sub", 2500, "CNY", plan_amount_minor=2500)
    ledger.expect_transaction("never", 2500, "CNY")
    paid = [
        ("before", "ll-1", "PS", -day),
        ("inside", "ll-2", "PS", day / 2),
        ("refunded", "ll-3", "PS", day / 4),
        ("refunded", "ll-3", "RS", 2 * day),
        ("failed", "ll-4", "PF", day / 2),
        ("sub", "ll-5", "PS", -30 * day),  # period 1, before the window
        ("sub", "ll-6", "PS", day / 3),  # period 2, inside
        ("edge", "ll-7", "PS", day),  # the window's end: not included
        ("stray", "ll-8", "PS", day / 2),  # nobody expected it, but its money arrived
    ]
    for name, transaction_id, code, offset in paid:
        record(
            ledger,
            outcome(
                code, external_identifier=name, transaction_id=transaction_id, paid_at=T0 + offset
            ),
        )

    window = ledger.reconcile(paid_since=T0, paid_until=T0 + day)
    assert [r.external_identifier for r in window] == ["inside", "refunded", "sub", "stray"]
    after = ledger.reconcile(paid_since=T0 + day)
    assert [r.external_identifier for r in after] == ["edge"]
    before = ledger.reconcile(paid_until=T0, state="paid")  # sub's first period too
    assert [r.external_identifier for r in before] == ["before", "sub"]
    with pytest.raises(ValueError, match="paid_since"):
        ledger.reconcile(paid_since=datetime(2026, 1, 1))


def test_summary_counts_and_totals_per_currency_and_state(ledger: Ledger) -> None:
    ledger.expect_transaction("a", 2500, "CNY")
    ledger.expect_transaction("b", 1000, "CNY")
    ledger.expect_transaction("c", 300, "CNY")
    ledger.expect_transaction("d", 1500, "JPY")
    ledger.expect_transaction("e", 1234, "KWD")
    record(ledger, outcome("PS", external_identifier="a", transaction_id="t-a"))
    record(ledger, outcome("PS", external_identifier="b", transaction_id="t-b", amount_minor=1000))
    record(
        ledger,
        outcome(
            "PS", external_identifier="c", transaction_id="t-c", currency="USD", amount_minor=50
        ),
    )
    record(
        ledger,
        outcome(
            "PS",
            external_identifier="e",
            transaction_id="t-e",
            currency="KWD",
            amount_minor=1234,
            amount=Decimal("1.234"),
        ),
    )
    summary = {(s.currency, s.state): s for s in ledger.summary()}
    # The USD that arrived for a CNY payment is added up in USD, never in CNY.
    assert set(summary) == {
        ("CNY", R.PAID),
        ("CNY", R.CURRENCY_MISMATCH),
        ("JPY", R.PENDING),
        ("KWD", R.PAID),
        ("USD", R.CURRENCY_MISMATCH),
    }
    paid = summary["CNY", R.PAID]
    assert (paid.count, paid.expected_total, paid.received_total) == (
        2,
        Decimal("35.00"),
        Decimal("35.00"),
    )
    mismatch = summary["CNY", R.CURRENCY_MISMATCH]
    assert (mismatch.count, mismatch.expected_total, mismatch.received_total) == (
        1,
        Decimal("3.00"),
        Decimal("0.00"),
    )
    foreign = summary["USD", R.CURRENCY_MISMATCH]
    assert (foreign.count, foreign.expected_total, foreign.received_total) == (
        0,
        Decimal("0.00"),
        Decimal("0.50"),
    )
    assert summary["JPY", R.PENDING].expected_total == Decimal("1500")
    assert summary["KWD", R.PAID].received_total == Decimal("1.234")


def test_amounts_at_the_bound_still_add_up_exactly(ledger: Ledger) -> None:
    ledger.expect_subscription("sub-1", MAX_AMOUNT_MINOR, "USD", MAX_AMOUNT_MINOR)
    for n in range(6):
        record(ledger, period(n, MAX_AMOUNT_MINOR))
    for n in range(6):
        record(
            ledger,
            outcome(
                "PS",
                external_identifier=f"stray-{n}",
                transaction_id=f"s{n}",
                currency="USD",
                amount_minor=MAX_AMOUNT_MINOR,
            ),
        )
    row = row_of(ledger, "sub-1")
    assert (row.state, row.received_amount_minor) == (R.PAID, 6 * MAX_AMOUNT_MINOR)
    assert row.received_amount == Decimal(6 * MAX_AMOUNT_MINOR).scaleb(-2)
    totals = {(s.state, s.count, s.received_amount_minor) for s in ledger.summary()}
    assert totals == {(R.PAID, 1, 6 * MAX_AMOUNT_MINOR), (R.UNEXPECTED, 6, 6 * MAX_AMOUNT_MINOR)}


def test_summary_of_an_empty_ledger_is_empty(ledger: Ledger) -> None:
    assert ledger.summary() == []
    assert list(ledger.reconcile()) == []


# -- query plans ---------------------------------------------------------------------------


def plan(ledger: Ledger, sql: str, params: tuple[Any, ...] = ()) -> list[str]:
    return [row[3] for row in tables(ledger).execute("EXPLAIN QUERY PLAN " + sql, params)]


@pytest.mark.sqlite_only  # SQLite's query plans
def test_one_payments_row_is_one_primary_key_search(ledger: Ledger) -> None:
    steps = plan(ledger, "SELECT * FROM reconciliation WHERE external_identifier = ?", ("x",))
    assert steps == ["SEARCH payment_states USING PRIMARY KEY (external_identifier=?)"]


@pytest.mark.sqlite_only  # SQLite's query plans
def test_the_full_report_reads_the_stored_rows_in_order_and_never_sorts(ledger: Ledger) -> None:
    steps = plan(ledger, "SELECT * FROM reconciliation ORDER BY kind IS NULL, external_identifier")
    assert steps == ["SCAN payment_states USING INDEX payment_states_order"], steps


# -- property: the view agrees with a plain-Python reading of the rules, in any order ------

RANK = {code: STATE_RANK[state] for code, state in CODES.items()}
TXNS = ("t1", "t2", "t3")


def expected_row(
    kind: PaymentKind | None, amount: int, currency: str, plan: int | None, arrival: list[Any]
) -> tuple[Any, ...]:
    """The documented rules, written the obvious way, over the outcomes in arrival order:
    (state, lifecycle_state, periods_paid, currency, received_currency, received_amount).
    ``kind`` None: nothing registered (an unexpected identifier)."""
    if not arrival:
        return R.PENDING, None, 0, currency, None, None
    # An outcome's id is its place in the arrival order; "latest" is by paid_at, then id.
    when = {id(o): (o.paid_at, n) for n, o in enumerate(arrival)}
    known = [o for o in arrival if RANK[o.payment_status] >= 0]

    def lifecycle(txn: str) -> Any:
        """The transaction's highest-ranked known outcome (the latest among equals)."""
        return max(
            (o for o in known if o.transaction_id == txn),
            key=lambda o: (RANK[o.payment_status], when[id(o)]),
        )

    periods = []
    for txn in TXNS:
        past_success = [
            o for o in arrival if o.transaction_id == txn and RANK[o.payment_status] >= 2
        ]
        if past_success:
            periods.append(
                min(past_success, key=lambda o: (RANK[o.payment_status], when[id(o)][1]))
            )
    latest_is_unknown = max(arrival, key=lambda o: when[id(o)]).payment_status == "ZZ"
    top = max(RANK[o.payment_status] for o in arrival)
    if periods:
        lifecycle_state = CODES[{rank: code for code, rank in RANK.items()}[top]]
    elif known:
        lifecycle_state = CODES[
            lifecycle(max(known, key=lambda o: when[id(o)]).transaction_id).payment_status
        ]
    else:
        lifecycle_state = PaymentState.UNKNOWN
    if kind is None:
        period_currencies = {p.currency for p in periods}
        return (
            R.UNEXPECTED,
            lifecycle_state,
            len(periods),
            min(period_currencies or {o.currency for o in arrival}),
            min(period_currencies, default=None),
            sum(p.amount_minor for p in periods) if len(period_currencies) == 1 else None,
        )
    foreign = [p for p in periods if p.currency != currency]
    received_currency = (
        min(p.currency for p in foreign) if foreign else currency if periods else None
    )
    # Money is added up in one currency: the one it arrived in (a third one is not added).
    received = (
        sum(p.amount_minor for p in periods if p.currency == received_currency) if periods else None
    )
    money = (len(periods), currency, received_currency, received)
    if not periods:
        if latest_is_unknown:
            return R.UNKNOWN_STATUS, lifecycle_state, *money
        return R(lifecycle_state.value), lifecycle_state, *money
    if kind is PaymentKind.TRANSACTION and len(periods) > 1:
        return R.DUPLICATE_PAYMENT, lifecycle_state, *money
    if foreign:
        return R.CURRENCY_MISMATCH, lifecycle_state, *money
    ordered = sorted(periods, key=lambda p: (p.paid_at, str(p.amount_minor)))
    wanted = [amount] + [plan if plan is not None else amount] * (len(ordered) - 1)
    if [p.amount_minor for p in ordered] != wanted:
        return R.AMOUNT_MISMATCH, lifecycle_state, *money
    if latest_is_unknown:
        return R.UNKNOWN_STATUS, lifecycle_state, *money
    state = R.PAID if lifecycle_state is PaymentState.SUCCEEDED else R(lifecycle_state.value)
    return state, lifecycle_state, *money


CURRENCIES = ("AUD", "EUR", "USD")


@cache
def migrated_template() -> Database:
    """An in-memory ledger migrated once for the module: migrating costs about six times
    what copying the migrated file does, and the property below wants a fresh one per
    example."""
    db = Database(memory=True)
    Ledger(db).close()
    return db


def fresh_ledger_database() -> Database:
    """A new in-memory database holding the migrated schema and nothing else."""
    connection = sqlite3.connect(":memory:")
    migrated_template().conn.backup(connection)
    return Database(connection)


outcome_sets = st.dictionaries(
    keys=st.tuples(st.sampled_from(TXNS), st.sampled_from(sorted(CODES))),
    values=st.tuples(
        st.sampled_from([999, 1999, 2999]), st.sampled_from(CURRENCIES), st.integers(0, 3)
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from([*PaymentKind, None]),
    currency=st.sampled_from(CURRENCIES),
    spec=outcome_sets,
    order=st.randoms(use_true_random=False),
    register_first=st.booleans(),
)
def test_the_view_follows_the_rules_whatever_the_arrival_order(
    kind: PaymentKind | None,
    currency: str,
    spec: dict[tuple[str, str], tuple[int, str, int]],
    order: Any,
    register_first: bool,
) -> None:
    outcomes = [
        outcome(code, transaction_id=txn, amount_minor=amount, currency=paid_in, minutes=minute)
        for (txn, code), (amount, paid_in, minute) in spec.items()
    ]
    plan = 1999 if kind is PaymentKind.SUBSCRIPTION else None
    arrival = list(outcomes)
    order.shuffle(arrival)
    with closing(fresh_ledger_database()) as db, Ledger(db) as ledger:

        def register() -> None:
            if kind is PaymentKind.SUBSCRIPTION:
                ledger.expect_subscription("order-1", 999, currency, 1999)
            elif kind is PaymentKind.TRANSACTION:
                ledger.expect_transaction("order-1", 999, currency)

        if register_first:
            register()
        for item in arrival:
            record(ledger, item)
        if not register_first:
            register()
        if kind is None and not outcomes:
            assert ledger.row("order-1") is None
            return
        row = row_of(ledger)
    assert (
        row.state,
        row.lifecycle_state,
        row.periods_paid,
        row.currency,
        row.received_currency,
        row.received_amount_minor,
    ) == expected_row(kind, 999, currency, plan, arrival)
    assert row.transaction_ids == tuple(sorted({o.transaction_id for o in outcomes}))
    assert row.unknown_outcomes == sum(1 for o in outcomes if o.payment_status == "ZZ")


def test_a_payment_paid_in_two_currencies_counts_each_in_its_own_total(ledger: Ledger) -> None:
    ledger.expect_subscription("sub-1", 1000, "CNY", 1000)
    record(
        ledger, outcome("PS", external_identifier="sub-1", transaction_id="p1", amount_minor=1000)
    )
    record(
        ledger,
        outcome(
            "PS",
            external_identifier="sub-1",
            transaction_id="p2",
            currency="USD",
            amount_minor=150,
            minutes=60,
        ),
    )
    row = row_of(ledger, "sub-1")
    assert (row.state, row.received_currency, row.received_amount_minor) == (
        R.CURRENCY_MISMATCH,
        "USD",
        150,
    )
    assert row.home_received_amount_minor == 1000
    received = {(s.currency, s.state): s.received_amount_minor for s in ledger.summary()}
    assert received == {("CNY", R.CURRENCY_MISMATCH): 1000, ("USD", R.CURRENCY_MISMATCH): 150}
