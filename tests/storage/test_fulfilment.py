"""Fulfilment is decided on the money: ``payment-succeeded`` is owed by the payment's own
verified outcomes against what was expected, whatever the service's (unsigned) list says, and
a later change of the money state owes what the new state owes, in that commit."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.storage import (
    DriftKind,
    Ledger,
    ListedTransaction,
    Outcome,
    PaymentState,
    ReconciliationState,
)
from tests.support.engines import tables
from tests.support.factories import make_outcome, record

R = ReconciliationState
S = PaymentState


def sync(ledger: Ledger, *items: ListedTransaction) -> None:
    run = ledger.service.begin_sync(max_age=timedelta(hours=1))
    ledger.service.record_service_page(run.id, items, None)
    ledger.service.end_sync(run.id)


def succeeded_owed(ledger: Ledger) -> list[int]:
    """The outcomes that owe (or owed) ``payment-succeeded``, sent or not."""
    rows = tables(ledger).execute(
        "SELECT outcome_id FROM owed_signals WHERE signal = 'payment-succeeded' ORDER BY 1"
    )
    return [row[0] for row in rows]


def failed(tx: str, minutes: int = 0, ref: str = "order-1") -> Outcome:
    return make_outcome(
        transaction_id=tx,
        external_identifier=ref,
        payment_status="PF",
        state=S.FAILED,
        paid_at=make_outcome().paid_at + timedelta(minutes=minutes),
    )


def test_a_lost_failure_listed_by_the_sync_does_not_stop_the_second_attempts_fulfilment(
    ledger: Ledger,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    sync(ledger, ListedTransaction("ll-1", "order-1", "failed", S.FAILED, "CNY", 2500))
    paid = record(ledger, make_outcome(transaction_id="ll-2", paid_at=make_outcome().paid_at))
    row = ledger.row("order-1")
    assert row is not None
    assert (row.state, row.drift) == (R.PAID, DriftKind.MISSED_NOTIFICATION)
    assert succeeded_owed(ledger) == [paid.outcome_id]
    # The lost PF is resent (docs/sync.md): the drift goes, nothing new is owed for paying.
    record(ledger, failed("ll-1", minutes=-10))
    row = ledger.row("order-1")
    assert row is not None
    assert (row.state, row.drift) == (R.PAID, None)
    assert succeeded_owed(ledger) == [paid.outcome_id]


def test_a_lost_subscription_period_failure_does_not_stop_the_next_periods_fulfilment(
    ledger: Ledger,
) -> None:
    ledger.expect_subscription("sub-1", 1000, "CNY", 1000)
    first = record(
        ledger,
        make_outcome(transaction_id="p1", external_identifier="sub-1", amount_minor=1000),
    )
    sync(ledger, ListedTransaction("p2", "sub-1", "failed", S.FAILED, "CNY", 1000))
    third = record(
        ledger,
        make_outcome(
            transaction_id="p3",
            external_identifier="sub-1",
            amount_minor=1000,
            paid_at=make_outcome().paid_at + timedelta(days=60),
        ),
    )
    assert ledger.state("sub-1") is R.PAID
    assert succeeded_owed(ledger) == [first.outcome_id, third.outcome_id]


@pytest.mark.parametrize(
    "listing",
    [
        ListedTransaction("ll-9", "order-1", "failed", S.FAILED, "CNY", 2500),  # phantom
        ListedTransaction("ll-1", "order-1", "refunded", S.REFUNDED, "CNY", 2500),  # relabelled
        ListedTransaction("ll-1", "order-1", "??", S.UNKNOWN, "CNY", 2500),
        ListedTransaction("ll-1", "someone-else", "succeeded", S.SUCCEEDED, "CNY", 2500),
    ],
    ids=["phantom", "relabelled", "unknown", "moved"],
)
@pytest.mark.parametrize("listed_first", [True, False], ids=["listed-first", "notified-first"])
def test_nothing_the_list_holds_removes_a_fulfilment(
    ledger: Ledger, listing: ListedTransaction, listed_first: bool
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    if listed_first:
        sync(ledger, listing)
    paid = record(ledger, make_outcome())
    if not listed_first:
        sync(ledger, listing)
    assert ledger.state("order-1") is R.PAID
    assert succeeded_owed(ledger) == [paid.outcome_id]


def test_a_payment_registered_after_its_outcome_owes_its_fulfilment_then(ledger: Ledger) -> None:
    paid = record(ledger, make_outcome())
    assert ledger.state("order-1") is R.UNEXPECTED
    assert succeeded_owed(ledger) == []
    ledger.expect_transaction("order-1", 2500, "CNY")
    assert ledger.state("order-1") is R.PAID
    assert succeeded_owed(ledger) == [paid.outcome_id]
    # Nobody was there to send it: any sender may claim it at once, with what the outcome owed
    # as it arrived unexpected.
    claimed = ledger.signals.claim(None, lease=timedelta(minutes=5))
    assert [s.signal for s in claimed] == [
        "notification-received",
        "payment-succeeded",
        "payment-mismatch",
    ]


def test_a_refused_and_a_conflicting_delivery_show_on_the_payments_row(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    for n in range(3):
        refused = ledger.receiver.record_delivery(dedupe_key=f"bad-{n}", body=b"{}", headers={})
        ledger.receiver.mark_delivery(
            refused.id, "invalid_payload", '{"message": "amount is missing"}',
            external_identifier="order-1",
        )  # fmt: skip
    record(ledger, make_outcome())
    record(ledger, make_outcome(amount_minor=2999, amount=make_outcome().amount * 2))
    row = ledger.row("order-1")
    assert row is not None
    assert (row.state, row.refused_deliveries, row.conflicting_deliveries) == (R.PAID, 3, 1)
    assert row.latest_problem is not None
    assert row.latest_problem.startswith("conflicting_outcome: ")


_examples = itertools.count()
outcome_steps = st.lists(
    st.tuples(
        st.sampled_from(["notify", "list"]),
        st.sampled_from(["t1", "t2"]),
        st.sampled_from([S.PENDING, S.SUCCEEDED, S.FAILED, S.REFUNDED, S.UNKNOWN]),
    ),
    max_size=6,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=outcome_steps)
def test_the_list_never_adds_nor_removes_a_payment_succeeded(
    ledger: Ledger, steps: list[tuple[str, str, PaymentState]]
) -> None:
    """The same history of notifications, with and without the list's items interleaved,
    owes the same ``payment-succeeded`` signals and reaches the same money state."""
    example = next(_examples)  # the ledger is shared by the examples: fresh names
    codes = {S.PENDING: "WP", S.SUCCEEDED: "PS", S.FAILED: "PF", S.REFUNDED: "RS", S.UNKNOWN: "ZZ"}

    def run(prefix: str, with_list: bool) -> tuple[R | None, list[str]]:
        ref = f"{prefix}-order"
        ledger.expect_transaction(ref, 2500, "CNY")
        for n, (kind, tx, state) in enumerate(steps):
            if kind == "notify":
                outcome = make_outcome(
                    transaction_id=f"{prefix}-{tx}",
                    external_identifier=ref,
                    payment_status=codes[state],
                    state=state,
                    paid_at=make_outcome().paid_at + timedelta(minutes=n),
                )
                record(ledger, outcome)
            elif with_list:
                sync(ledger, ListedTransaction(f"{prefix}-{tx}", ref, str(state), state))
        rows = tables(ledger).execute(
            "SELECT o.transaction_id FROM owed_signals AS s JOIN outcomes AS o "
            "ON o.id = s.outcome_id WHERE s.signal = 'payment-succeeded' "
            "AND o.external_identifier = ? ORDER BY 1",
            (ref,),
        )
        return ledger.state(ref), [row[0].removeprefix(f"{prefix}-") for row in rows]

    assert run(f"listed{example}", True) == run(f"plain{example}", False)


def period(tx: str, amount: int, *, days: int = 0, **fields: object) -> Outcome:
    """A succeeded period of ``sub-1`` (or what ``fields`` make of it), ``days`` after T0."""
    return make_outcome(
        transaction_id=tx,
        external_identifier="sub-1",
        amount_minor=amount,
        paid_at=make_outcome().paid_at + timedelta(days=days),
        **fields,
    )


def test_a_refunded_period_never_withholds_the_next_periods_fulfilment(ledger: Ledger) -> None:
    ledger.expect_subscription("sub-1", 1000, "CNY", 1000)
    first = record(ledger, period("p1", 1000))
    record(ledger, period("p1", 1000, days=3, payment_status="RS", state=S.REFUNDED))
    second = record(ledger, period("p2", 1000, days=30))
    assert ledger.state("sub-1") is R.REFUNDED  # the furthest any period went
    assert succeeded_owed(ledger) == [first.outcome_id, second.outcome_id]


def test_one_transaction_is_fulfilled_once_whatever_codes_say_it_succeeded(
    ledger: Ledger,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    paid = record(ledger, make_outcome())
    record(ledger, make_outcome(payment_status="AU"))  # a merchant's map: also succeeded
    assert ledger.state("order-1") is R.PAID
    assert succeeded_owed(ledger) == [paid.outcome_id]


def test_a_short_period_withholds_its_own_fulfilment_and_no_other(ledger: Ledger) -> None:
    ledger.expect_subscription("sub-1", 1000, "CNY", 1000)
    record(ledger, period("p1", 900))
    second = record(ledger, period("p2", 1000, days=30))
    assert ledger.state("sub-1") is R.AMOUNT_MISMATCH
    assert succeeded_owed(ledger) == [second.outcome_id]
