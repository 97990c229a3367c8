"""The reconciliation rules and the signal rules as pure functions: no database, no clock.

The ledger's own tests (test_ledger_reconciliation.py, test_fulfilment.py) check that what it
stores is what these functions say; here the functions themselves are held to the documented
rules, over hand-picked cases and random histories.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from payhooks.storage import DriftKind, PaymentKind, PaymentState, ReconciliationState
from payhooks.storage.rules import (
    Expectation,
    Inputs,
    ListedFact,
    OutcomeFact,
    Problems,
    reconcile,
)
from payhooks.storage.signal_rules import owed_signals

R = ReconciliationState
S = PaymentState
T = "2026-11-21T12:00:{:02d}+00:00"
ORDER = Expectation(PaymentKind.TRANSACTION, 2500, "CNY", None, "2026-11-21T11:00:00+00:00")


def fact(n: int, state: PaymentState, tx: str = "t1", amount: int = 2500) -> OutcomeFact:
    return OutcomeFact(n, tx, state, amount, "CNY", T.format(n))


def test_nothing_named_is_no_row() -> None:
    assert reconcile(Inputs("nobody")) is None


def test_a_paid_order_with_refused_and_conflicting_deliveries_shows_them() -> None:
    row = reconcile(
        Inputs("order-1", ORDER, [fact(1, S.SUCCEEDED)], problems=Problems(2, 1, "x: y"))
    )
    assert row is not None
    assert (row.state, row.refused_deliveries, row.conflicting_deliveries) == (R.PAID, 2, 1)
    assert (row.received_amount_minor, row.refunded_amount_minor) == (2500, 0)


def test_a_refund_and_a_chargeback_are_counted_apart_from_what_arrived() -> None:
    subscription = Expectation(
        PaymentKind.SUBSCRIPTION, 1000, "CNY", 1000, "2026-11-21T11:00:00+00:00"
    )
    periods = [
        fact(1, S.REFUNDED, "p1", 1000),
        fact(2, S.CHARGED_BACK, "p2", 1000),
        fact(3, S.SUCCEEDED, "p3", 1000),
    ]
    row = reconcile(Inputs("sub-1", subscription, periods))
    assert row is not None
    assert (row.received_amount_minor, row.refunded_amount_minor) == (3000, 1000)
    assert row.charged_back_amount_minor == 1000


def test_the_list_alone_names_an_unexpected_payment_and_flags_it() -> None:
    listed = [ListedFact("t9", S.SUCCEEDED, "EUR", T.format(0))]
    row = reconcile(Inputs("stranger", listed=listed))
    assert row is not None
    assert (row.state, row.drift, row.currency, row.received_amount_minor) == (
        R.UNEXPECTED,
        DriftKind.UNEXPECTED,
        "EUR",
        None,
    )


def test_a_payment_nothing_names_after_a_complete_sync_is_missing_at_the_service() -> None:
    row = reconcile(Inputs("order-1", ORDER, missing_before="2026-11-21T11:30:00+00:00"))
    assert row is not None
    assert (row.state, row.drift) == (R.PENDING, DriftKind.MISSING_AT_SERVICE)


def test_a_registration_that_makes_a_payment_paid_owes_its_fulfilment() -> None:
    outcomes = [fact(1, S.SUCCEEDED)]
    before = reconcile(Inputs("order-1", None, outcomes))
    after = reconcile(Inputs("order-1", ORDER, outcomes))
    assert before is not None
    assert after is not None
    assert owed_signals(before, after, outcomes, None) == [(1, "payment-succeeded")]


histories = st.lists(
    st.tuples(
        st.sampled_from(["t1", "t2"]),
        st.sampled_from([S.PENDING, S.SUCCEEDED, S.FAILED, S.CANCELLED, S.REFUNDED, S.UNKNOWN]),
        st.sampled_from([2500, 2400]),
    ),
    max_size=5,
)
listings = st.lists(
    st.tuples(st.sampled_from(["t1", "t2", "t3"]), st.sampled_from(list(S))), max_size=3
)


@settings(max_examples=300)
@given(history=histories, listed=listings, registered=st.booleans())
def test_nothing_the_list_holds_changes_the_money_or_the_fulfilment(
    history: list[tuple[str, PaymentState, int]],
    listed: list[tuple[str, PaymentState]],
    registered: bool,
) -> None:
    expectation = ORDER if registered else None
    outcomes: list[OutcomeFact] = []
    listing = [ListedFact(tx, state, "CNY", T.format(0)) for tx, state in listed]
    before_plain = before_listed = None
    for n, (tx, state, amount) in enumerate(history, start=1):
        outcomes.append(fact(n, state, tx, amount))
        plain = reconcile(Inputs("order-1", expectation, list(outcomes)))
        with_list = reconcile(Inputs("order-1", expectation, list(outcomes), listing))
        assert plain is not None
        assert with_list is not None
        assert with_list.state is plain.state
        new = outcomes[-1]
        assert owed_signals(before_listed, with_list, outcomes, new) == owed_signals(
            before_plain, plain, outcomes, new
        )
        before_plain, before_listed = plain, with_list
