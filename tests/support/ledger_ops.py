"""Random ledger writes for property tests: strategies that draw operations, and the code that
applies them, shared by the rollup tests (SQLite, with SQL-tool writes besides) and the
comparison of the two engines.

An outcome operation is ``("outcome", identifier, transaction, code, amount_minor, currency,
minute)``; an expectation ``("expect", identifier, is_subscription, currency)``; a listing
``("listed", identifier, transaction_identifier, transaction, state)``: one item of the
service's list as ``payhooks sync`` records it, the transaction named as the outcomes name
theirs (``<transaction_identifier>-<transaction>``), so a listing can agree with the outcomes,
drift from them, or move a transaction to another identifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

from payhooks.storage import Ledger, ListedTransaction, PaymentState
from tests.support.factories import T0, make_outcome, record

__all__ = [
    "CODES",
    "apply_expectation",
    "apply_listing",
    "apply_outcome",
    "expectations",
    "listings",
    "outcomes",
]

#: Status codes and the states the operations record them as.
CODES = {
    "WP": PaymentState.PENDING,
    "PS": PaymentState.SUCCEEDED,
    "PF": PaymentState.FAILED,
    "PC": PaymentState.CANCELLED,
    "RS": PaymentState.REFUNDED,
    "CB": PaymentState.CHARGED_BACK,
    "ZZ": PaymentState.UNKNOWN,
}

Op = tuple[Any, ...]


def outcomes(
    identifiers: Sequence[str],
    codes: Sequence[str],
    amounts: Sequence[int],
    currencies: Sequence[str],
) -> st.SearchStrategy[Op]:
    """Outcome operations over these identifiers, codes, amounts and currencies, each in one
    of three transactions per identifier and at one of four minutes."""
    return st.tuples(
        st.just("outcome"),
        st.sampled_from(identifiers),
        st.sampled_from(["t1", "t2", "t3"]),
        st.sampled_from(codes),
        st.sampled_from(amounts),
        st.sampled_from(currencies),
        st.integers(0, 3),
    )


def expectations(identifiers: Sequence[str], currencies: Sequence[str]) -> st.SearchStrategy[Op]:
    """Expectation operations: a transaction or a subscription in one of ``currencies``."""
    return st.tuples(
        st.just("expect"), st.sampled_from(identifiers), st.booleans(), st.sampled_from(currencies)
    )


def apply_outcome(ledger: Ledger, op: Op, *, dedupe_key: str | None = None) -> None:
    """Store a delivery for the outcome ``op`` describes and record it."""
    _, identifier, transaction, code, amount, currency, minute = op
    outcome = make_outcome(
        external_identifier=identifier,
        transaction_id=f"{identifier}-{transaction}",
        payment_status=code,
        state=CODES[code],
        amount_minor=amount,
        currency=currency,
        paid_at=T0 + timedelta(minutes=minute),
    )
    record(ledger, outcome, dedupe_key=dedupe_key)


def apply_expectation(ledger: Ledger, op: Op) -> None:
    """Register the payment ``op`` expects: 19.99, or a 9.99 plan of 19.99 a period."""
    _, identifier, subscription, currency = op
    if subscription:
        ledger.expect_subscription(identifier, 999, currency, 1999)
    else:
        ledger.expect_transaction(identifier, 1999, currency)


def listings(identifiers: Sequence[str]) -> st.SearchStrategy[Op]:
    """Listing operations: a transaction (one the outcomes may name, or a fourth they never
    do) listed under one of ``identifiers`` in any state, ``unknown`` included."""
    return st.tuples(
        st.just("listed"),
        st.sampled_from(identifiers),
        st.sampled_from(identifiers),
        st.sampled_from(["t1", "t2", "t3", "t4"]),
        st.sampled_from(sorted(PaymentState)),
    )


def apply_listing(ledger: Ledger, op: Op) -> None:
    """Record the item ``op`` describes as one page of a complete sync."""
    _, identifier, transaction_identifier, transaction, state = op
    run = ledger.service.begin_sync(max_age=timedelta(days=1))
    item = ListedTransaction(
        transaction_id=f"{transaction_identifier}-{transaction}",
        external_identifier=identifier,
        status=f"listed-{state}",
        state=state,
    )
    ledger.service.record_service_page(run.id, [item], next_cursor=None)
    ledger.service.end_sync(run.id)
