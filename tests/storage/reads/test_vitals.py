"""``Ledger.vitals``: the figures the console's health strip and ``payhooks check`` read, each
pinned on both engines with a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from payhooks.storage import (
    MISMATCH_STATES,
    DeliveryStatus,
    DriftKind,
    Ledger,
    ListedTransaction,
    PaymentState,
    ReconciliationState,
    StorageError,
    UnreadableRowError,
)
from payhooks.storage.reads.vitals import ErrorCause, WindowCounts
from payhooks.storage.sync_rows import SyncStatus
from tests.support.factories import T0, FixedClock, make_outcome, record
from tests.support.unreadable_rows import SPOILED_COLUMNS, SPOILED_VALUES, spoil

R = ReconciliationState


def failed_delivery(ledger: Ledger, key: str, status: DeliveryStatus) -> int:
    """A delivery stored now and marked failed with ``status``."""
    stored = ledger.receiver.record_delivery(dedupe_key=key, body=key.encode(), headers={})
    ledger.receiver.mark_delivery(stored.id, status, f"{status} here")
    return stored.id


def conflict(ledger: Ledger) -> None:
    """A delivery stored now that says the stored outcome's transaction was another order's."""
    recorded = record(ledger, make_outcome(external_identifier="stray-1"))
    assert recorded.delivery_status is DeliveryStatus.CONFLICTING_OUTCOME


def refused(ledger: Ledger, reason: str = "invalid_signature") -> None:
    ledger.receiver.record_rejected(reason=reason, body=b"{}", remote_addr="127.0.0.1")


def at(clock: FixedClock, moment: datetime) -> None:
    clock.now = moment


def test_an_empty_ledger_has_no_figures(ledger: Ledger) -> None:
    vitals = ledger.vitals()
    assert vitals.now == T0
    assert (vitals.last_delivery_at, vitals.last_accepted_at) == (None, None)
    assert vitals.last_finished_at is None
    assert vitals.last_hour == vitals.last_day == WindowCounts(0, 0, 0)
    assert vitals.last_hour.failure_percent is None
    assert (vitals.errors, vitals.unsent_signals, vitals.oldest_unsent_at) == ((), 0, None)
    assert (vitals.last_sync, vitals.last_complete_sync_at) == (None, None)
    assert (vitals.drift, vitals.drift_total) == ({}, 0)
    assert vitals.mismatches == dict.fromkeys(MISMATCH_STATES, 0)
    assert (vitals.mismatch_total, vitals.recent_mismatches) == (0, 0)
    assert (vitals.refused_by_code, vitals.refused_total, vitals.last_refused_at) == ({}, 0, None)


def test_every_figure_of_a_busy_day(ledger: Ledger, clock: FixedClock) -> None:
    """A day of traffic: an old payment, a morning's failures, the last hour's mix."""
    for ref in ("order-1", "order-2", "order-3"):
        ledger.expect_transaction(ref, 2500, "CNY")
    at(clock, T0 - timedelta(hours=30))  # outside both windows
    record(ledger, make_outcome(external_identifier="order-1", transaction_id="t1"))
    failed_delivery(ledger, "old-bad", DeliveryStatus.MALFORMED_JSON)
    refused(ledger, "invalid_signature")
    at(clock, T0 - timedelta(hours=5))  # in the day, not the hour
    record(ledger, make_outcome(external_identifier="order-2", transaction_id="t2"))
    failed_delivery(ledger, "bad-1", DeliveryStatus.MALFORMED_JSON)
    failed_delivery(ledger, "bad-2", DeliveryStatus.PROCESSING_ERROR)
    refused(ledger, "invalid_signature")
    refused(ledger, "expired_timestamp")
    at(clock, T0 - timedelta(minutes=30))  # in both
    failed_delivery(ledger, "bad-3", DeliveryStatus.INVALID_PAYLOAD)
    failed_delivery(ledger, "bad-4", DeliveryStatus.INVALID_PAYLOAD)
    refused(ledger, "invalid_signature")
    at(clock, T0 - timedelta(minutes=10))
    record(ledger, make_outcome(external_identifier="order-3", transaction_id="t3"))
    last = ledger.receiver.record_delivery(dedupe_key="pending", body=b"{}", headers={})
    at(clock, T0)

    vitals = ledger.vitals()

    assert vitals.last_delivery_at == T0 - timedelta(minutes=10)
    assert last.status is DeliveryStatus.RECEIVED  # neither accepted nor failed
    assert vitals.last_accepted_at == T0 - timedelta(minutes=10)
    assert vitals.last_hour == WindowCounts(deliveries=4, failures=2, refused=1)
    assert vitals.last_hour.failure_percent == Decimal("50.0")
    assert vitals.last_day == WindowCounts(deliveries=7, failures=4, refused=3)
    assert vitals.last_day.failure_percent == Decimal("57.1")
    assert vitals.errors == (
        ErrorCause("delivery", "invalid_payload", 2),
        ErrorCause("refused", "invalid_signature", 2),
        ErrorCause("delivery", "malformed_json", 1),
        ErrorCause("delivery", "processing_error", 1),
        ErrorCause("refused", "expired_timestamp", 1),
    )
    assert vitals.refused_by_code == {"invalid_signature": 3, "expired_timestamp": 1}
    assert (vitals.refused_total, vitals.last_refused_at) == (4, T0 - timedelta(minutes=30))


def test_the_refused_requests_in_all_are_those_the_ledger_keeps(
    database: Path | str, clock: FixedClock
) -> None:
    """Whatever their age, and no more than ``max_rejected``: the table's bound."""
    with Ledger(database, clock=clock, max_rejected=3) as ledger:
        for days in (40, 30, 20, 10, 2):
            at(clock, T0 - timedelta(days=days))
            refused(ledger, "expired_timestamp" if days == 40 else "invalid_signature")
        at(clock, T0)
        vitals = ledger.vitals()
    assert (vitals.last_hour.refused, vitals.last_day.refused) == (0, 0)
    assert vitals.refused_by_code == {"invalid_signature": 3}
    assert vitals.last_refused_at == T0 - timedelta(days=2)


def test_the_accepted_delivery_is_the_newest_processed_or_duplicate(
    ledger: Ledger, clock: FixedClock
) -> None:
    at(clock, T0 - timedelta(hours=3))
    record(ledger, make_outcome())
    at(clock, T0 - timedelta(hours=2))
    duplicate = record(ledger, make_outcome())  # another delivery of the same outcome
    at(clock, T0 - timedelta(hours=1))
    failed_delivery(ledger, "bad", DeliveryStatus.MALFORMED_JSON)
    at(clock, T0)
    assert duplicate.delivery_status is DeliveryStatus.DUPLICATE
    vitals = ledger.vitals()
    assert vitals.last_accepted_at == T0 - timedelta(hours=2)
    assert vitals.last_delivery_at == T0 - timedelta(hours=1)


HOURS_AGO = {n: T0 - timedelta(hours=n) for n in (1, 2, 3)}


@pytest.mark.parametrize(
    ("after", "finished", "accepted"),
    [
        pytest.param((), HOURS_AGO[3], HOURS_AGO[3], id="processed-last"),
        pytest.param(("duplicate",), HOURS_AGO[2], HOURS_AGO[2], id="duplicate-last"),
        pytest.param(("conflict",), HOURS_AGO[2], HOURS_AGO[3], id="conflict-last"),
        pytest.param(("conflict", "bad"), HOURS_AGO[2], HOURS_AGO[3], id="failure-after-conflict"),
        pytest.param(("duplicate", "conflict"), HOURS_AGO[1], HOURS_AGO[2], id="conflict-after"),
    ],
)
def test_the_finished_delivery_is_the_newest_answered_200_a_conflict_too(
    ledger: Ledger,
    clock: FixedClock,
    after: tuple[str, ...],
    finished: datetime,
    accepted: datetime,
) -> None:
    """A processed delivery three hours ago, then one delivery an hour of each kind named."""
    at(clock, HOURS_AGO[3])
    record(ledger, make_outcome())
    for hours, kind in zip((2, 1), after, strict=False):
        at(clock, HOURS_AGO[hours])
        if kind == "duplicate":
            assert record(ledger, make_outcome()).delivery_status is DeliveryStatus.DUPLICATE
        elif kind == "conflict":
            conflict(ledger)
        else:
            failed_delivery(ledger, f"bad-{hours}", DeliveryStatus.MALFORMED_JSON)
    at(clock, T0)

    vitals = ledger.vitals()

    assert (vitals.last_finished_at, vitals.last_accepted_at) == (finished, accepted)


@pytest.mark.parametrize("stored", [1, 2, 7, 32, 33])
@pytest.mark.parametrize("back_minutes", [0, 1, 5, 31, 60, 200])
def test_a_window_counts_exactly_the_deliveries_received_in_it(
    ledger: Ledger, stored: int, back_minutes: int
) -> None:
    """One delivery a minute up to ``T0``: the hour's first is the one received exactly at its
    start, whatever the count (one row, a few, more than the hour holds)."""
    for n in range(stored):
        ledger.receiver.record_delivery(
            dedupe_key=f"k{n}",
            body=b"{}",
            headers={},
            received_at=T0 - timedelta(minutes=stored - 1 - n),
        )
    now = T0 + timedelta(minutes=60 - back_minutes)  # the hour starts back_minutes before T0
    expected = min(stored, back_minutes + 1)
    assert ledger.vitals(now).last_hour.deliveries == expected


def minutely(ledger: Ledger, stored: int) -> None:
    """One delivery a minute, the last at ``T0``."""
    for n in range(stored):
        ledger.receiver.record_delivery(
            dedupe_key=f"k{n}",
            body=b"{}",
            headers={},
            received_at=T0 - timedelta(minutes=stored - 1 - n),
        )


@pytest.mark.sqlite_only  # gaps made by deleting rows behind the ledger's back
@pytest.mark.parametrize("back_minutes", [0, 1, 2, 3, 30, 59, 60])
def test_a_window_counts_exactly_across_gaps_in_the_ids(ledger: Ledger, back_minutes: int) -> None:
    minutely(ledger, 120)  # ids 1..120, the minute of id n is T0 - (120 - n) minutes
    ledger.database.conn.execute("DELETE FROM deliveries WHERE id % 3 <> 0")
    ledger.database.conn.commit()
    now = T0 + timedelta(minutes=60 - back_minutes)
    since_id = 120 - back_minutes
    expected = sum(1 for n in range(since_id, 121) if n % 3 == 0)
    assert ledger.vitals(now).last_hour.deliveries == expected


def test_signals_owed_and_unsent_are_counted_with_the_oldest(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    ledger.expect_transaction("order-2", 2500, "CNY")
    at(clock, T0 - timedelta(hours=2))
    first = record(ledger, make_outcome(external_identifier="order-1", transaction_id="t1"))
    at(clock, T0 - timedelta(minutes=20))
    record(ledger, make_outcome(external_identifier="order-2", transaction_id="t2"))
    at(clock, T0)
    owed = ledger.signals.owed()
    assert len(owed) == 4  # notification-received and payment-succeeded, each
    assert ledger.vitals().unsent_signals == 4
    assert ledger.vitals().oldest_unsent_at == T0 - timedelta(hours=2)

    ledger.signals.mark_sent(ledger.signals.claim([first.outcome_id], lease=timedelta(seconds=30)))

    vitals = ledger.vitals()
    assert (vitals.unsent_signals, vitals.oldest_unsent_at) == (2, T0 - timedelta(minutes=20))


def test_the_last_sync_and_its_drift_by_kind(ledger: Ledger, clock: FixedClock) -> None:
    """A sync stored through the ledger's own API: two missed notifications and a payment
    nobody expected."""
    ledger.expect_transaction("order-1", 2500, "CNY")
    ledger.expect_transaction("order-2", 2500, "CNY")
    at(clock, T0 - timedelta(minutes=15))
    run = ledger.service.begin_sync(max_age=timedelta(days=30))
    items = [
        ListedTransaction("t1", "order-1", "PAID", PaymentState.SUCCEEDED, "CNY", 2500),
        ListedTransaction("t2", "order-2", "PAID", PaymentState.SUCCEEDED, "CNY", 2500),
        ListedTransaction("t9", "order-9", "PAID", PaymentState.SUCCEEDED, "CNY", 100),
    ]
    ledger.service.record_service_page(run.id, items, None)
    at(clock, T0 - timedelta(minutes=14))
    ledger.service.end_sync(run.id)
    at(clock, T0)

    vitals = ledger.vitals()

    assert vitals.last_sync is not None
    assert vitals.last_sync.id == run.id
    assert vitals.last_sync.status is SyncStatus.COMPLETE
    assert vitals.last_sync.started_at == T0 - timedelta(minutes=15)
    assert vitals.last_sync.finished_at == T0 - timedelta(minutes=14)
    assert vitals.last_complete_sync_at == T0 - timedelta(minutes=14)
    assert vitals.drift == {DriftKind.MISSED_NOTIFICATION: 2, DriftKind.UNEXPECTED: 1}
    assert vitals.drift_total == 3

    at(clock, T0 + timedelta(minutes=1))
    again = ledger.service.begin_sync(max_age=timedelta(days=30))
    still = ledger.vitals()
    assert still.last_sync is not None
    assert (still.last_sync.id, still.last_sync.status) == (again.id, SyncStatus.RUNNING)
    assert still.last_complete_sync_at == T0 - timedelta(minutes=14)


def test_an_interrupted_sync_is_the_last_sync_but_not_a_complete_one(ledger: Ledger) -> None:
    run = ledger.service.begin_sync(max_age=timedelta(days=1))
    ledger.service.end_sync(run.id, error="the service went away")

    vitals = ledger.vitals()

    assert vitals.last_sync is not None
    assert (vitals.last_sync.id, vitals.last_complete_sync_at) == (run.id, None)
    assert vitals.last_sync.status is not SyncStatus.COMPLETE


@pytest.mark.parametrize(
    ("outcome", "state"),
    [
        ({"amount_minor": 2400}, R.AMOUNT_MISMATCH),
        ({"currency": "USD"}, R.CURRENCY_MISMATCH),
        ({"external_identifier": "nobody-expected-this"}, R.UNEXPECTED),
    ],
)
def test_each_mismatch_is_counted_under_its_state_alone(
    ledger: Ledger, outcome: dict[str, object], state: ReconciliationState
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, make_outcome(**outcome))

    vitals = ledger.vitals()

    assert vitals.mismatches == {**dict.fromkeys(MISMATCH_STATES, 0), state: 1}


def test_mismatches_by_state_and_those_changed_within_the_window(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("short", 2500, "CNY")
    at(clock, T0 - timedelta(days=3))
    record(ledger, make_outcome(external_identifier="nobody-1", transaction_id="t1"))
    at(clock, T0 - timedelta(hours=2))
    record(ledger, make_outcome(external_identifier="nobody-2", transaction_id="t2"))
    record(
        ledger,
        make_outcome(
            external_identifier="short",
            transaction_id="t3",
            amount=Decimal("10.00"),
            amount_minor=1000,
        ),
    )
    at(clock, T0)

    vitals = ledger.vitals()
    assert vitals.mismatches == {
        **dict.fromkeys(MISMATCH_STATES, 0),
        R.UNEXPECTED: 2,
        R.AMOUNT_MISMATCH: 1,
    }
    assert (vitals.mismatch_total, vitals.recent_mismatches) == (3, 2)  # a day, by default
    within_days = ledger.vitals(mismatch_window=timedelta(days=4))
    assert (within_days.recent_mismatches, within_days.mismatch_window) == (3, timedelta(days=4))
    assert ledger.vitals(mismatch_window=timedelta(hours=1)).recent_mismatches == 0


@pytest.mark.parametrize(
    ("now", "window", "message"),
    [
        (datetime(2026, 11, 21, 12, 0), timedelta(hours=1), "now must be timezone-aware"),
        (datetime(2026, 11, 21, 12, 0, tzinfo=UTC), timedelta(0), "must be positive"),
    ],
)
def test_a_naive_now_or_an_empty_window_is_refused(
    ledger: Ledger, now: datetime, window: timedelta, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ledger.vitals(now, mismatch_window=window)


@pytest.mark.parametrize("value", SPOILED_VALUES)
@pytest.mark.parametrize("column", SPOILED_COLUMNS)
def test_a_stored_time_payhooks_never_writes_is_an_unreadable_row_error_naming_its_column(
    ledger: Ledger, column: str, value: str
) -> None:
    spoil(ledger, column, value)

    with pytest.raises(UnreadableRowError) as exc_info:
        ledger.vitals()

    assert (exc_info.value.code, exc_info.value.column) == ("unreadable_row", column)
    assert isinstance(exc_info.value, StorageError)
    assert column in exc_info.value.message
    assert value not in exc_info.value.message  # the stored data stays out of the sentence
