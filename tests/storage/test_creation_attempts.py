"""Creation attempts in the ledger (``Ledger.service``): begun, finished, listed, and the
payment's creation mark set by the same call that finishes one, on each engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from payhooks.storage import CreationState, Ledger, ReconciliationState
from tests.support.factories import T0, FixedClock

C = CreationState


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def ledger(database: Path | str, clock: FixedClock) -> Iterator[Ledger]:
    with Ledger(database, clock=clock) as opened:
        opened.expect_transaction("order-1", 2500, "CNY")
        yield opened


def test_an_attempt_is_begun_sending_and_finished_with_aware_times(
    ledger: Ledger, clock: FixedClock
) -> None:
    attempt_id = ledger.service.begin_creation("order-1", "transaction")
    assert attempt_id is not None
    (begun,) = ledger.service.creation_attempts("order-1")
    assert begun.state is C.SENDING
    assert begun.started_at == T0
    assert begun.finished_at is None
    clock.advance(2)
    assert ledger.service.finish_creation(attempt_id, C.CREATED, service_id="tx-1", http_status=200)
    (created,) = ledger.service.creation_attempts("order-1")
    assert (created.state, created.service_id, created.http_status) == (C.CREATED, "tx-1", 200)
    assert created.finished_at is not None
    assert created.finished_at.utcoffset() is not None
    assert (created.finished_at - created.started_at).total_seconds() == 2


def test_a_refused_attempt_makes_the_payment_not_created_in_the_same_call(
    ledger: Ledger,
) -> None:
    attempt_id = ledger.service.begin_creation("order-1", "transaction")
    assert attempt_id is not None
    ledger.service.finish_creation(
        attempt_id, "refused", http_status=400, error_code="invalid_request", error="bad card"
    )
    assert ledger.state("order-1") is ReconciliationState.NOT_CREATED
    failure = ledger.service.creation_failure("order-1")
    assert failure is not None
    assert failure.certain
    assert failure.reason == "invalid_request: bad card"


def test_an_uncertain_attempt_leaves_the_payment_pending_marked_uncertain(
    ledger: Ledger,
) -> None:
    attempt_id = ledger.service.begin_creation("order-1", "transaction")
    assert attempt_id is not None
    ledger.service.finish_creation(attempt_id, C.UNCERTAIN, error_code="transport_error")
    assert ledger.state("order-1") is ReconciliationState.PENDING
    failure = ledger.service.creation_failure("order-1")
    assert failure is not None
    assert not failure.certain
    assert failure.reason == "transport_error"


def test_an_uncertain_attempt_found_created_later_clears_the_mark_and_keeps_its_error(
    ledger: Ledger,
) -> None:
    attempt_id = ledger.service.begin_creation("order-1", "transaction")
    assert attempt_id is not None
    ledger.service.finish_creation(
        attempt_id, C.UNCERTAIN, http_status=503, error_code="unavailable", error="lost"
    )
    assert ledger.service.finish_creation(attempt_id, C.CREATED, service_id="tx-9")
    (attempt,) = ledger.service.creation_attempts("order-1")
    assert (attempt.state, attempt.service_id) == (C.CREATED, "tx-9")
    assert (attempt.http_status, attempt.error_code, attempt.error) == (503, "unavailable", "lost")
    assert ledger.service.creation_failure("order-1") is None


def test_a_created_attempt_is_never_changed_again(ledger: Ledger) -> None:
    attempt_id = ledger.service.begin_creation("order-1", "transaction")
    assert attempt_id is not None
    ledger.service.finish_creation(attempt_id, C.CREATED, service_id="tx-1")
    assert not ledger.service.finish_creation(attempt_id, C.UNCERTAIN, error_code="late")
    (attempt,) = ledger.service.creation_attempts("order-1")
    assert attempt.state is C.CREATED
    assert ledger.service.creation_failure("order-1") is None
    assert not ledger.service.finish_creation(attempt_id + 1, C.CREATED)  # no such attempt


def test_beginning_after_an_attempt_that_is_no_longer_the_newest_is_refused(
    ledger: Ledger,
) -> None:
    first = ledger.service.begin_creation("order-1", "transaction")
    assert first is not None
    assert ledger.service.begin_creation("order-1", "transaction") is None  # it saw none
    second = ledger.service.begin_creation("order-1", "transaction", after=first)
    assert second is not None
    # Two callers that both decided from the first attempt: only one begins.
    assert ledger.service.begin_creation("order-1", "transaction", after=first) is None
    assert [a.id for a in ledger.service.creation_attempts("order-1")] == [first, second]


def test_attempts_are_listed_per_payment_or_by_state(ledger: Ledger) -> None:
    ledger.expect_subscription("sub-1", 990, "CNY", 1990)
    one = ledger.service.begin_creation("order-1", "transaction")
    sub = ledger.service.begin_creation("sub-1", "subscription", "key-1")
    assert one is not None
    assert sub is not None
    ledger.service.finish_creation(one, C.UNCERTAIN, error_code="transport_error")
    (listed,) = ledger.service.creation_attempts("sub-1")
    assert (listed.kind, listed.idempotency_key) == ("subscription", "key-1")
    assert [a.external_identifier for a in ledger.service.creation_attempts()] == [
        "order-1",
        "sub-1",
    ]
    uncertain = ledger.service.creation_attempts(state="uncertain")
    assert [a.id for a in uncertain] == [one]
    assert ledger.service.creation_attempts("order-2") == []


def test_an_attempt_needs_an_expected_payment_and_a_known_kind(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="not expected"):
        ledger.service.begin_creation("order-2", "transaction")
    with pytest.raises(ValueError, match="kind"):
        ledger.service.begin_creation("order-1", "refund")
    attempt_id = ledger.service.begin_creation("order-1", "transaction")
    assert attempt_id is not None
    with pytest.raises(ValueError, match="sending"):
        ledger.service.finish_creation(attempt_id, C.SENDING)
