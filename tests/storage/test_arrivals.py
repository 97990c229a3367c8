"""The receiver's write of a new delivery (``Ledger.record_arrival``, issue 17): on PostgreSQL
each row inserted once and never updated in the delivery's transaction, on SQLite the delivery
updated once; the same result as the general way (store the delivery, record the outcome, owe
the signals), on both engines."""

from __future__ import annotations

import hashlib
import threading
import time
from datetime import UTC

import pytest

from payhooks.receiver.pipeline.processing import receive_delivery
from payhooks.storage import (
    Arrival,
    DeliveryStatus,
    KeyTakenError,
    Ledger,
    Outcome,
    ReconciliationState,
    StorageError,
)
from tests.support.app import BodyFactory
from tests.support.engines import tables
from tests.support.factories import make_outcome

SIGNALS = ("notification-received", "payment-succeeded")
#: What a new delivery with a new outcome writes, per engine: on PostgreSQL each row once, the
#: delivery last; on SQLite the delivery first, finished by one update in the same commit
#: (storage/arrivals.py says why).
ARRIVAL_WRITES = {
    "postgresql": [("outcomes", "insert"), ("deliveries", "insert")],
    "sqlite": [("deliveries", "insert"), ("outcomes", "insert"), ("deliveries", "update")],
}


def _decide(outcome: Outcome, state: ReconciliationState) -> tuple[str, ...]:
    return SIGNALS if state is ReconciliationState.PAID else SIGNALS[:1]


def _arrive(ledger: Ledger, key: str, outcome: Outcome | None = None, **kwargs: object) -> Arrival:
    arrival = ledger.record_arrival(
        dedupe_key=key,
        body=key.encode(),
        headers={"webhook-id": key},
        outcome=outcome,
        signals=_decide,
        **kwargs,  # type: ignore[arg-type]
    )
    assert arrival is not None
    return arrival


_COUNT_SQLITE = (
    "CREATE TEMP TABLE row_writes (tbl TEXT, op TEXT)",
    *(
        f"CREATE TEMP TRIGGER count_{table}_{op} AFTER {op} ON main.{table} "  # noqa: S608
        f"BEGIN INSERT INTO row_writes VALUES ('{table}', '{op.lower()}'); END"
        for table in ("deliveries", "outcomes")
        for op in ("INSERT", "UPDATE")
    ),
)
_COUNT_POSTGRES = (
    "CREATE TABLE row_writes (tbl TEXT, op TEXT)",
    "CREATE FUNCTION count_row_write() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN "
    "INSERT INTO row_writes VALUES (TG_TABLE_NAME, lower(TG_OP)); RETURN NULL; END $f$",
    *(
        f"CREATE TRIGGER count_{table} AFTER INSERT OR UPDATE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION count_row_write()"
        for table in ("deliveries", "outcomes")
    ),
)


@pytest.fixture
def row_writes(ledger: Ledger) -> None:
    """Every row written to ``deliveries`` and ``outcomes`` from here on is counted, in order,
    in a table :func:`read_row_writes` reads."""
    if ledger.engine == "sqlite":
        for statement in _COUNT_SQLITE:
            ledger.database.execute(statement)
    else:
        for statement in _COUNT_POSTGRES:
            tables(ledger).execute(statement)


def read_row_writes(ledger: Ledger) -> list[tuple[str, str]]:
    rows = tables(ledger).execute("SELECT tbl, op FROM row_writes").fetchall()
    tables(ledger).execute("DELETE FROM row_writes")
    return [(str(table), str(op)) for table, op in rows]


def test_a_new_delivery_with_a_new_outcome_writes_fewer_rows_than_the_general_way(
    ledger: Ledger, row_writes: None
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    read_row_writes(ledger)

    arrival = _arrive(ledger, "msg_1", make_outcome())

    assert read_row_writes(ledger) == ARRIVAL_WRITES[ledger.engine]
    assert arrival.status is DeliveryStatus.PROCESSED
    assert arrival.recorded is not None
    assert arrival.recorded.is_new
    assert arrival.recorded.reconciliation is ReconciliationState.PAID
    assert arrival.signals == SIGNALS


def test_the_general_way_writes_the_delivery_three_times(ledger: Ledger, row_writes: None) -> None:
    """What the arrival saves (and what the test above would see if the receiver's path
    took the general way)."""
    delivery = ledger.record_delivery(dedupe_key="msg_1", body=b"msg_1", headers={})
    recorded = ledger.record_outcome(make_outcome(), delivery_id=delivery.id)
    ledger.owe_signals(
        recorded.outcome_id, delivery_id=delivery.id, signals=SIGNALS, reconciliation="paid"
    )

    assert read_row_writes(ledger) == [
        ("deliveries", "insert"),
        ("outcomes", "insert"),
        ("deliveries", "update"),
        ("deliveries", "update"),
    ]


def test_a_new_delivery_is_stored_as_the_general_way_stores_it(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    arrival = _arrive(ledger, "msg_1", make_outcome())
    stored = ledger.delivery(arrival.delivery_id)

    assert stored is not None
    assert arrival.recorded is not None
    assert (stored.dedupe_key, stored.body, stored.headers) == (
        "msg_1",
        b"msg_1",
        {"webhook-id": "msg_1"},
    )
    assert stored.body_sha256 == hashlib.sha256(b"msg_1").hexdigest()
    assert (stored.status, stored.error, stored.attempts) == ("processed", None, 1)
    assert stored.outcome_id == arrival.recorded.outcome_id
    assert stored.received_at.tzinfo is UTC
    assert ledger.outcome_identifier(arrival.recorded.outcome_id) == "order-1"
    assert ledger.state("order-1") is ReconciliationState.PAID
    owed = ledger.owed_signals(arrival.delivery_id)
    assert [(row.outcome_id, row.signal, row.reconciliation) for row in owed] == [
        (arrival.recorded.outcome_id, name, "paid") for name in SIGNALS
    ]
    # A later delivery gets the next id, allotted the usual way.
    later = ledger.record_delivery(dedupe_key="msg_2", body=b"msg_2", headers={})
    assert later.id == arrival.delivery_id + 1
    if ledger.engine == "sqlite":
        assert ledger.database.conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert ledger.database.conn.execute("PRAGMA defer_foreign_keys").fetchone() == (0,)


@pytest.mark.parametrize(
    ("changes", "status", "error_names"),
    [
        ({}, DeliveryStatus.DUPLICATE, None),
        ({"amount_minor": 2400}, DeliveryStatus.CONFLICTING_OUTCOME, "amount_minor"),
    ],
)
def test_an_outcome_stored_before_makes_the_new_delivery_a_duplicate_or_a_conflict(
    ledger: Ledger, changes: dict[str, object], status: DeliveryStatus, error_names: str | None
) -> None:
    first = _arrive(ledger, "msg_1", make_outcome())
    assert first.recorded is not None

    second = _arrive(ledger, "msg_2", make_outcome(**changes))

    assert second.status is status
    assert second.recorded is not None
    assert (second.recorded.is_new, second.recorded.outcome_id) == (
        False,
        first.recorded.outcome_id,
    )
    assert second.signals == ()
    stored = ledger.delivery(second.delivery_id)
    assert stored is not None
    assert (stored.status, stored.outcome_id) == (status, first.recorded.outcome_id)
    if error_names is None:
        assert stored.error is None
    else:
        assert stored.error is not None
        assert error_names in stored.error
    assert ledger.owed_signals(second.delivery_id) == []


def test_a_body_that_is_no_notification_is_one_insert_with_its_error(
    ledger: Ledger, row_writes: None
) -> None:
    arrival = _arrive(ledger, "msg_1", error=("invalid_payload", '{"code": "invalid_payload"}'))

    assert read_row_writes(ledger) == [("deliveries", "insert")]
    assert (arrival.status, arrival.recorded, arrival.signals) == (
        DeliveryStatus.INVALID_PAYLOAD,
        None,
        (),
    )
    stored = ledger.delivery(arrival.delivery_id)
    assert stored is not None
    assert (stored.status, stored.error, stored.outcome_id) == (
        "invalid_payload",
        '{"code": "invalid_payload"}',
        None,
    )


def test_a_known_key_writes_nothing_and_is_left_to_record_delivery(ledger: Ledger) -> None:
    ledger.record_delivery(dedupe_key="msg_1", body=b"msg_1", headers={})

    found = ledger.record_arrival(
        dedupe_key="msg_1", body=b"msg_1", headers={}, outcome=make_outcome()
    )

    assert found is None
    (delivery,) = list(ledger.deliveries())
    assert (delivery.attempts, delivery.status) == (1, "received")
    assert tables(ledger).execute("SELECT COUNT(*) FROM outcomes").fetchone() == (0,)


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        ({}, "not both or neither"),
        ({"outcome": make_outcome(), "error": ("invalid_payload", None)}, "not both or neither"),
        ({"error": ("processed", None)}, "status must be one of"),
        ({"outcome": make_outcome(amount_minor=-1)}, "outcome.amount_minor"),
        ({"dedupe_key": "", "outcome": make_outcome()}, "dedupe_key"),
    ],
    ids=["neither", "both", "a-status-not-an-error", "bad-amount", "empty-key"],
)
def test_bad_arguments_are_refused_before_anything_is_written(
    ledger: Ledger, arguments: dict[str, object], refusal: str
) -> None:
    call: dict[str, object] = {"dedupe_key": "msg_1", "body": b"x", "headers": {}, **arguments}
    with pytest.raises(ValueError, match=refusal):
        ledger.record_arrival(**call)  # type: ignore[arg-type]
    assert list(ledger.deliveries()) == []


# -- the receiver's path ---------------------------------------------------------------------


def test_the_receiver_stores_a_new_delivery_in_the_arrivals_writes(
    ledger: Ledger, row_writes: None, make_body: BodyFactory
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    read_row_writes(ledger)

    result = receive_delivery(
        ledger,
        dedupe_key="msg_1",
        body=make_body(),
        headers={},
        time_zone=UTC,
        status_map=None,
    )

    assert result.status is DeliveryStatus.PROCESSED
    assert result.reconciliation is ReconciliationState.PAID
    assert result.owed is not None
    assert "payment-succeeded" in result.owed.signals
    assert read_row_writes(ledger) == ARRIVAL_WRITES[ledger.engine]
    # Sending the signals then marks them sent: the delivery's one update, a commit of its own.
    assert ledger.mark_signals_sent(result.owed.outcome_id) == len(result.owed.signals)
    assert read_row_writes(ledger) == [("deliveries", "update")]


def _wait_for_a_lock_wait(url: str, timeout: float = 10.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            waiting = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            if waiting and waiting[0]:
                return
            time.sleep(0.02)
    raise AssertionError("the arrival never waited on the other transaction's key")


def test_a_twin_storing_the_key_meanwhile_on_postgresql_is_seen_and_finished(
    postgres_url: str, make_body: BodyFactory
) -> None:
    """Two copies of one delivery at once on PostgreSQL: the twin stores the key after the
    arrival looked and before it inserted. The arrival's insert finds the key taken
    (``KeyTakenError``), its transaction is undone, and the receiver takes the general way:
    one delivery, two attempts, finished, one outcome."""
    import psycopg

    url = postgres_url
    body = make_body()
    twin = psycopg.connect(url)
    twin.execute(
        "INSERT INTO deliveries (dedupe_key, received_at, headers, body, body_sha256, updated_at) "
        "VALUES ('msg_1', '2026-11-21T12:00:00+00:00', '{}', %s, %s, "
        "'2026-11-21T12:00:00+00:00')",
        (body, hashlib.sha256(body).hexdigest()),
    )
    results: list[object] = []

    def receive() -> None:
        try:
            with Ledger(url) as other:
                results.append(
                    receive_delivery(
                        other,
                        dedupe_key="msg_1",
                        body=body,
                        headers={},
                        time_zone=UTC,
                        status_map=None,
                    )
                )
        except Exception as err:  # pragma: no cover - what the test would report
            results.append(err)

    thread = threading.Thread(target=receive)
    thread.start()
    try:
        _wait_for_a_lock_wait(url)
    finally:
        twin.commit()
        twin.close()
        thread.join(30)

    (result,) = results
    assert not isinstance(result, Exception), result
    with Ledger(url) as ledger:
        (delivery,) = list(ledger.deliveries())
        assert (delivery.status, delivery.attempts) == ("processed", 2)
        assert tables(ledger).execute("SELECT COUNT(*) FROM outcomes").fetchone() == (1,)


def test_key_taken_is_a_storage_error_naming_no_key() -> None:
    err = KeyTakenError("msg_secret")
    assert isinstance(err, StorageError)
    assert err.dedupe_key == "msg_secret"
    assert "msg_secret" not in str(err)


@pytest.mark.parametrize("key", ["", "msg\x00", "msg\ud800"], ids=["empty", "nul", "surrogate"])
@pytest.mark.parametrize("method", ["record_delivery", "record_arrival"])
def test_a_key_no_database_can_store_is_refused_with_a_value_error(
    ledger: Ledger, key: str, method: str
) -> None:
    store = getattr(ledger, method)
    extra = {"outcome": make_outcome()} if method == "record_arrival" else {}
    with pytest.raises(ValueError, match="dedupe_key must be"):
        store(dedupe_key=key, body=b"{}", headers={}, **extra)
    assert list(ledger.deliveries()) == []


@pytest.mark.sqlite_only  # SQLite's pragma
def test_foreign_keys_are_checked_at_once_again_after_an_arrival_inside_a_transaction(
    ledger: Ledger,
) -> None:
    """SQLite checks every key at once, the arrival's too (deferring them made each parent
    insert scan its child tables): a caller's transaction goes on checked at once."""
    conn = ledger.database.conn
    with ledger.transaction():
        _arrive(ledger, "msg_1", make_outcome())
        assert conn.execute("PRAGMA defer_foreign_keys").fetchone() == (0,)
        with pytest.raises(StorageError):
            ledger.record_outcome(make_outcome(transaction_id="ll-2"), delivery_id=99)
    assert [d.dedupe_key for d in ledger.deliveries()] == ["msg_1"]
