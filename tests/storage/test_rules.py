"""The reconciliation rules and the signal rules as pure functions: no database, no clock.

Every rule case is a call of ``reconcile(Inputs(...))``: the outcomes are given in the order
they arrived (their ids), with the times the ledger stores. The ledger's own tests
(test_ledger_reconciliation.py, test_fulfilment.py) check, on both engines, that what it
stores is what these functions decide; here the functions themselves are held to the
documented rules (docs/reconciliation.md), over hand-picked cases and random histories.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payhooks.storage import (
    MISMATCH_STATES,
    DriftKind,
    PaymentKind,
    PaymentState,
    ReconciliationRow,
    ReconciliationState,
)
from payhooks.storage.records import STATE_RANK
from payhooks.storage.rules import (
    Expectation,
    Inputs,
    ListedFact,
    OutcomeFact,
    Problems,
    fulfilled,
    reconcile,
)
from payhooks.storage.signal_rules import owed_signals
from payhooks.storage.times import from_text
from tests.support.rule_cases import (
    CODES,
    CURRENCIES,
    TXNS,
    Note,
    arrived,
    at,
    note_histories,
    registered,
)

R = ReconciliationState
S = PaymentState
T = "2026-11-21T12:00:{:02d}+00:00"
ORDER = Expectation(PaymentKind.TRANSACTION, 2500, "CNY", None, "2026-11-21T11:00:00+00:00")


def decided(expectation: Expectation | None, *notes: Note, **inputs: Any) -> ReconciliationRow:
    """The row ``reconcile`` gives ``order-1`` when ``notes`` arrived, in order."""
    row = reconcile(Inputs("order-1", expectation, arrived(*notes), **inputs))
    assert row is not None
    return row


#: Registered at T0, as the ledger's tests register them.
CNY_2500 = Expectation(PaymentKind.TRANSACTION, 2500, "CNY", None, at(0))
#: A subscription: its first period 9.99 USD, each later one 19.99.
SUB = Expectation(PaymentKind.SUBSCRIPTION, 999, "USD", 1999, at(0))


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
    assert (row.charged_back_amount_minor, row.net_amount_minor) == (1000, 1000)


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
    assert owed_signals(before, after, Inputs("order-1", ORDER, outcomes), None) == [
        (1, "payment-succeeded")
    ]


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


@settings(max_examples=300, deadline=None)
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
        plain_inputs = Inputs("order-1", expectation, list(outcomes))
        listed_inputs = Inputs("order-1", expectation, list(outcomes), listing)
        plain, with_list = reconcile(plain_inputs), reconcile(listed_inputs)
        assert plain is not None
        assert with_list is not None
        assert with_list.state is plain.state
        new = outcomes[-1]
        assert owed_signals(before_listed, with_list, listed_inputs, new) == owed_signals(
            before_plain, plain, plain_inputs, new
        )
        before_plain, before_listed = plain, with_list


# -- every state of one transaction ---------------------------------------------------------


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
    codes: list[str], state: ReconciliationState
) -> None:
    notes = [Note(code, minutes=minute) for minute, code in enumerate(codes)]
    assert decided(CNY_2500, *notes).state is state


def test_a_pending_payment_has_no_received_amount() -> None:
    row = decided(Expectation(PaymentKind.TRANSACTION, 2500, "JPY", None, at(0)))
    assert (row.state, row.lifecycle_state, row.transaction_ids) == (R.PENDING, None, ())
    assert (row.expected_amount_minor, row.received_amount_minor) == (2500, None)
    assert (row.periods_paid, row.last_outcome_at, row.received_currency) == (0, None, None)


def test_a_different_amount_is_an_amount_mismatch() -> None:
    row = decided(CNY_2500, Note("PS", amount=2400))
    assert row.state is R.AMOUNT_MISMATCH
    assert (row.expected_amount_minor, row.received_amount_minor) == (2500, 2400)


def test_a_different_currency_is_a_currency_mismatch_with_what_arrived() -> None:
    row = decided(CNY_2500, Note("PS", currency="USD", amount=350))
    assert row.state is R.CURRENCY_MISMATCH
    assert (row.currency, row.received_currency, row.received_amount_minor) == ("CNY", "USD", 350)


def test_two_succeeded_transactions_for_one_transaction_are_a_duplicate_payment() -> None:
    row = decided(CNY_2500, Note("PS", tx="ll-1"), Note("PS", minutes=3, tx="ll-2"))
    assert row.state is R.DUPLICATE_PAYMENT
    assert row.transaction_ids == ("ll-1", "ll-2")
    assert (row.periods_paid, row.received_amount_minor) == (2, 5000)


def test_a_failed_attempt_then_a_success_is_paid_not_a_duplicate() -> None:
    row = decided(CNY_2500, Note("PF", tx="ll-1"), Note("PS", minutes=3, tx="ll-2"))
    assert (row.state, row.periods_paid, row.transaction_ids) == (R.PAID, 1, ("ll-1", "ll-2"))


@pytest.mark.parametrize(
    ("first", "second", "state"),
    [("PF", "PC", R.CANCELLED), ("PC", "PF", R.FAILED)],
)
def test_between_failed_and_cancelled_the_latest_paid_at_decides(
    first: str, second: str, state: ReconciliationState
) -> None:
    # Arrived in reverse: the time of the outcome decides, not the time of arrival.
    notes = Note(second, minutes=10, tx="ll-2"), Note(first, minutes=0, tx="ll-1")
    assert decided(CNY_2500, *notes).state is state


def test_a_cancellation_does_not_undo_a_success() -> None:
    row = decided(CNY_2500, Note("PS", tx="ll-1"), Note("PC", minutes=9, tx="ll-2"))
    assert row.state is R.PAID


@pytest.mark.parametrize(
    ("code", "state"),
    [
        ("RP", R.REFUND_PENDING),
        ("PR", R.PARTIALLY_REFUNDED),
        ("RS", R.REFUNDED),
        ("CB", R.CHARGED_BACK),
    ],
)
def test_refunds_and_chargebacks_keep_the_amounts(code: str, state: ReconciliationState) -> None:
    row = decided(CNY_2500, Note("PS"), Note(code, minutes=60, amount=1000))
    assert row.state is state
    assert (row.expected_amount_minor, row.received_amount_minor) == (2500, 2500)


def test_a_refunded_mismatch_stays_a_mismatch_and_says_refunded() -> None:
    row = decided(CNY_2500, Note("PS", amount=2600), Note("RS", minutes=60, amount=2600))
    assert (row.state, row.lifecycle_state) == (R.AMOUNT_MISMATCH, S.REFUNDED)


def test_unknown_status_codes_are_counted_and_flagged() -> None:
    unknown = Note("ZZ")
    row = decided(CNY_2500, unknown)
    assert (row.state, row.lifecycle_state, row.unknown_outcomes) == (
        R.UNKNOWN_STATUS,
        S.UNKNOWN,
        1,
    )
    row = decided(CNY_2500, unknown, Note("PS", minutes=1))
    assert (row.state, row.unknown_outcomes) == (R.PAID, 1)


def test_an_unmapped_code_after_a_success_needs_a_person_and_keeps_the_amounts() -> None:
    # A dispute code the map does not know, an hour after the success.
    row = decided(CNY_2500, Note("PS"), Note("ZZ", minutes=60))
    assert (row.state, row.lifecycle_state, row.unknown_outcomes) == (
        R.UNKNOWN_STATUS,
        S.SUCCEEDED,
        1,
    )
    assert (row.expected_amount_minor, row.received_amount_minor) == (2500, 2500)
    assert R.UNKNOWN_STATUS in MISMATCH_STATES


def test_an_unmapped_code_dated_before_the_success_does_not_decide() -> None:
    # It arrives last, but happened first.
    assert decided(CNY_2500, Note("PS", minutes=5), Note("ZZ", minutes=0)).state is R.PAID


@pytest.mark.parametrize(
    ("arrival", "state"),
    [(["PS", "ZZ"], R.UNKNOWN_STATUS), (["ZZ", "PS"], R.PAID)],
)
def test_at_the_same_paid_at_the_later_arrival_is_the_latest(
    arrival: list[str], state: ReconciliationState
) -> None:
    assert decided(CNY_2500, *(Note(code, minutes=7) for code in arrival)).state is state


def test_a_money_problem_wins_over_an_unknown_latest_outcome() -> None:
    row = decided(CNY_2500, Note("PS", amount=2400), Note("ZZ", minutes=1))
    assert row.state is R.AMOUNT_MISMATCH


@pytest.mark.parametrize("closed", ["PF", "PC"])
def test_a_retry_still_pending_after_a_failure_or_cancellation_is_pending(closed: str) -> None:
    history = Note(closed, minutes=0, tx="ll-1"), Note("WP", minutes=5, tx="ll-2")
    row = decided(CNY_2500, *history)
    assert (row.state, row.lifecycle_state) == (R.PENDING, S.PENDING)
    assert row.transaction_ids == ("ll-1", "ll-2")
    # The retry fails too: failed again.
    assert decided(CNY_2500, *history, Note("PF", minutes=6, tx="ll-2")).state is R.FAILED


def test_the_transaction_with_the_latest_outcome_decides_by_its_own_lifecycle() -> None:
    # ll-1 failed, then a late `pending` of the same transaction (dated after) arrives; a
    # retry ll-2 is pending in between. ll-1 has the latest outcome, and it stays failed.
    row = decided(
        CNY_2500,
        Note("PF", minutes=0, tx="ll-1"),
        Note("WP", minutes=5, tx="ll-2"),
        Note("WP", minutes=9, tx="ll-1"),
    )
    assert (row.state, row.lifecycle_state) == (R.FAILED, S.FAILED)


def test_an_unknown_latest_outcome_without_a_period_keeps_the_last_known_state() -> None:
    row = decided(CNY_2500, Note("PF", minutes=0, tx="ll-1"), Note("ZZ", minutes=3, tx="ll-2"))
    assert (row.state, row.lifecycle_state, row.unknown_outcomes) == (
        R.UNKNOWN_STATUS,
        S.FAILED,
        1,
    )


def test_an_outcome_no_payment_names_is_unexpected() -> None:
    note = Note("PS", currency="USD", amount=100)
    row = decided(None, note)
    assert row.state is R.UNEXPECTED
    assert (row.kind, row.expected_amount_minor) == (None, None)
    assert (row.currency, row.received_currency, row.received_amount_minor) == ("USD", "USD", 100)
    assert row.opened_at == from_text(at(0))
    assert fulfilled(Inputs("order-1", None, arrived(note)), row.state) == ()


def test_an_unexpected_failure_has_nothing_received() -> None:
    row = decided(None, Note("PF"))
    assert (row.state, row.lifecycle_state, row.received_amount_minor) == (
        R.UNEXPECTED,
        S.FAILED,
        None,
    )


def test_the_success_amount_is_preferred_over_a_later_refund_amount() -> None:
    refund = Note("PR", minutes=60, amount=500)
    # All that is known so far is 5.00.
    assert decided(CNY_2500, refund).state is R.AMOUNT_MISMATCH
    row = decided(CNY_2500, refund, Note("PS", minutes=0))
    assert (row.state, row.received_amount_minor) == (R.PARTIALLY_REFUNDED, 2500)


# -- subscriptions ---------------------------------------------------------------------------


def period(n: int, amount: int, code: str = "PS") -> Note:
    """Period ``n`` of the subscription (its own transaction), ``n`` months after T0."""
    return Note(code, minutes=n * 30 * 24 * 60, tx=f"ll-p{n}", amount=amount, currency="USD")


def test_subscription_periods_are_counted_first_at_its_amount_then_the_plan() -> None:
    row = decided(SUB, *(period(n, amount) for n, amount in enumerate([999, 1999, 1999])))
    assert row.state is R.PAID
    assert row.periods_paid == 3
    assert (row.expected_amount_minor, row.received_amount_minor) == (999 + 2 * 1999,) * 2
    assert row.transaction_ids == ("ll-p0", "ll-p1", "ll-p2")


def test_a_subscription_not_yet_paid_expects_its_first_period() -> None:
    row = decided(SUB)
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
    amounts: list[int],
) -> None:
    row = decided(SUB, *(period(n, amount) for n, amount in enumerate(amounts)))
    assert row.state is R.AMOUNT_MISMATCH
    assert row.received_amount_minor == sum(amounts)


def test_the_first_period_is_the_earliest_paid_whatever_the_arrival_order() -> None:
    assert decided(SUB, period(2, 1999), period(1, 1999), period(0, 999)).state is R.PAID


@pytest.mark.parametrize(
    ("first", "plan", "state"),
    [(999, 1999, R.AMOUNT_MISMATCH), (1999, 1999, R.PAID)],
)
def test_two_periods_paid_at_the_same_time_and_amount_are_the_first_and_a_later_one(
    first: int, plan: int, state: ReconciliationState
) -> None:
    subscription = Expectation(PaymentKind.SUBSCRIPTION, first, "USD", plan, at(0))
    twins = (Note("PS", tx=f"ll-twin-{n}", amount=first, currency="USD") for n in range(2))
    assert decided(subscription, *twins).state is state


def test_a_subscription_with_equal_first_and_plan_amounts() -> None:
    subscription = Expectation(PaymentKind.SUBSCRIPTION, 1999, "USD", 1999, at(0))
    row = decided(subscription, *(period(n, 1999) for n in range(4)))
    assert (row.state, row.periods_paid, row.expected_amount_minor) == (R.PAID, 4, 4 * 1999)


def test_a_refunded_subscription_period_is_reported() -> None:
    row = decided(SUB, period(0, 999), period(1, 1999), period(1, 1999, code="RS"))
    assert (row.state, row.periods_paid) == (R.REFUNDED, 2)


def test_a_subscription_period_in_another_currency_is_a_currency_mismatch() -> None:
    other = Note("PS", minutes=60 * 24 * 30, tx="ll-eur", amount=1800, currency="EUR")
    row = decided(SUB, period(0, 999), other)
    assert row.state is R.CURRENCY_MISMATCH
    assert (row.received_currency, row.received_amount_minor) == ("EUR", 1800)
    assert row.home_received_amount_minor == 999


# -- property: reconcile agrees with a plain reading of the rules, in any arrival order ------

RANK = {code: STATE_RANK[state] for code, state in CODES.items()}


def expected_row(
    kind: PaymentKind | None, amount: int, currency: str, plan: int | None, arrival: list[Note]
) -> tuple[Any, ...]:
    """The documented rules, written the obvious way, over the outcomes in arrival order:
    (state, lifecycle_state, periods_paid, currency, received_currency, received_amount).
    ``kind`` None: nothing registered (an unexpected identifier)."""
    if not arrival:
        return R.PENDING, None, 0, currency, None, None
    # An outcome's id is its place in the arrival order; "latest" is by paid_at, then id.
    when = {id(o): (o.minutes, n) for n, o in enumerate(arrival)}
    known = [o for o in arrival if RANK[o.code] >= 0]

    def lifecycle(txn: str) -> Note:
        """The transaction's highest-ranked known outcome (the latest among equals)."""
        return max(
            (o for o in known if o.tx == txn),
            key=lambda o: (RANK[o.code], when[id(o)]),
        )

    periods = []
    for txn in TXNS:
        past_success = [o for o in arrival if o.tx == txn and RANK[o.code] >= 2]
        if past_success:
            periods.append(min(past_success, key=lambda o: (RANK[o.code], when[id(o)][1])))
    latest_is_unknown = max(arrival, key=lambda o: when[id(o)]).code == "ZZ"
    top = max(RANK[o.code] for o in arrival)
    if periods:
        lifecycle_state = CODES[{rank: code for code, rank in RANK.items()}[top]]
    elif known:
        lifecycle_state = CODES[lifecycle(max(known, key=lambda o: when[id(o)]).tx).code]
    else:
        lifecycle_state = S.UNKNOWN
    if kind is None:
        period_currencies = {p.currency for p in periods}
        return (
            R.UNEXPECTED,
            lifecycle_state,
            len(periods),
            min(period_currencies or {o.currency for o in arrival}),
            min(period_currencies, default=None),
            sum(p.amount for p in periods) if len(period_currencies) == 1 else None,
        )
    foreign = [p for p in periods if p.currency != currency]
    received_currency = (
        min(p.currency for p in foreign) if foreign else currency if periods else None
    )
    # Money is added up in one currency: the one it arrived in (a third one is not added).
    received = (
        sum(p.amount for p in periods if p.currency == received_currency) if periods else None
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
    ordered = sorted(periods, key=lambda p: (p.minutes, str(p.amount)))
    wanted = [amount] + [plan if plan is not None else amount] * (len(ordered) - 1)
    if [p.amount for p in ordered] != wanted:
        return R.AMOUNT_MISMATCH, lifecycle_state, *money
    if latest_is_unknown:
        return R.UNKNOWN_STATUS, lifecycle_state, *money
    state = R.PAID if lifecycle_state is S.SUCCEEDED else R(lifecycle_state.value)
    return state, lifecycle_state, *money


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from([*PaymentKind, None]),
    currency=st.sampled_from(CURRENCIES),
    notes=note_histories,
    order=st.randoms(use_true_random=False),
)
def test_reconcile_follows_the_rules_whatever_the_arrival_order(
    kind: PaymentKind | None, currency: str, notes: list[Note], order: Any
) -> None:
    arrival = list(notes)
    order.shuffle(arrival)
    row = reconcile(Inputs("order-1", registered(kind, currency), arrived(*arrival)))
    if kind is None and not notes:
        assert row is None
        return
    assert row is not None
    plan = 1999 if kind is PaymentKind.SUBSCRIPTION else None
    assert (
        row.state,
        row.lifecycle_state,
        row.periods_paid,
        row.currency,
        row.received_currency,
        row.received_amount_minor,
    ) == expected_row(kind, 999, currency, plan, arrival)
    assert row.transaction_ids == tuple(sorted({o.tx for o in notes}))
    assert row.unknown_outcomes == sum(1 for o in notes if o.code == "ZZ")
    returned = row.refunded_amount_minor + row.charged_back_amount_minor
    received = row.received_amount_minor
    assert row.net_amount_minor == (None if received is None else received - returned)
