"""The ledger's write lock (``<file>.lock``): writers wait for each other through it, give up at
the busy timeout, survive a holder's death, and fall back to SQLite's own lock where there is
none."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlite_utils import Database

from payhooks.storage import Ledger, StorageUnavailableError
from payhooks.storage.sqlite import WriteLock

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the write lock needs fcntl")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


def _write(ledger: Ledger, key: str) -> bool:
    return ledger.receiver.record_delivery(dedupe_key=key, body=b"{}", headers={}).is_new


def test_writes_take_the_lock_file_beside_the_database(path: Path) -> None:
    with Ledger(path) as ledger:
        _write(ledger, "msg_1")

    assert (path.parent / "ledger.db.lock").exists()


def test_a_write_waits_for_the_lock_and_gives_up_at_the_busy_timeout(path: Path) -> None:
    holder = WriteLock(path)
    with Ledger(path, busy_timeout_ms=40) as ledger:
        holder.acquire(time.monotonic() + 1)
        try:
            with pytest.raises(StorageUnavailableError) as exc_info:
                _write(ledger, "msg_1")
        finally:
            holder.close()
        assert exc_info.value.code == "storage_unavailable"
        assert "40 ms" in exc_info.value.message
        assert _write(ledger, "msg_1")  # nothing was stored by the refused write
    with Ledger(path) as check:
        assert [d.dedupe_key for d in check.receiver.deliveries()] == ["msg_1"]


def test_a_waiting_writer_goes_on_once_the_other_commits(path: Path) -> None:
    inside = threading.Event()
    results: list[bool] = []

    def wait_then_write() -> None:  # a ledger per thread, as the receiver keeps them
        with Ledger(path, busy_timeout_ms=10_000) as second:
            inside.wait(timeout=10)
            results.append(_write(second, "msg_2"))

    with Ledger(path) as first:
        waiter = threading.Thread(target=wait_then_write)
        waiter.start()
        with first.transaction():
            _write(first, "msg_1")
            inside.set()
            time.sleep(0.05)  # the waiter is polling the lock meanwhile
            waiting = list(results)
        waiter.join(timeout=10)

        assert waiting == []
        assert results == [True]
        assert {d.dedupe_key for d in first.receiver.deliveries()} == {"msg_1", "msg_2"}


def _hold_until_killed(lock_path: str, ready: Any) -> None:
    lock = WriteLock(lock_path)
    lock.acquire(time.monotonic() + 10)
    ready.set()
    time.sleep(60)


def test_the_lock_of_a_killed_process_is_released_by_the_kernel(path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    child = context.Process(target=_hold_until_killed, args=(str(path), ready))
    child.start()
    try:
        assert ready.wait(timeout=30)
        with Ledger(path, busy_timeout_ms=30) as ledger:
            with pytest.raises(StorageUnavailableError):
                _write(ledger, "msg_1")
            os.kill(child.pid or 0, signal.SIGKILL)
            child.join(timeout=30)
            assert _write(ledger, "msg_1")
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def _try_inherited(lock: WriteLock, results: Any) -> None:
    try:
        lock.acquire(time.monotonic() + 0.05)
    except TimeoutError:
        results.put("waited")
    else:
        results.put("shared the parent's lock")


def test_a_forked_child_does_not_share_its_parents_lock(path: Path) -> None:
    lock = WriteLock(path)
    lock.acquire(time.monotonic() + 1)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_try_inherited, args=(lock, results))
    try:
        child.start()
        answer = results.get(timeout=30)
        child.join(timeout=30)
    finally:
        lock.close()

    assert answer == "waited"


def test_without_a_usable_lock_file_sqlite_alone_serializes_writers(path: Path) -> None:
    (path.parent / "ledger.db.lock").mkdir()  # cannot be opened as the lock file
    with Ledger(path) as ledger, Ledger(path, busy_timeout_ms=30) as other:
        with ledger.transaction():
            _write(ledger, "msg_1")
            with pytest.raises(StorageUnavailableError):
                _write(other, "msg_2")
        assert _write(other, "msg_2")


@pytest.mark.parametrize(
    "opened",
    [
        lambda path, memory: Ledger(path, write_lock=False),
        lambda path, memory: Ledger(memory),
    ],
    ids=["switched-off", "in-memory"],
)
def test_no_lock_file_when_switched_off_or_in_memory(path: Path, opened: Any) -> None:
    with closing(Database(memory=True)) as memory, opened(path, memory) as ledger:
        _write(ledger, "msg_1")

    assert not (path.parent / "ledger.db.lock").exists()


def test_a_callers_database_on_a_file_takes_the_same_lock(path: Path) -> None:
    holder = WriteLock(path)
    db = Database(path)
    try:
        with Ledger(db, busy_timeout_ms=30) as ledger:
            holder.acquire(time.monotonic() + 1)
            with pytest.raises(StorageUnavailableError):
                _write(ledger, "msg_1")
    finally:
        holder.close()
        db.close()
