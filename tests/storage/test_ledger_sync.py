"""The ledger's records of the service's own view: creation failures, sync runs, and the drift
the reconciliation and the ``sync_drift`` view report from them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.storage import (
    MISMATCH_STATES,
    DriftKind,
    Ledger,
    ListedTransaction,
    PaymentKind,
    PaymentState,
    ReconciliationState,
)
from payhooks.storage.sync_rows import SyncStatus
from tests.support.engines import tables
from tests.support.factories import FixedClock, make_outcome, record

R = ReconciliationState
S = PaymentState
AGE = timedelta(hours=1)


def listed(state: PaymentState, *, tx: str = "ll-1", ref: str = "order-1") -> ListedTransaction:
    return ListedTransaction(tx, ref, f"as-listed-{state}", state, "CNY", 2500)


def sync(ledger: Ledger, *items: ListedTransaction, max_age: timedelta = AGE) -> None:
    """One complete sync that lists ``items`` on one page."""
    run = ledger.service.begin_sync(max_age=max_age)
    ledger.service.record_service_page(run.id, items, None)
    ledger.service.end_sync(run.id)


D = DriftKind


@pytest.mark.parametrize(
    ("notified", "service", "expected", "drift"),
    [
        (None, S.PENDING, R.PENDING, None),  # under way at both ends
        (None, S.SUCCEEDED, R.PENDING, D.MISSED_NOTIFICATION),
        (None, S.FAILED, R.PENDING, D.MISSED_NOTIFICATION),
        (S.SUCCEEDED, S.SUCCEEDED, R.PAID, None),
        (S.SUCCEEDED, S.REFUNDED, R.PAID, D.MISSED_NOTIFICATION),  # the refund's notification
        (S.SUCCEEDED, S.PENDING, R.PAID, D.STATUS_DIFFERS),
        (S.FAILED, S.CANCELLED, R.FAILED, D.STATUS_DIFFERS),
        (S.FAILED, S.FAILED, R.FAILED, None),
        (None, S.UNKNOWN, R.PENDING, D.UNKNOWN_STATUS),
        (S.SUCCEEDED, S.UNKNOWN, R.PAID, D.UNKNOWN_STATUS),
    ],
)
@pytest.mark.parametrize("listed_first", [False, True], ids=["notified-first", "listed-first"])
def test_the_listed_state_raises_a_drift_flag_and_never_moves_the_money_state(
    ledger: Ledger,
    notified: PaymentState | None,
    service: PaymentState,
    expected: ReconciliationState,
    drift: DriftKind | None,
    listed_first: bool,
) -> None:
    """Whichever comes first: the state is the notifications' alone, and the list's word is
    the row's drift (and a row of ``sync_drift``)."""
    ledger.expect_transaction("order-1", 2500, "CNY")
    if listed_first:
        sync(ledger, listed(service))
    if notified is not None:
        record(ledger, make_outcome(state=notified))
    if not listed_first:
        sync(ledger, listed(service))
    row = ledger.row("order-1")
    assert row is not None
    assert (row.state, row.drift) == (expected, drift)
    assert [row.kind for row in ledger.service.sync_drift()] == ([] if drift is None else [drift])


def test_a_notification_that_arrives_later_resolves_the_drift(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    sync(ledger, listed(S.SUCCEEDED))
    assert [(d.kind, d.service_state, d.ledger_state) for d in ledger.service.sync_drift()] == [
        (DriftKind.MISSED_NOTIFICATION, S.SUCCEEDED, None)
    ]
    record(ledger, make_outcome())
    assert ledger.state("order-1") is R.PAID
    assert list(ledger.service.sync_drift()) == []
    row = ledger.row("order-1")
    assert row is not None
    assert row.drift is None


def test_a_money_problem_and_drift_are_both_shown(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, make_outcome(amount_minor=100))
    sync(ledger, listed(S.REFUNDED))
    row = ledger.row("order-1")
    assert row is not None
    assert (row.state, row.drift) == (R.AMOUNT_MISMATCH, D.MISSED_NOTIFICATION)


def test_a_transaction_only_the_list_names_is_unexpected_with_no_money_received(
    ledger: Ledger,
) -> None:
    sync(ledger, listed(S.SUCCEEDED, ref="nobody-1"))
    row = ledger.row("nobody-1")
    assert row is not None
    assert (row.state, row.kind, row.currency, row.received_amount_minor) == (
        R.UNEXPECTED,
        None,
        "CNY",
        None,
    )
    assert [d.kind for d in ledger.service.sync_drift()] == [DriftKind.UNEXPECTED]
    assert {(s.state, s.count) for s in ledger.summary()} == {(R.UNEXPECTED, 1)}


def test_an_identifier_only_the_list_names_shows_its_first_sighting_and_known_currency(
    ledger: Ledger, clock: FixedClock
) -> None:
    first_seen = clock()
    sync(
        ledger,
        ListedTransaction("ll-1", "nobody-1", "listed", S.SUCCEEDED, None, None),
        ListedTransaction("ll-9", "nobody-2", "listed", S.SUCCEEDED, None, None),
    )
    clock.advance(60)
    sync(ledger, ListedTransaction("ll-2", "nobody-1", "listed", S.PENDING, "EUR", 100))
    rows = {row.external_identifier: row for row in ledger.reconcile()}
    assert (rows["nobody-1"].state, rows["nobody-1"].currency) == (R.UNEXPECTED, "EUR")
    assert rows["nobody-1"].opened_at == first_seen
    assert (rows["nobody-2"].state, rows["nobody-2"].currency) == (R.UNEXPECTED, "XXX")
    # Once a payment names it, it is the payment's one row.
    ledger.expect_transaction("nobody-1", 100, "EUR")
    named = [row for row in ledger.reconcile() if row.external_identifier == "nobody-1"]
    assert [(row.kind, row.state, row.drift) for row in named] == [
        (PaymentKind.TRANSACTION, R.PENDING, D.MISSED_NOTIFICATION)
    ]


def test_an_old_payment_missing_from_a_complete_list_is_missing_at_service(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("old-1", 2500, "CNY")
    clock.advance(30 * 60)
    ledger.expect_transaction("young-1", 2500, "CNY")
    clock.advance(45 * 60)  # old-1 is 75 minutes old, young-1 45
    sync(ledger)
    old, young = ledger.row("old-1"), ledger.row("young-1")
    assert old is not None
    assert young is not None
    assert (old.state, old.drift) == (R.PENDING, D.MISSING_AT_SERVICE)
    assert (young.state, young.drift) == (R.PENDING, None)
    assert [(d.kind, d.external_identifier) for d in ledger.service.sync_drift()] == [
        (DriftKind.MISSING_AT_SERVICE, "old-1")
    ]


def test_an_interrupted_sync_says_nothing_is_missing(ledger: Ledger, clock: FixedClock) -> None:
    ledger.expect_transaction("old-1", 2500, "CNY")
    clock.advance(2 * 3600)
    run = ledger.service.begin_sync(max_age=AGE)
    ledger.service.record_service_page(run.id, [], "cursor-2")
    ledger.service.end_sync(run.id, error="the service went away")
    assert ledger.state("old-1") is R.PENDING


@pytest.mark.parametrize(("certain", "expected"), [(True, R.NOT_CREATED), (False, R.PENDING)])
def test_a_failed_creation_is_not_created_only_when_certain(
    ledger: Ledger, certain: bool, expected: ReconciliationState
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    assert ledger.service.mark_creation_failed(
        "order-1", reason="400 invalid_request", certain=certain
    )
    assert ledger.state("order-1") is expected
    failure = ledger.service.creation_failure("order-1")
    assert failure is not None
    assert (failure.certain, failure.reason) == (certain, "400 invalid_request")
    assert R.NOT_CREATED not in MISMATCH_STATES


def test_an_outcome_or_a_listing_overrides_a_refused_creation(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    ledger.expect_transaction("order-2", 2500, "CNY")
    for ref in ("order-1", "order-2"):
        ledger.service.mark_creation_failed(ref, reason="refused", certain=True)
    record(ledger, make_outcome())
    sync(ledger, listed(S.PENDING, tx="ll-2", ref="order-2"))
    assert (ledger.state("order-1"), ledger.state("order-2")) == (R.PAID, R.PENDING)


def test_marking_an_unknown_payment_says_so_and_success_clears_the_mark(ledger: Ledger) -> None:
    assert not ledger.service.mark_creation_failed("nobody", reason="x", certain=True)
    ledger.expect_transaction("order-1", 2500, "CNY")
    ledger.service.mark_creation_failed("order-1", reason="x", certain=True)
    assert ledger.service.mark_creation_succeeded("order-1")
    assert ledger.service.creation_failure("order-1") is None
    assert ledger.state("order-1") is R.PENDING


def test_an_unfinished_run_is_resumed_from_its_cursor_unless_told_not_to(ledger: Ledger) -> None:
    first = ledger.service.begin_sync(max_age=AGE)
    ledger.service.record_service_page(first.id, [listed(S.PENDING)], "opaque/cursor+2==")
    ledger.service.end_sync(first.id, error="timeout")
    resumed = ledger.service.begin_sync(max_age=AGE)
    assert (resumed.id, resumed.next_cursor, resumed.status) == (
        first.id,
        "opaque/cursor+2==",
        SyncStatus.RUNNING,
    )
    fresh = ledger.service.begin_sync(max_age=AGE, resume=False)
    assert (fresh.id, fresh.next_cursor, fresh.pages) == (first.id + 1, None, 0)
    last = ledger.service.last_sync()
    assert last is not None
    assert last.id == fresh.id


# One database per test on either engine: each example starts from empty tables.
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pages=st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["ll-1", "ll-2", "ll-3"]),
                st.sampled_from(list(PaymentState)),
            ),
            max_size=3,
        ),
        max_size=4,
    )
)
def test_repeating_pages_keeps_one_row_per_transaction_with_its_latest_listing(
    ledger: Ledger, pages: list[list[tuple[str, PaymentState]]]
) -> None:
    tables(ledger).execute("DELETE FROM service_transactions")
    tables(ledger).execute("DELETE FROM sync_runs")
    run = ledger.service.begin_sync(max_age=AGE)
    for page in pages + pages:  # every page twice: a resumed sync reads one again
        ledger.service.record_service_page(run.id, [listed(s, tx=tx) for tx, s in page], None)
    stored = dict(
        tables(ledger).execute("SELECT transaction_id, state FROM service_transactions").rows
    )
    latest: dict[str, str] = {}
    for page in pages:
        for tx, state in page:
            latest[tx] = state.value
    assert stored == latest


def test_an_unstorable_item_is_drift_and_a_bad_age_is_refused(ledger: Ledger) -> None:
    run = ledger.service.begin_sync(max_age=AGE)
    stored = ledger.service.record_service_page(
        run.id, [ListedTransaction("ll-1", "", "x", S.PENDING)], None
    )
    assert stored == 1  # the page's items, the unstorable one included
    drift = [(row.kind.value, row.transaction_id) for row in ledger.service.sync_drift()]
    assert drift == [("unstorable_item", "ll-1")]
    with pytest.raises(ValueError, match="max_age"):
        ledger.service.begin_sync(max_age=timedelta(seconds=-1))
