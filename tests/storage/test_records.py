"""The outcome record and the lifecycle it moves along."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest

from payhooks.storage import DEFAULT_STATUS_MAP, PaymentState
from payhooks.storage.records import STATE_RANK
from tests.support.factories import make_outcome


def test_outcome_refuses_a_naive_paid_at() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        make_outcome(paid_at=datetime(2026, 11, 21, 12, 0))


def test_outcome_refuses_a_float_amount() -> None:
    with pytest.raises(TypeError, match="Decimal"):
        make_outcome(amount=25.0)


def test_outcome_is_frozen() -> None:
    outcome = make_outcome()
    with pytest.raises(AttributeError):
        outcome.amount = Decimal("1.00")  # type: ignore[misc]


def test_every_mapped_code_has_a_rank() -> None:
    assert set(DEFAULT_STATUS_MAP.values()) | {PaymentState.UNKNOWN} == set(STATE_RANK)


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        (PaymentState.PENDING, PaymentState.SUCCEEDED),
        (PaymentState.SUCCEEDED, PaymentState.REFUND_PENDING),
        (PaymentState.REFUND_PENDING, PaymentState.PARTIALLY_REFUNDED),
        (PaymentState.PARTIALLY_REFUNDED, PaymentState.REFUNDED),
        (PaymentState.SUCCEEDED, PaymentState.CHARGED_BACK),
        (PaymentState.REFUNDED, PaymentState.CHARGED_BACK),
    ],
)
def test_lifecycle_only_moves_forward(earlier: PaymentState, later: PaymentState) -> None:
    assert STATE_RANK[earlier] < STATE_RANK[later]


def test_the_states_that_need_a_person_are_the_mismatches_and_nothing_ordinary() -> None:
    from payhooks.storage import MISMATCH_STATES, ReconciliationState

    assert {str(state) for state in MISMATCH_STATES} == {
        "amount_mismatch",
        "currency_mismatch",
        "duplicate_payment",
        "unexpected",
        "unknown_status",
    }
    assert isinstance(MISMATCH_STATES, frozenset)
    assert all(isinstance(state, ReconciliationState) for state in MISMATCH_STATES)
