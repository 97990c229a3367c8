"""The exceptions queue's reads: the counts grouped in SQL equal the grouping of every
mismatched row in Python, and the rows listed are the oldest opened, read alone; the drift
counted by kind and listed with a limit; on each engine."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from payhooks.storage import (
    MISMATCH_STATES,
    Ledger,
    ListedTransaction,
    Outcome,
    PaymentState,
    ReconciliationRow,
    ReconciliationState,
)
from payhooks.storage.reads.exception_queue import MismatchCount
from tests.support.factories import FixedClock, make_outcome, record

#: Where the age buckets start (the console's): under a day, a week, a month, beyond.
AGES = [timedelta(0), timedelta(days=1), timedelta(days=7), timedelta(days=30)]


def _age(opened_at: datetime, now: datetime) -> int:
    """The bucket the console's Python put a payment in: the last whose start its age reaches."""
    bucket = 0
    for index, start in enumerate(AGES):
        if now - opened_at >= start:
            bucket = index
    return bucket


def _grouped_in_python(rows: list[ReconciliationRow], now: datetime) -> list[MismatchCount]:
    counts: Counter[tuple[str, int, str]] = Counter()
    money: dict[tuple[str, int, str], int | None] = {}
    for row in rows:
        key = (row.state.value, _age(row.opened_at, now), row.received_currency or row.currency)
        counts[key] += 1
        if row.received_amount_minor is not None:
            money[key] = (money.get(key) or 0) + row.received_amount_minor
        else:
            money.setdefault(key, None)
    return [
        MismatchCount(ReconciliationState(state), age, currency, counts[key], total)
        for key, total in sorted(money.items())
        for state, age, currency in [key]
    ]


def outcome(identifier: str, transaction_id: str, **fields: object) -> Outcome:
    return make_outcome(external_identifier=identifier, transaction_id=transaction_id, **fields)


@pytest.fixture
def queue(ledger: Ledger, clock: FixedClock) -> datetime:
    """Mismatches of every kind, opened over six weeks; payments that are fine beside them.
    Now, as the queue is read, back."""
    start = clock.now
    for number, days_ago in enumerate([0, 0.5, 1, 3, 7, 8, 20, 30, 40]):
        clock.now = start - timedelta(days=days_ago)
        short, euro, fine = f"short-{number}", f"euro-{number}", f"fine-{number}"
        for identifier in (short, euro, fine):
            ledger.expect_transaction(identifier, 2500, "CNY")
        record(ledger, outcome(short, f"s-{number}", amount=Decimal("20.00"), amount_minor=2000))
        record(ledger, outcome(euro, f"e-{number}", currency="EUR"))
        record(ledger, outcome(f"stranger-{number}", f"x-{number}", amount_minor=100 + number))
        record(ledger, outcome(fine, f"f-{number}"))
        ledger.expect_transaction(f"waiting-{number}", 900, "USD")
    clock.now = start
    return start


def test_the_counts_grouped_in_sql_equal_the_grouping_of_every_row(
    ledger: Ledger, queue: datetime
) -> None:
    rows = list(ledger.reconcile(state=MISMATCH_STATES))
    assert len({row.state for row in rows}) >= 3  # the fixture made several kinds

    counted = ledger.console.mismatch_counts(queue, AGES)

    assert counted == _grouped_in_python(rows, queue)
    assert sum(found.payments for found in counted) == len(rows) == 27
    assert {found.age for found in counted} == {0, 1, 2, 3}


def test_a_payment_exactly_a_bucket_old_is_in_that_bucket(ledger: Ledger, queue: datetime) -> None:
    # "euro-2" was opened exactly one day before now: 1 to 7 days, as the Python said.
    rows = list(ledger.reconcile(state=MISMATCH_STATES))
    one_day = [row for row in rows if queue - row.opened_at == timedelta(days=1)]
    assert one_day
    assert all(_age(row.opened_at, queue) == 1 for row in one_day)

    counted = ledger.console.mismatch_counts(queue, AGES)

    assert counted == _grouped_in_python(rows, queue)


@pytest.mark.parametrize("limit", [1, 5, 26, 27, 500])
def test_the_rows_listed_are_the_oldest_opened_and_no_more(
    ledger: Ledger, queue: datetime, limit: int
) -> None:
    everything = list(ledger.reconcile(state=MISMATCH_STATES))
    oldest = sorted(everything, key=lambda row: row.opened_at)[:limit]

    assert ledger.console.mismatches(limit) == oldest


def test_an_empty_ledger_has_no_counts_and_no_rows(ledger: Ledger, clock: FixedClock) -> None:
    assert ledger.console.mismatch_counts(clock.now, AGES) == []
    assert ledger.console.mismatches(500) == []


@pytest.mark.parametrize("limit", [0, 10_001, True])
def test_a_listing_limit_out_of_range_is_refused(ledger: Ledger, limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        ledger.console.mismatches(limit)


def test_the_drift_is_counted_by_kind_and_listed_up_to_its_limit(ledger: Ledger) -> None:
    items = []
    for number in range(6):
        ledger.expect_transaction(f"order-{number}", 2500, "CNY")
        state = PaymentState.SUCCEEDED if number % 2 else PaymentState.UNKNOWN
        items.append(ListedTransaction(f"ll-{number}", f"order-{number}", "x", state, "CNY", 2500))
    run = ledger.service.begin_sync(max_age=timedelta(hours=1))
    ledger.service.record_service_page(run.id, items, None)
    ledger.service.end_sync(run.id)
    every = list(ledger.service.sync_drift())

    assert ledger.service.drift_counts() == Counter(row.kind for row in every)
    assert list(ledger.service.sync_drift(limit=4)) == every[:4]
