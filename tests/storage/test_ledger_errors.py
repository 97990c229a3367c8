"""No bare sqlite3 error leaves the ledger; the ones that mean "try later" are unavailable."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_utils import Database

from payhooks.storage import (
    ConflictError,
    Ledger,
    ReconciliationState,
    StorageError,
    StorageUnavailableError,
)
from payhooks.storage.errors import UnknownDeliveryError
from tests.support.factories import make_outcome, record


@pytest.fixture
def path(tmp_path: Path) -> Iterator[Path]:
    """A migrated ledger file, with one open ledger keeping its WAL files in place."""
    file = tmp_path / "ledger.db"
    with Ledger(file) as keeper:
        keeper.expect_transaction("order-1", 2500, "CNY")
        yield file


@pytest.fixture
def writer_lock(path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection holding the write lock until the test ends."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    yield other
    other.execute("ROLLBACK")
    other.close()


def test_a_write_locked_past_the_busy_timeout_is_unavailable(
    path: Path, writer_lock: sqlite3.Connection
) -> None:
    with Ledger(path, busy_timeout_ms=50) as ledger:
        with pytest.raises(StorageUnavailableError) as exc_info:
            ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
        assert exc_info.value.code == "storage_unavailable"
        assert "SQLITE_BUSY" in exc_info.value.message
        assert isinstance(exc_info.value.__cause__, sqlite3.OperationalError)
        # Readers are not blocked by the writer (WAL), and the failed write left nothing.
        assert ledger.state("order-1") is ReconciliationState.PENDING
        writer_lock.execute("ROLLBACK")
        writer_lock.execute("BEGIN")
        assert ledger.receiver.delivery(1) is None
        assert ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={}).is_new


@pytest.mark.parametrize(
    "write",
    [
        lambda ledger: ledger.expect_transaction("order-2", 100, "USD"),
        lambda ledger: ledger.receiver.record_rejected(reason="x", body=b"", remote_addr=None),
        lambda ledger: ledger.receiver.record_return("order-1", "return", None),
        lambda ledger: ledger.receiver.mark_delivery(1, "malformed_json"),
    ],
    ids=["expect", "rejected", "return", "mark"],
)
def test_every_write_waits_then_gives_up_with_the_same_error(
    path: Path, writer_lock: sqlite3.Connection, write: object
) -> None:
    with Ledger(path, busy_timeout_ms=20) as ledger, pytest.raises(StorageUnavailableError):
        write(ledger)  # type: ignore[operator]


@pytest.fixture
def read_only(path: Path) -> Iterator[Ledger]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with Ledger(Database(conn)) as ledger:
        yield ledger
    conn.close()


def test_a_read_only_file_reads_but_refuses_writes_as_unavailable(read_only: Ledger) -> None:
    assert read_only.state("order-1") is ReconciliationState.PENDING
    with pytest.raises(StorageUnavailableError) as exc_info:
        read_only.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
    assert "SQLITE_READONLY" in exc_info.value.message
    assert isinstance(exc_info.value.__cause__, sqlite3.OperationalError)


def test_a_file_that_cannot_be_opened_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StorageUnavailableError):
        Ledger(tmp_path / "missing-directory" / "ledger.db")


def test_a_read_only_new_file_cannot_be_migrated_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "empty.db").touch()
    conn = sqlite3.connect(f"file:{tmp_path / 'empty.db'}?mode=ro", uri=True)
    with pytest.raises(StorageUnavailableError):
        Ledger(Database(conn))
    conn.close()


def test_a_full_disk_is_unavailable_and_loses_nothing_already_stored(path: Path) -> None:
    db = Database(path)
    with Ledger(db) as ledger:
        (pages,) = db.conn.execute("PRAGMA page_count").fetchone()
        db.conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StorageUnavailableError) as exc_info:
            ledger.receiver.record_delivery(dedupe_key="big", body=b"x" * 1_000_000, headers={})
        assert "SQLITE_FULL" in exc_info.value.message
        assert ledger.state("order-1") is ReconciliationState.PENDING
    db.close()


def test_a_constraint_the_checks_let_through_is_a_storage_error_not_a_bare_one(
    path: Path,
) -> None:
    with Ledger(path) as ledger:
        with pytest.raises(StorageError) as exc_info:
            record(ledger, make_outcome(currency="EURO"))
        assert not isinstance(exc_info.value, StorageUnavailableError)
        assert exc_info.value.code == "storage_error"
        assert isinstance(exc_info.value.__cause__, sqlite3.IntegrityError)
        # The transaction was rolled back as a whole: no outcome, the delivery still received.
        assert ledger.database.conn.execute("SELECT COUNT(*) FROM outcomes").fetchone() == (0,)


def test_a_closed_ledger_raises_a_storage_error(path: Path) -> None:
    ledger = Ledger(path)
    ledger.close()
    ledger.close()
    with pytest.raises(StorageError):
        ledger.state("order-1")
    with pytest.raises(StorageError):
        ledger.expect_transaction("order-9", 1, "USD")


def test_a_ledger_used_from_another_thread_raises_a_storage_error(path: Path) -> None:
    errors: list[BaseException] = []
    with Ledger(path) as ledger:

        def use() -> None:
            try:
                ledger.state("order-1")
            except BaseException as err:
                errors.append(err)

        thread = threading.Thread(target=use)
        thread.start()
        thread.join()
    assert len(errors) == 1
    assert isinstance(errors[0], StorageError)


def test_an_error_while_streaming_is_a_storage_error(path: Path) -> None:
    ledger = Ledger(path)
    rows = ledger.reconcile()
    ledger.close()
    with pytest.raises(StorageError):
        next(rows)


def test_every_error_class_has_its_stable_code() -> None:
    assert StorageError("x").code == "storage_error"
    assert StorageUnavailableError("x").code == "storage_unavailable"
    assert ConflictError("order-1", ("amount_minor",)).code == "conflict"
    assert UnknownDeliveryError(1).code == "unknown_delivery"
    assert issubclass(UnknownDeliveryError, LookupError)
    assert StorageError("a message").message == "a message"
