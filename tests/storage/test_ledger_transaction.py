"""``Ledger.transaction()``: several writes, one lock and one commit, all or nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlite_utils import Database

from payhooks.storage import DeliveryStatus, Ledger, StorageError, StorageUnavailableError
from payhooks.storage.errors import NESTED_WRITE_FAILED, UnknownDeliveryError
from tests.support.factories import make_outcome


@pytest.fixture
def path(database: Path | str) -> Path | str:
    """The ledger's file, or on PostgreSQL its URL."""
    return database


@pytest.fixture
def ledger(path: Path | str) -> Iterator[Ledger]:
    with Ledger(path) as opened:
        opened.expect_transaction("order-1", 2500, "CNY")
        yield opened


def _count(path: Path | str, table: str) -> int:
    """Rows of ``table`` as another connection sees them: only what is committed."""
    if isinstance(path, str):
        with psycopg.connect(path) as pg:
            sql = f"SELECT COUNT(*) FROM {table}"  # noqa: S608 - a test's table name
            row = pg.execute(sql).fetchone()  # type: ignore[arg-type,unused-ignore]
            return int(row[0]) if row else 0
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608
    finally:
        conn.close()


@pytest.mark.parametrize("savepoints", [True, False], ids=["savepoints", "no-savepoints"])
def test_writes_inside_a_transaction_are_committed_together_at_its_end(
    ledger: Ledger, path: Path | str, savepoints: bool
) -> None:
    with ledger.transaction(savepoints=savepoints):
        delivery = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
        recorded = ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id)
        seen_meanwhile = _count(path, "deliveries"), _count(path, "outcomes")

    assert seen_meanwhile == (0, 0)
    assert (_count(path, "deliveries"), _count(path, "outcomes")) == (1, 1)
    assert recorded.reconciliation == "paid"
    stored = ledger.receiver.delivery(delivery.id)
    assert stored is not None
    assert (stored.status, stored.outcome_id) == (DeliveryStatus.PROCESSED, recorded.outcome_id)


class ChangedMind(Exception):
    """What the caller raises to abandon a block."""


def _store_then_abandon(ledger: Ledger, dedupe_key: str, *, with_outcome: bool = False) -> None:
    with ledger.transaction():
        delivery = ledger.receiver.record_delivery(dedupe_key=dedupe_key, body=b"{}", headers={})
        if with_outcome:
            ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id)
        raise ChangedMind


def test_an_exception_leaving_the_block_rolls_every_write_back(
    ledger: Ledger, path: Path | str
) -> None:
    with pytest.raises(ChangedMind):
        _store_then_abandon(ledger, "msg_1", with_outcome=True)

    assert (_count(path, "deliveries"), _count(path, "outcomes")) == (0, 0)
    assert ledger.state("order-1") == "pending"


@pytest.mark.sqlite_only  # SQLite's trigger syntax, write lock, or Database
def test_a_write_that_fails_inside_is_undone_alone(ledger: Ledger, path: Path) -> None:
    # The outcome is inserted, then marking its delivery fails: the savepoint takes the
    # outcome back, and the delivery stored before it in the block is kept.
    ledger.database.execute(
        "CREATE TRIGGER refuse_marks BEFORE UPDATE OF outcome_id ON deliveries "
        "BEGIN SELECT RAISE(ABORT, 'no marks today'); END"
    )
    with ledger.transaction():
        delivery = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
        with pytest.raises(StorageError):
            ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id)
        ledger.receiver.mark_delivery(delivery.id, "processing_error", error="StorageError")

    assert (_count(path, "deliveries"), _count(path, "outcomes")) == (1, 0)
    stored = ledger.receiver.delivery(delivery.id)
    assert stored is not None
    assert stored.status is DeliveryStatus.PROCESSING_ERROR


@pytest.mark.sqlite_only  # SQLite's trigger syntax, write lock, or Database
def test_a_transaction_holds_the_write_lock_until_it_ends(ledger: Ledger, path: Path) -> None:
    with Ledger(path, busy_timeout_ms=30) as other:
        with ledger.transaction():
            ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
            with pytest.raises(StorageUnavailableError):
                other.receiver.record_delivery(dedupe_key="msg_2", body=b"{}", headers={})
        assert other.receiver.record_delivery(dedupe_key="msg_2", body=b"{}", headers={}).is_new


@pytest.mark.sqlite_only  # SQLite's trigger syntax, write lock, or Database
def test_inside_the_callers_own_transaction_it_is_a_savepoint_of_it(path: Path) -> None:
    db = Database(path)
    try:
        with Ledger(db) as ledger:
            db.begin()
            with ledger.transaction():
                ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
            still_open = db.conn.in_transaction  # the caller's transaction goes on
            db.rollback()
            assert still_open
            assert _count(path, "deliveries") == 0
    finally:
        db.close()


def test_transactions_nest(ledger: Ledger, path: Path | str) -> None:
    with ledger.transaction():
        ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
        with pytest.raises(ChangedMind):
            _store_then_abandon(ledger, "msg_2")
        ledger.receiver.record_delivery(dedupe_key="msg_3", body=b"{}", headers={})

    keys = {delivery.dedupe_key for delivery in ledger.receiver.deliveries()}
    assert keys == {"msg_1", "msg_3"}


def _go_on_after_a_failed_write(ledger: Ledger) -> None:
    with ledger.transaction(savepoints=False):
        ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
        with pytest.raises(UnknownDeliveryError):
            ledger.receiver.record_outcome(make_outcome(), delivery_id=999_999)


def test_without_savepoints_a_failed_write_caught_inside_rolls_the_whole_block_back(
    ledger: Ledger, path: Path | str
) -> None:
    # With no savepoint nothing can undo the failed write alone (and PostgreSQL refuses every
    # statement after it), so a block that goes on anyway must not commit half of itself.
    with pytest.raises(StorageError) as raised:
        _go_on_after_a_failed_write(ledger)

    assert raised.value.message == NESTED_WRITE_FAILED
    assert (_count(path, "deliveries"), _count(path, "outcomes")) == (0, 0)
    # The ledger is usable again: the next block commits.
    with ledger.transaction(savepoints=False):
        ledger.receiver.record_delivery(dedupe_key="msg_2", body=b"{}", headers={})
    assert _count(path, "deliveries") == 1


@pytest.mark.sqlite_only  # reads the statements SQLite runs
@pytest.mark.parametrize(("savepoints", "expected"), [(True, 2), (False, 0)])
def test_savepoints_are_made_for_nested_writes_only_when_asked(
    ledger: Ledger, savepoints: bool, expected: int
) -> None:
    statements: list[str] = []
    ledger.database.conn.set_trace_callback(statements.append)
    try:
        with ledger.transaction(savepoints=savepoints):
            delivery = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
            ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id)
    finally:
        ledger.database.conn.set_trace_callback(None)

    assert sum(s.startswith("SAVEPOINT") for s in statements) == expected
