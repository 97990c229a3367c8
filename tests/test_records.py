from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from storage import DEFAULT_STATUS_MAP, STATE_RANK, Flow, Outcome, PaymentState


def make_outcome(**overrides: object) -> Outcome:
    fields: dict[str, object] = {
        "transaction_id": "ll-1",
        "external_identifier": "order-1",
        "flow": Flow.WALLET,
        "provider": None,
        "provider_reference": None,
        "provider_status": None,
        "payment_status": "PS",
        "state": PaymentState.SUCCEEDED,
        "amount": Decimal("25.00"),
        "currency": "CNY",
        "amount_minor": 2500,
        "paid_at": datetime(2026, 11, 21, 12, 0, tzinfo=UTC),
    }
    fields.update(overrides)
    return Outcome(**fields)  # type: ignore[arg-type]


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
