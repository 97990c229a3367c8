"""payhooks.storage.Ledger writes: expected payments, deliveries, outcomes, rejected deliveries,
returns."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from payhooks.storage import (
    MAX_AMOUNT_MINOR,
    ConflictError,
    DeliveryStatus,
    Ledger,
    PaymentState,
    ReconciliationState,
    StorageError,
)
from payhooks.storage.currencies import UnknownCurrencyError
from payhooks.storage.errors import UnknownDeliveryError
from tests.support.engines import tables
from tests.support.factories import T0, FixedClock, make_outcome, raise_in_round, record


def count(ledger: Ledger, table: str) -> int:
    (rows,) = tables(ledger).execute(f"SELECT COUNT(*) FROM {table}").fetchone()  # noqa: S608
    return int(rows)


# -- expected payments ---------------------------------------------------------------------


def test_a_new_payment_is_registered_once_and_again_is_a_no_op(ledger: Ledger) -> None:
    assert ledger.expect_transaction("order-1", 2500, "CNY", description="Tea") is True
    assert ledger.expect_transaction("order-1", 2500, "CNY", description="Tea") is False
    assert count(ledger, "payments") == 1


def test_a_subscription_is_registered_with_its_plan_amount(ledger: Ledger) -> None:
    assert ledger.expect_subscription("sub-1", 999, "USD", 1999, metadata={"plan": "pro"})
    stored = (
        tables(ledger)
        .execute("SELECT kind, amount_minor, plan_amount_minor, metadata FROM payments")
        .fetchone()
    )
    assert stored == ("subscription", 999, 1999, '{"plan":"pro"}')


@pytest.mark.parametrize(
    ("again", "fields"),
    [
        ({"amount_minor": 2600}, ("amount_minor",)),
        ({"currency": "USD"}, ("currency",)),
        ({"description": "Coffee"}, ("description",)),
        ({"metadata": {"cart": 2}}, ("metadata",)),
        ({"amount_minor": 1, "currency": "JPY"}, ("amount_minor", "currency")),
    ],
)
def test_registering_again_with_different_data_is_a_conflict(
    ledger: Ledger, again: dict[str, Any], fields: tuple[str, ...]
) -> None:
    first: dict[str, Any] = {
        "amount_minor": 2500,
        "currency": "CNY",
        "description": "Tea",
        "metadata": {"cart": 1},
    }
    ledger.expect_transaction("order-1", **first)
    with pytest.raises(ConflictError) as exc_info:
        ledger.expect_transaction("order-1", **{**first, **again})
    assert exc_info.value.code == "conflict"
    assert exc_info.value.fields == fields
    assert exc_info.value.external_identifier == "order-1"
    assert count(ledger, "payments") == 1


def test_a_transaction_registered_again_as_a_subscription_is_a_conflict(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    with pytest.raises(ConflictError) as exc_info:
        ledger.expect_subscription("order-1", 2500, "CNY", 2500)
    assert exc_info.value.fields == ("kind", "plan_amount_minor")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("", 2500, "CNY"), ValueError),
        (("x" * 65, 2500, "CNY"), ValueError),
        (("order-1", -1, "CNY"), ValueError),
        (("order-1", 25.0, "CNY"), ValueError),
        (("order-1", True, "CNY"), ValueError),
        (("order-1", MAX_AMOUNT_MINOR + 1, "CNY"), ValueError),
        (("order-1", 2500, "cny"), UnknownCurrencyError),
        (("order-1", 2500, "XAU"), UnknownCurrencyError),
    ],
)
def test_a_bad_registration_is_refused_before_anything_is_stored(
    ledger: Ledger, args: tuple[Any, ...], error: type[Exception]
) -> None:
    with pytest.raises(error):
        ledger.expect_transaction(*args)
    assert count(ledger, "payments") == 0


def test_metadata_that_is_not_json_is_refused(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="metadata"):
        ledger.expect_transaction("order-1", 2500, "CNY", metadata={"when": object()})


# -- deliveries ----------------------------------------------------------------------------


def test_a_new_delivery_is_stored_as_received(ledger: Ledger, clock: FixedClock) -> None:
    delivery = ledger.receiver.record_delivery(
        dedupe_key="msg_1", body=b'{"a": 1}', headers={"webhook-id": "msg_1"}
    )
    assert delivery.is_new
    assert delivery.status is DeliveryStatus.RECEIVED
    assert delivery.attempts == 1
    assert delivery.received_at == clock.now
    assert delivery.body == b'{"a": 1}'
    assert delivery.headers == {"webhook-id": "msg_1"}
    assert ledger.receiver.delivery(delivery.id) == delivery.__class__(
        **{**_fields(delivery), "is_new": False}
    )


def _fields(delivery: Any) -> dict[str, Any]:
    return {name: getattr(delivery, name) for name in delivery.__dataclass_fields__}


def test_a_repeated_dedupe_key_with_the_same_bytes_is_no_new_row_but_counts_an_attempt(
    ledger: Ledger,
) -> None:
    first = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
    assert first.body_sha256 == hashlib.sha256(b"{}").hexdigest()
    assert first.reused_key_of is None
    for attempt in (2, 3):
        again = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={"x": "y"})
        assert not again.is_new
        assert again.id == first.id
        assert again.attempts == attempt
        assert again.headers == {}
    assert count(ledger, "deliveries") == 1


def test_other_bytes_under_a_key_that_names_the_signed_content_are_the_same_delivery(
    ledger: Ledger,
) -> None:
    # The sorted-fields schemes' key is the digest of the signed string, which determines
    # the body: other bytes under it are the same notification laid out otherwise.
    first = ledger.receiver.record_delivery(
        dedupe_key="sf-digest", body=b'{"a": "1"}', headers={}, key_names_content=True
    )
    again = ledger.receiver.record_delivery(
        dedupe_key="sf-digest", body=b'{ "a" : "1" }', headers={}, key_names_content=True
    )

    assert (again.is_new, again.id, again.attempts) == (False, first.id, 2)
    assert again.body == b'{"a": "1"}'  # what is stored counts
    assert count(ledger, "deliveries") == 1


PP_BODY = b'{"payment_data": {"payment_status": "PP"}}'
PS_BODY = b'{"payment_data": {"payment_status": "PS"}}'


def test_a_reused_dedupe_key_with_other_bytes_is_stored_as_a_delivery_of_its_own(
    ledger: Ledger,
) -> None:
    first = ledger.receiver.record_delivery(dedupe_key="msg_1", body=PP_BODY, headers={})
    ledger.receiver.record_outcome(make_outcome(payment_status="PP"), delivery_id=first.id)

    reused = ledger.receiver.record_delivery(dedupe_key="msg_1", body=PS_BODY, headers={})

    assert reused.is_new
    assert reused.id != first.id
    assert reused.dedupe_key == f"msg_1#{hashlib.sha256(PS_BODY).hexdigest()}"
    assert reused.reused_key_of == first.id
    assert (reused.body, reused.status, reused.attempts) == (PS_BODY, "received", 1)
    # The first delivery is untouched: same bytes, one attempt, still processed.
    stored_first = ledger.receiver.delivery(first.id)
    assert stored_first is not None
    assert (stored_first.body, stored_first.attempts, stored_first.status) == (
        PP_BODY,
        1,
        "processed",
    )
    # The reused key's own retries count on its own row; a third body gets a third row.
    again = ledger.receiver.record_delivery(dedupe_key="msg_1", body=PS_BODY, headers={})
    assert (again.is_new, again.id, again.attempts) == (False, reused.id, 2)
    third = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
    assert (third.is_new, third.reused_key_of) == (True, first.id)
    assert count(ledger, "deliveries") == 3


def test_a_derived_key_taken_by_other_bytes_stores_nothing_and_says_so(ledger: Ledger) -> None:
    squatter = f"msg_1#{hashlib.sha256(PS_BODY).hexdigest()}"
    ledger.receiver.record_delivery(dedupe_key=squatter, body=b"squat", headers={})
    ledger.receiver.record_delivery(dedupe_key="msg_1", body=PP_BODY, headers={})
    with pytest.raises(StorageError) as exc_info:
        ledger.receiver.record_delivery(dedupe_key="msg_1", body=PS_BODY, headers={})
    assert "not stored" in exc_info.value.message
    assert count(ledger, "deliveries") == 2


def test_received_at_can_be_given_and_must_be_aware(ledger: Ledger) -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert (
        ledger.receiver.record_delivery(
            dedupe_key="a", body=b"", headers={}, received_at=moment
        ).received_at
        == moment
    )
    with pytest.raises(ValueError, match="timezone-aware"):
        ledger.receiver.record_delivery(
            dedupe_key="b", body=b"", headers={}, received_at=datetime(2026, 1, 2)
        )


@pytest.mark.parametrize(
    "status",
    [DeliveryStatus.MALFORMED_JSON, "invalid_payload", DeliveryStatus.PROCESSING_ERROR],
)
def test_a_delivery_is_marked_with_its_error(ledger: Ledger, status: str) -> None:
    delivery = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{", headers={})
    ledger.receiver.mark_delivery(delivery.id, status, error="why")
    stored = ledger.receiver.delivery(delivery.id)
    assert stored is not None
    assert stored.status == status
    assert stored.error == "why"


@pytest.mark.parametrize("first_copy", ["processed", "duplicate"])
@pytest.mark.parametrize("status", ["processing_error", "invalid_payload", "malformed_json"])
def test_a_twin_that_fails_after_the_first_copy_finished_leaves_it_finished(
    ledger: Ledger, first_copy: str, status: str
) -> None:
    if first_copy == "duplicate":
        record(ledger, make_outcome())
    delivery = ledger.receiver.record_delivery(dedupe_key="msg_twin", body=b"{}", headers={})
    assert ledger.receiver.record_outcome(
        make_outcome(), delivery_id=delivery.id
    ).delivery_status == (first_copy)
    # The other copy of the same delivery, still in flight, fails now.
    assert ledger.receiver.mark_delivery(delivery.id, status, error="boom") is False
    stored = ledger.receiver.delivery(delivery.id)
    assert stored is not None
    assert (stored.status, stored.error) == (first_copy, None)


def test_marking_an_unfinished_delivery_says_it_did(ledger: Ledger) -> None:
    delivery = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{", headers={})
    assert ledger.receiver.mark_delivery(delivery.id, "malformed_json") is True
    assert ledger.receiver.mark_delivery(delivery.id, "processing_error") is True


@pytest.mark.parametrize("status", ["processed", "duplicate", "received", "nonsense"])
def test_mark_delivery_refuses_statuses_that_recording_sets(ledger: Ledger, status: str) -> None:
    delivery = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{", headers={})
    with pytest.raises(ValueError, match="status"):
        ledger.receiver.mark_delivery(delivery.id, status)


def test_marking_an_unknown_delivery_raises_its_code(ledger: Ledger) -> None:
    with pytest.raises(UnknownDeliveryError) as exc_info:
        ledger.receiver.mark_delivery(42, "malformed_json")
    assert exc_info.value.code == "unknown_delivery"
    assert exc_info.value.delivery_id == 42


def test_signal_errors_are_kept_one_per_line_on_the_delivery_until_none_is_owed(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    claimed = ledger.signals.claim([recorded.outcome_id], lease=timedelta(minutes=5))
    errors = {"notification-received": "first failed", "payment-succeeded": "second failed"}
    assert raise_in_round(ledger, claimed, errors, retry_at=clock.now) == 2
    stored = ledger.receiver.delivery(claimed[0].delivery_id)
    assert stored is not None
    assert stored.signal_error == "shop.ship: first failed\nshop.ship: second failed"
    again = ledger.signals.claim([recorded.outcome_id], lease=timedelta(minutes=5))
    assert ledger.signals.mark_sent(again) == 2
    stored = ledger.receiver.delivery(claimed[0].delivery_id)
    assert stored is not None
    assert stored.signal_error is None


def test_deliveries_are_listed_in_arrival_order_filtered_by_status(ledger: Ledger) -> None:
    ids = [
        ledger.receiver.record_delivery(dedupe_key=f"m{i}", body=b"", headers={}).id
        for i in range(4)
    ]
    ledger.receiver.mark_delivery(ids[1], "malformed_json")
    ledger.receiver.mark_delivery(ids[3], "malformed_json")
    assert [d.id for d in ledger.receiver.deliveries()] == ids
    assert [d.id for d in ledger.receiver.deliveries("malformed_json")] == [ids[1], ids[3]]
    assert [d.id for d in ledger.receiver.deliveries(DeliveryStatus.RECEIVED)] == [ids[0], ids[2]]
    assert ledger.receiver.delivery(12345) is None


# -- outcomes ------------------------------------------------------------------------------


def test_an_outcome_is_recorded_and_reconciled_in_one_call(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    assert recorded.is_new
    assert recorded.reconciliation is ReconciliationState.PAID
    assert recorded.delivery_status is DeliveryStatus.PROCESSED
    stored = (
        tables(ledger)
        .execute(
            "SELECT transaction_id, external_identifier, flow, payment_status, state, amount, "
            "currency, amount_minor, paid_at, extra FROM outcomes"
        )
        .fetchone()
    )
    assert stored == (
        "ll-1",
        "order-1",
        "wallet",
        "PS",
        "succeeded",
        "25.00",
        "CNY",
        2500,
        "2026-11-21T12:00:00+00:00",
        "{}",
    )


def test_paid_at_is_stored_in_utc(ledger: Ledger) -> None:
    shanghai = timezone(timedelta(hours=8))
    record(ledger, make_outcome(paid_at=datetime(2026, 11, 21, 20, 0, tzinfo=shanghai)))
    (paid_at,) = tables(ledger).execute("SELECT paid_at FROM outcomes").fetchone()
    assert paid_at == "2026-11-21T12:00:00+00:00"


def test_the_same_outcome_recorded_five_times_is_one_row(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    results = [record(ledger, make_outcome()) for _ in range(5)]
    assert [r.is_new for r in results] == [True, False, False, False, False]
    assert {r.outcome_id for r in results} == {results[0].outcome_id}
    assert [r.delivery_status for r in results] == [DeliveryStatus.PROCESSED] + [
        DeliveryStatus.DUPLICATE
    ] * 4
    assert {r.reconciliation for r in results} == {ReconciliationState.PAID}
    assert count(ledger, "outcomes") == 1
    assert count(ledger, "deliveries") == 5
    assert [d.outcome_id for d in ledger.receiver.deliveries()] == [results[0].outcome_id] * 5


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        (
            {"amount_minor": 9900, "amount": Decimal("99.00")},
            "amount_minor (stored 2500, here 9900)",
        ),
        ({"currency": "USD"}, "currency (stored CNY, here USD)"),
        ({"state": PaymentState.UNKNOWN}, "state (stored succeeded, here unknown)"),
        ({"provider_reference": "pi_other"}, "provider_reference"),
        ({"external_identifier": "order-2"}, "external_identifier"),
    ],
)
def test_a_second_delivery_that_says_otherwise_is_a_conflicting_outcome(
    ledger: Ledger, changes: dict[str, Any], says: str
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    first = record(ledger, make_outcome(provider_reference="pi_secret_1"))

    second = record(ledger, make_outcome(**{"provider_reference": "pi_secret_1", **changes}))

    assert second.delivery_status is DeliveryStatus.CONFLICTING_OUTCOME
    assert (second.is_new, second.outcome_id) == (False, first.outcome_id)
    # The first word stands: one outcome row, the payment still paid as it said.
    assert second.reconciliation is ReconciliationState.PAID
    assert count(ledger, "outcomes") == 1
    assert ledger.state("order-1") is ReconciliationState.PAID
    stored = list(ledger.receiver.deliveries(DeliveryStatus.CONFLICTING_OUTCOME))
    assert len(stored) == 1
    assert stored[0].outcome_id == first.outcome_id
    assert stored[0].error is not None
    assert says in stored[0].error
    assert "'ll-1'" in stored[0].error
    assert "pi_secret_1" not in stored[0].error
    assert "pi_other" not in stored[0].error


def test_a_conflict_names_every_field_that_differs(ledger: Ledger) -> None:
    record(ledger, make_outcome())
    record(ledger, make_outcome(amount_minor=100, amount=Decimal("1.00"), currency="USD"))
    (conflict,) = ledger.receiver.deliveries("conflicting_outcome")
    assert conflict.error is not None
    assert "amount_minor (stored 2500, here 100), currency (stored CNY, here USD)" in (
        conflict.error
    )


def test_the_same_outcome_resent_at_another_time_is_a_duplicate(ledger: Ledger) -> None:
    record(ledger, make_outcome())
    again = record(ledger, make_outcome(paid_at=T0 + timedelta(minutes=5), amount=Decimal("25.0")))
    assert again.delivery_status is DeliveryStatus.DUPLICATE
    assert [d.error for d in ledger.receiver.deliveries("duplicate")] == [None]


def test_recording_the_same_delivery_again_keeps_it_processed(ledger: Ledger) -> None:
    delivery = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
    first = ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id)
    again = ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id)
    assert (first.is_new, again.is_new) == (True, False)
    assert again.delivery_status is DeliveryStatus.PROCESSED
    stored = ledger.receiver.delivery(delivery.id)
    assert stored is not None
    assert stored.status is DeliveryStatus.PROCESSED


def test_recording_after_a_failed_parse_clears_the_error(ledger: Ledger) -> None:
    delivery = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
    ledger.receiver.mark_delivery(delivery.id, "processing_error", error="boom")
    ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id)
    stored = ledger.receiver.delivery(delivery.id)
    assert stored is not None
    assert (stored.status, stored.error) == (DeliveryStatus.PROCESSED, None)


def test_an_outcome_for_an_unknown_delivery_stores_nothing(ledger: Ledger) -> None:
    with pytest.raises(UnknownDeliveryError):
        ledger.receiver.record_outcome(make_outcome(), delivery_id=77)
    assert count(ledger, "outcomes") == 0


def test_an_outcome_over_the_amount_bound_stores_nothing(ledger: Ledger) -> None:
    delivery = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
    with pytest.raises(ValueError, match="amount_minor"):
        ledger.receiver.record_outcome(
            make_outcome(amount_minor=MAX_AMOUNT_MINOR + 1), delivery_id=delivery.id
        )
    assert count(ledger, "outcomes") == 0
    stored = ledger.receiver.delivery(delivery.id)
    assert stored is not None
    assert stored.status is DeliveryStatus.RECEIVED


def test_extra_members_are_kept_as_json(ledger: Ledger) -> None:
    record(ledger, make_outcome(extra={"note": "hi", "fee": Decimal("0.10")}))
    (extra,) = tables(ledger).execute("SELECT extra FROM outcomes").fetchone()
    assert extra == '{"fee":"0.10","note":"hi"}'


# -- rejected deliveries and returns -------------------------------------------------------


def test_a_rejected_delivery_keeps_the_first_4_kib_and_its_size(ledger: Ledger) -> None:
    body = b"x" * 10_000
    ledger.receiver.record_rejected(reason="invalid_signature", body=body, remote_addr="127.0.0.1")
    stored = (
        tables(ledger)
        .execute("SELECT reason, remote_addr, length(body), body_size FROM rejected_deliveries")
        .fetchone()
    )
    assert stored == ("invalid_signature", "127.0.0.1", 4096, 10_000)


def test_rejected_deliveries_stay_bounded_keeping_the_newest(
    tmp_path: Path, clock: FixedClock
) -> None:
    with Ledger(tmp_path / "bounded.db", max_rejected=5, clock=clock) as ledger:
        ids = [
            ledger.receiver.record_rejected(reason=f"r{i}", body=b"", remote_addr=None)
            for i in range(12)
        ]
        kept = [
            row[0]
            for row in tables(ledger).execute("SELECT reason FROM rejected_deliveries ORDER BY id")
        ]
    assert kept == [f"r{i}" for i in range(7, 12)]
    assert ids == sorted(ids)


def test_the_default_bound_on_rejected_deliveries_is_ten_thousand(ledger: Ledger) -> None:
    from payhooks.storage.limits import DEFAULT_MAX_REJECTED

    assert DEFAULT_MAX_REJECTED == 10_000
    conn = tables(ledger)
    conn.executemany(
        "INSERT INTO rejected_deliveries (received_at, reason, body, body_size) "
        "VALUES ('2026-01-01T00:00:00+00:00', 'old', ?, 0)",
        [(b"",)] * 10_000,
    )
    ledger.receiver.record_rejected(reason="new", body=b"", remote_addr=None)
    assert count(ledger, "rejected_deliveries") == 10_000
    (oldest,) = conn.execute("SELECT MIN(id) FROM rejected_deliveries").fetchone()
    assert oldest == 2


@pytest.mark.parametrize("bad", [0, -1])
def test_a_bound_below_one_is_refused(tmp_path: Path, bad: int) -> None:
    with pytest.raises(ValueError, match="max_rejected"):
        Ledger(tmp_path / "x.db", max_rejected=bad)


def test_returns_are_recorded_and_never_settle_a_payment(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    ledger.receiver.record_return("order-1", "return", "Authorised")
    ledger.receiver.record_return("order-1", "cancel", None)
    assert ledger.state("order-1") is ReconciliationState.PENDING
    rows = (
        tables(ledger)
        .execute(
            "SELECT external_identifier, kind, result_code, returned_at FROM returns ORDER BY id"
        )
        .fetchall()
    )
    assert rows == [
        ("order-1", "return", "Authorised", "2026-11-21T12:00:00+00:00"),
        ("order-1", "cancel", None, "2026-11-21T12:00:00+00:00"),
    ]
    with pytest.raises(ValueError, match="kind"):
        ledger.receiver.record_return("order-1", "refund", None)


def test_the_ledger_repr_names_the_file_and_nothing_else(tmp_path: Path) -> None:
    with Ledger(tmp_path / "x.db") as ledger:
        assert repr(ledger) == f"<Ledger {str(tmp_path / 'x.db')!r}>"


def test_returns_keep_only_the_newest_visits_of_each_identifier(
    tmp_path: Path, clock: FixedClock
) -> None:
    with Ledger(tmp_path / "returns.db", max_returns=3, clock=clock) as ledger:
        ids = []
        for n in range(8):
            clock.advance(1)
            ids.append(ledger.receiver.record_return("order-1", "return", f"visit-{n}"))
        ledger.receiver.record_return("order-2", "cancel", None)
        kept = (
            tables(ledger)
            .execute("SELECT external_identifier, result_code FROM returns ORDER BY id")
            .fetchall()
        )
    assert kept == [
        ("order-1", "visit-5"),
        ("order-1", "visit-6"),
        ("order-1", "visit-7"),
        ("order-2", None),
    ]
    assert ids == sorted(ids)


def test_a_visit_dated_before_the_newest_ones_is_the_one_pruned(
    tmp_path: Path, clock: FixedClock
) -> None:
    with Ledger(tmp_path / "returns.db", max_returns=2, clock=clock) as ledger:
        for n in range(2):
            clock.advance(60)
            ledger.receiver.record_return("order-1", "return", f"visit-{n}")
        ledger.receiver.record_return("order-1", "return", "late", returned_at=T0)
        kept = [row[0] for row in tables(ledger).execute("SELECT result_code FROM returns")]
    assert sorted(kept) == ["visit-0", "visit-1"]


def test_the_default_bound_on_returns_is_fifty_per_identifier(ledger: Ledger) -> None:
    from payhooks.storage.limits import DEFAULT_MAX_RETURNS

    assert DEFAULT_MAX_RETURNS == 50
    for _ in range(60):
        ledger.receiver.record_return("order-1", "return", None)
    assert count(ledger, "returns") == 50


@pytest.mark.parametrize("bad", [0, -5])
def test_a_returns_bound_below_one_is_refused(tmp_path: Path, bad: int) -> None:
    with pytest.raises(ValueError, match="max_returns"):
        Ledger(tmp_path / "x.db", max_returns=bad)
