"""``read_ledger_figures``: what the metrics' ledger gauges show, read from the tables on each
engine: the unsent signals and the oldest, the newest accepted delivery, the last complete sync,
the drift by kind and the mismatches by state."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from payhooks.storage import (
    MISMATCH_STATES,
    DriftKind,
    Ledger,
    ListedTransaction,
    PaymentState,
    read_ledger_figures,
)
from tests.support.factories import T0, FixedClock, make_outcome, record


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def timed(database: Path | str, clock: FixedClock) -> Iterator[Ledger]:
    with Ledger(database, clock=clock) as opened:
        yield opened


def test_an_empty_ledger_has_nothing_owed_nothing_accepted_and_every_label_at_zero(
    timed: Ledger,
) -> None:
    figures = read_ledger_figures(timed)

    assert figures.owed_signals == 0
    assert figures.oldest_owed_at is None
    assert figures.last_accepted_at is None
    assert figures.last_sync_at is None
    assert dict(figures.drift) == {kind.value: 0 for kind in DriftKind}
    assert dict(figures.mismatches) == {state.value: 0 for state in MISMATCH_STATES}


def test_unsent_signals_are_counted_with_the_time_the_oldest_was_owed(
    timed: Ledger, clock: FixedClock
) -> None:
    timed.expect_transaction("order-1", 2500, "CNY")
    record(timed, make_outcome())
    clock.advance(60)
    timed.expect_transaction("order-2", 2500, "CNY")
    record(timed, make_outcome(transaction_id="ll-2", external_identifier="order-2"))

    figures = read_ledger_figures(timed)

    owed = timed.signals.owed()
    assert figures.owed_signals == len(owed) > 0
    assert figures.oldest_owed_at == T0


@pytest.mark.parametrize(
    ("outcome", "state"),
    [
        ({"amount_minor": 2400}, "amount_mismatch"),
        ({"currency": "USD"}, "currency_mismatch"),
        ({"external_identifier": "nobody-expected-this"}, "unexpected"),
    ],
)
def test_each_mismatch_is_counted_under_its_state(
    timed: Ledger, outcome: dict[str, object], state: str
) -> None:
    timed.expect_transaction("order-1", 2500, "CNY")
    record(timed, make_outcome(**outcome))

    mismatches = read_ledger_figures(timed).mismatches

    assert mismatches[state] == 1
    assert sum(mismatches.values()) == 1


def test_the_newest_accepted_delivery_is_the_last_recorded_not_a_refused_one(
    timed: Ledger, clock: FixedClock
) -> None:
    timed.expect_transaction("order-1", 2500, "CNY")
    record(timed, make_outcome())
    clock.advance(30)
    refused = timed.receiver.record_delivery(dedupe_key="bad", body=b"{", headers={})
    timed.receiver.mark_delivery(refused.id, "malformed_json", error="not JSON")

    assert read_ledger_figures(timed).last_accepted_at == T0


def test_a_complete_sync_gives_its_time_and_its_drift_by_kind(
    timed: Ledger, clock: FixedClock
) -> None:
    timed.expect_transaction("order-1", 2500, "CNY")
    run = timed.service.begin_sync(max_age=timedelta(days=1))
    listed = ListedTransaction("ll-9", "order-9", "succeeded", PaymentState.SUCCEEDED, "CNY", 100)
    timed.service.record_service_page(run.id, [listed], None)
    clock.advance(5)
    timed.service.end_sync(run.id)

    figures = read_ledger_figures(timed)

    assert figures.last_sync_at == T0 + timedelta(seconds=5)
    assert figures.drift["unexpected"] == 1
    assert sum(figures.drift.values()) == 1


def test_an_interrupted_sync_is_not_a_last_sync(timed: Ledger) -> None:
    run = timed.service.begin_sync(max_age=timedelta(days=1))
    timed.service.end_sync(run.id, error="the service went away")

    assert read_ledger_figures(timed).last_sync_at is None
