"""The reconciliation as the ledger stores it: each payment's row is what the rules decided
(the rules' cases themselves call ``reconcile`` in test_rules.py), whatever the arrival order;
the filters, the summary, the query plans."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
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
    Ledger,
    ListedTransaction,
    PaymentKind,
    PaymentState,
    ReconciliationRow,
    ReconciliationState,
)
from payhooks.storage.rules import Expectation, Inputs, ListedFact, Problems, reconcile
from tests.support.engines import tables
from tests.support.factories import T0, FixedClock, make_outcome, record
from tests.support.rule_cases import (
    CODES,
    CURRENCIES,
    Note,
    arrived,
    as_outcome,
    at,
    note_histories,
    registered,
)

R = ReconciliationState


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


# -- what is stored is what reconcile decided -----------------------------------------------


def register(ledger: Ledger, identifier: str, expectation: Expectation | None) -> None:
    """Register ``expectation`` (nothing when None) through the ledger."""
    if expectation is None:
        return
    if expectation.kind is PaymentKind.SUBSCRIPTION:
        assert expectation.plan_amount_minor is not None
        ledger.expect_subscription(
            identifier, expectation.amount_minor, expectation.currency,
            expectation.plan_amount_minor,
        )  # fmt: skip
    else:
        ledger.expect_transaction(identifier, expectation.amount_minor, expectation.currency)


@dataclass(frozen=True)
class Story:
    """One payment's history: registered, then ``refused`` refused deliveries, the notes in
    order, then a complete sync listing ``listed`` (transaction, state); and the amounts the
    stored row shows in major units (expected, received)."""

    expectation: Expectation | None
    notes: tuple[Note, ...]
    amounts: tuple[Decimal | None, Decimal | None]
    refused: int = 0
    listed: tuple[tuple[str, PaymentState], ...] = ()


CNY_2500 = Expectation(PaymentKind.TRANSACTION, 2500, "CNY", None, at(0))
SUB = Expectation(PaymentKind.SUBSCRIPTION, 999, "USD", 1999, at(0))
MONTH = 30 * 24 * 60
CNY_MONTHLY = Expectation(PaymentKind.SUBSCRIPTION, 1000, "CNY", 1000, at(0))

STORIES = {
    "paid": Story(CNY_2500, (Note("PS"),), (Decimal("25.00"), Decimal("25.00"))),
    "pending-in-yen": Story(
        Expectation(PaymentKind.TRANSACTION, 2500, "JPY", None, at(0)), (), (Decimal(2500), None)
    ),
    "amount-mismatch": Story(
        CNY_2500, (Note("PS", amount=2400),), (Decimal("25.00"), Decimal("24.00"))
    ),
    "currency-mismatch": Story(
        CNY_2500, (Note("PS", currency="USD", amount=350),), (Decimal("25.00"), Decimal("3.50"))
    ),
    "duplicate": Story(
        CNY_2500,
        (Note("PS", tx="ll-1"), Note("PS", minutes=3, tx="ll-2")),
        (Decimal("25.00"), Decimal("50.00")),
    ),
    "subscription-periods": Story(
        SUB,
        tuple(
            Note("PS", n * MONTH, f"ll-p{n}", amount, "USD")
            for n, amount in enumerate([999, 1999, 1999])
        ),
        (Decimal("49.97"), Decimal("49.97")),
    ),
    "subscription-in-two-currencies": Story(
        SUB,
        (Note("PS", 0, "ll-p0", 999, "USD"), Note("PS", MONTH, "ll-eur", 1800, "EUR")),
        (Decimal("29.98"), Decimal("18.00")),
    ),
    "refunded-and-charged-back": Story(
        CNY_MONTHLY,
        (
            Note("PS", 0, "p1", 1000),
            Note("RS", 1, "p1", 1000),
            Note("PS", MONTH, "p2", 1000),
            Note("CB", MONTH + 1, "p2", 1000),
            Note("PS", 2 * MONTH, "p3", 1000),
        ),
        (Decimal("30.00"), Decimal("30.00")),
    ),
    "unknown-after-success": Story(
        CNY_2500, (Note("PS"), Note("ZZ", minutes=60)), (Decimal("25.00"), Decimal("25.00"))
    ),
    "unexpected": Story(None, (Note("PS", currency="USD", amount=100),), (None, Decimal("1.00"))),
    "refused-deliveries": Story(
        CNY_2500, (Note("PS"),), (Decimal("25.00"), Decimal("25.00")), refused=2
    ),
    "listed-refund": Story(
        CNY_2500,
        (Note("PS"),),
        (Decimal("25.00"), Decimal("25.00")),
        listed=(("ll-1", PaymentState.REFUNDED),),
    ),
}


@pytest.mark.parametrize("story", STORIES.values(), ids=STORIES)
def test_the_stored_row_is_what_reconcile_decided(ledger: Ledger, story: Story) -> None:
    register(ledger, "order-1", story.expectation)
    for n in range(story.refused):
        refused = ledger.receiver.record_delivery(dedupe_key=f"bad-{n}", body=b"{}", headers={})
        ledger.receiver.mark_delivery(
            refused.id, "invalid_payload", '{"message": "amount is missing"}',
            external_identifier="order-1",
        )  # fmt: skip
    for note in story.notes:
        record(ledger, as_outcome(note))
    if story.listed:
        run = ledger.service.begin_sync(max_age=timedelta(hours=1))
        items = [
            ListedTransaction(tx, "order-1", f"as-listed-{state}", state, "CNY", 2500)
            for tx, state in story.listed
        ]
        ledger.service.record_service_page(run.id, items, None)
        ledger.service.end_sync(run.id)
    problems = Problems()
    if story.refused:
        problems = Problems(story.refused, 0, "invalid_payload: amount is missing")
    decision = reconcile(
        Inputs(
            "order-1",
            story.expectation,
            arrived(*story.notes),
            [ListedFact(tx, state, "CNY", at(0)) for tx, state in story.listed],
            problems,
        )
    )
    assert decision is not None
    row = row_of(ledger)
    assert row == decision
    assert (row.expected_amount, row.received_amount) == story.amounts
    assert (ledger.row("nobody"), ledger.state("nobody")) == (None, None)


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


# -- filters, summary ----------------------------------------------------------------------


def period(n: int, amount_minor: int, code: str = "PS") -> Any:
    """Period ``n`` of the USD subscription ``sub-1``, ``n`` months after T0."""
    return outcome(
        code,
        external_identifier="sub-1",
        transaction_id=f"ll-p{n}",
        currency="USD",
        amount_minor=amount_minor,
        minutes=n * 30 * 24 * 60,
    )


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


# -- property: what is stored is what reconcile decided, in any arrival order ---------------


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


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from([*PaymentKind, None]),
    currency=st.sampled_from(CURRENCIES),
    notes=note_histories,
    order=st.randoms(use_true_random=False),
    register_first=st.booleans(),
)
def test_the_stored_row_is_what_reconcile_decided_whatever_the_arrival_order(
    kind: PaymentKind | None,
    currency: str,
    notes: list[Note],
    order: Any,
    register_first: bool,
) -> None:
    """Whatever order the notifications and the registration arrive in, the stored row is
    ``reconcile``'s decision on them (the rules themselves: tests/storage/test_rules.py)."""
    arrival = list(notes)
    order.shuffle(arrival)
    expectation = registered(kind, currency)
    decision = reconcile(Inputs("order-1", expectation, arrived(*arrival)))
    with closing(fresh_ledger_database()) as db, Ledger(db, clock=FixedClock()) as ledger:
        if register_first:
            register(ledger, "order-1", expectation)
        for note in arrival:
            record(ledger, as_outcome(note))
        if not register_first:
            register(ledger, "order-1", expectation)
        stored = ledger.row("order-1")
    assert stored == decision


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
