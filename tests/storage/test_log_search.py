"""The delivery log's error-code and free-text filters, on each engine."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import pytest

from payhooks.storage import DeliveryErrorCode, DeliveryFilter, Ledger
from payhooks.storage.log_search import prefix_bounds
from tests.support.factories import T0, make_outcome, raise_in_round


def _recorded(ledger: Ledger, n: int, key: str, identifier: str, status: str = "PS") -> int:
    delivery = ledger.receiver.record_delivery(
        dedupe_key=key,
        body=f'{{"n": {n}}}'.encode(),
        headers={"webhook-id": key},
        received_at=T0 + timedelta(minutes=n),
    )
    outcome = make_outcome(
        transaction_id=f"ll-{n}", external_identifier=identifier, payment_status=status
    )
    ledger.receiver.record_outcome(outcome, delivery_id=delivery.id)
    return delivery.id


def _refused(ledger: Ledger, n: int, status: str, identifier: str | None = None) -> int:
    delivery = ledger.receiver.record_delivery(
        dedupe_key=f"bad_{n}", body=b"{not json", headers={}, received_at=T0 + timedelta(minutes=n)
    )
    ledger.receiver.mark_delivery(delivery.id, status, "it failed", external_identifier=identifier)
    return delivery.id


@pytest.fixture
def stored(ledger: Ledger) -> dict[str, int]:
    """Processed deliveries with two status codes and identifiers sharing prefixes, a delivery
    key reused with other bytes, the error statuses, and one whose signal receiver failed."""
    found = {
        "a": _recorded(ledger, 1, "msg_1", "order-1"),
        "b": _recorded(ledger, 2, "msg_10", "order-10", status="PF"),
        "c": _recorded(ledger, 3, "msg_1#" + "f" * 64, "order-2"),
        "d": _recorded(ledger, 4, "msg_2", "shop-order-1"),
        "bad": _refused(ledger, 5, "malformed_json"),
        "odd": _refused(ledger, 6, "invalid_payload", "order-9"),
        "broken": _refused(ledger, 7, "processing_error"),
    }
    claimed = ledger.signals.claim(
        [ledger.receiver.delivery_details(found["d"]).outcome_id],  # type: ignore[union-attr, list-item]
        lease=timedelta(minutes=1),
    )
    raise_in_round(ledger, claimed, {claimed[0].signal: "RuntimeError: boom"})
    return found


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        (DeliveryFilter(payment_status="PS"), ["d", "c", "a"]),
        (DeliveryFilter(payment_status="PF"), ["b"]),
        (DeliveryFilter(payment_status="XX"), []),
        (DeliveryFilter(error="malformed_json"), ["bad"]),
        (DeliveryFilter(error=DeliveryErrorCode.INVALID_PAYLOAD), ["odd"]),
        (DeliveryFilter(error="processing_error"), ["broken"]),
        (DeliveryFilter(error="conflicting_outcome"), []),
        (DeliveryFilter(error="signal_error"), ["d"]),
        (DeliveryFilter(text="order-1"), ["b", "a"]),
        (DeliveryFilter(text="order-"), ["odd", "c", "b", "a"]),
        (DeliveryFilter(text="msg_1"), ["c", "a"]),
        (DeliveryFilter(text="msg_2"), ["d"]),
        (DeliveryFilter(text="shop"), ["d"]),
        (DeliveryFilter(text="rder"), []),
        (DeliveryFilter(text="order-1", payment_status="PS"), ["a"]),
        (DeliveryFilter(["processed"], text="order-", payment_status="PF"), ["b"]),
    ],
    ids=[
        "code",
        "other-code",
        "unknown-code",
        "malformed",
        "invalid",
        "processing",
        "no-conflict",
        "signal",
        "identifier-prefix",
        "shorter-prefix",
        "key-and-its-reuse",
        "key",
        "other-prefix",
        "not-a-substring",
        "text-and-code",
        "all-together",
    ],
)
def test_each_narrower_filter_lists_and_counts_exactly_its_deliveries(
    ledger: Ledger, stored: dict[str, int], wanted: DeliveryFilter, expected: list[str]
) -> None:
    rows = ledger.receiver.delivery_log(wanted).rows

    assert [row.id for row in rows] == [stored[name] for name in expected]
    assert ledger.receiver.count_deliveries(wanted) == len(expected)


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("error", "no_such_code"),
        ("payment_status", ""),
        ("payment_status", "P\x00S"),
        ("text", ""),
        ("text", "a\x00"),
    ],
)
def test_a_bad_narrower_filter_is_a_value_error_naming_it(argument: str, value: str) -> None:
    given: dict[str, Any] = {argument: value}
    with pytest.raises(ValueError, match=argument):
        DeliveryFilter(**given)


@pytest.mark.parametrize(
    ("prefix", "high"),
    [
        ("order", "ordes"),
        ("a\ud7ff", "a\ue000"),
        ("z" + chr(sys.maxunicode), "{"),
        (chr(sys.maxunicode), None),
    ],
)
def test_a_prefix_range_ends_after_every_text_that_starts_with_it(
    prefix: str, high: str | None
) -> None:
    assert prefix_bounds(prefix) == (prefix, high)
