"""The delivery log's error-code and free-text filters, on each engine."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import pytest

from payhooks.storage import Ledger, ListedTransaction, PaymentState
from payhooks.storage.reads import DeliveryErrorCode, DeliveryFilter
from payhooks.storage.reads.log_search import prefix_bounds
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
        [ledger.receiver.delivery(found["d"]).outcome_id],  # type: ignore[union-attr, list-item]
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
        (DeliveryFilter(text="ll-4"), ["d"]),
        (DeliveryFilter(text="ll-1"), ["a"]),  # exact: not ll-10's, nor ll-2's
        (DeliveryFilter(text="ll-"), []),
        (DeliveryFilter(text="ll-2", payment_status="PF"), ["b"]),
        (DeliveryFilter(text="ll-2", payment_status="PS"), []),
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
        "transaction-id",
        "transaction-id-exact",
        "transaction-id-no-prefix",
        "transaction-id-and-code",
        "transaction-id-and-other-code",
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


def test_a_transaction_id_finds_every_delivery_of_its_payment(ledger: Ledger) -> None:
    """The payment's other deliveries too: a failed attempt under another transaction id, and
    the one its identifier named when the body was refused."""
    failed = _recorded(ledger, 1, "msg_1", "order-7", status="PF")
    paid = _recorded(ledger, 2, "msg_2", "order-7")
    refused = _refused(ledger, 3, "invalid_payload", "order-7")
    _recorded(ledger, 4, "msg_4", "order-8")

    found = ledger.receiver.delivery_log(DeliveryFilter(text="ll-2")).rows

    assert [row.id for row in found] == [refused, paid, failed]


def test_a_transaction_id_only_the_sync_listed_finds_its_payments_deliveries(
    ledger: Ledger,
) -> None:
    """A payment whose notifications never named the transaction (they failed before an
    outcome), but ``payhooks sync`` saw it in the service's list."""
    ledger.expect_transaction("order-5", 2500, "CNY")
    refused = _refused(ledger, 1, "invalid_payload", "order-5")
    _refused(ledger, 2, "invalid_payload", "order-6")
    run = ledger.service.begin_sync(max_age=timedelta(hours=1))
    listed = ListedTransaction("ll-svc-5", "order-5", "PS", PaymentState.SUCCEEDED, "CNY", 2500)
    ledger.service.record_service_page(run.id, [listed], None)
    ledger.service.end_sync(run.id)

    found = ledger.receiver.delivery_log(DeliveryFilter(text="ll-svc-5")).rows

    assert [row.id for row in found] == [refused]
    assert ledger.receiver.count_deliveries(DeliveryFilter(text="ll-svc-5")) == 1


@pytest.mark.sqlite_only  # SQLite's query plans
def test_a_transaction_id_search_reads_indexes_only(ledger: Ledger, stored: dict[str, int]) -> None:
    from payhooks.storage.deliveries import LISTED
    from payhooks.storage.reads.delivery_log import _where
    from payhooks.storage.reads.log_search import _NAMED_BY_TRANSACTION

    lookup = " ".join(
        row[3]
        for row in ledger.database.conn.execute(
            f"EXPLAIN QUERY PLAN {_NAMED_BY_TRANSACTION}", ("ll-4", "ll-4", 20)
        )
    )
    where, params = _where(ledger.database.conn, DeliveryFilter(text="ll-4"), None)
    search = " ".join(
        row[3]
        for row in ledger.database.conn.execute(
            f"EXPLAIN QUERY PLAN SELECT {LISTED}{where} ORDER BY d.id DESC LIMIT 5",
            params,
        )
    )

    assert "SCAN outcomes" not in lookup, lookup
    assert "SCAN service_transactions" not in lookup, lookup
    assert "INDEX sqlite_autoindex_outcomes" in lookup, lookup
    assert "SCAN d" not in search, search
    assert "INDEX deliveries_identifier" in search, search


@pytest.mark.postgresql_only  # PostgreSQL's plans; SQLite's are the test above
def test_a_transaction_id_search_is_index_lookups_on_postgresql_too(
    ledger: Ledger, stored: dict[str, int]
) -> None:
    """With sequential scans priced out, PostgreSQL still finds an index path for every part
    of the search: a subquery inside the ``OR`` would have left it only the scan."""
    from payhooks.storage.deliveries import LISTED
    from payhooks.storage.reads.delivery_log import _where

    with ledger._engine.writer.write() as conn:
        where, params = _where(conn, DeliveryFilter(text="ll-4"), None)
        sql = f"SELECT {LISTED}{where} ORDER BY d.id DESC LIMIT 5"
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + sql, params).fetchall())

    assert "Seq Scan on deliveries" not in plan, plan
    assert "deliveries_identifier" in plan, plan
