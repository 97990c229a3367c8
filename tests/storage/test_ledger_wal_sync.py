"""``payhooks.storage.sqlite.wal_sync.WalSync``: the descriptor a ``FULL`` ledger syncs its
commits through follows the write-ahead log it belongs to, and goes with the ledger."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from payhooks.storage import Ledger, StorageUnavailableError
from payhooks.storage.sqlite import WalReplacedError, WalSync, wal_sync

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="reads the open descriptors from /proc"
)


def _descriptors_of(path: Path) -> list[str]:
    """Where this process's descriptors on ``path`` point (a replaced file: ``(deleted)``)."""
    targets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            targets.append(target)
    return targets


@pytest.mark.parametrize("replace", [True, False], ids=["replaced", "deleted"])
def test_a_log_deleted_or_replaced_after_it_was_opened_is_refused(
    tmp_path: Path, replace: bool
) -> None:
    """SQLite keeps writing to the log it opened; one gone from the path would be lost in a
    crash. (It used to be followed silently: issue 13, a deleted -wal went unnoticed.)"""
    database = tmp_path / "ledger.db"
    wal = tmp_path / "ledger.db-wal"
    database.write_bytes(b"")
    wal.write_bytes(b"first log")
    sync = WalSync(database)
    sync.sync()
    wal.unlink()
    if replace:
        wal.write_bytes(b"second log")

    try:
        with pytest.raises(WalReplacedError):
            sync.sync()
        with pytest.raises(WalReplacedError):
            sync.check()
    finally:
        sync.close()
    assert _descriptors_of(wal) == []


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_a_ledger_whose_log_was_deleted_refuses_the_next_write(
    tmp_path: Path, synchronous: str
) -> None:
    with Ledger(tmp_path / "ledger.db", synchronous=synchronous) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        (tmp_path / "ledger.db-wal").unlink()

        with pytest.raises(StorageUnavailableError) as refused:
            ledger.expect_transaction("order-2", 2500, "CNY")

    assert "write-ahead log" in refused.value.message
    assert "was deleted or replaced" in refused.value.message


def test_without_a_log_the_database_itself_is_synced(tmp_path: Path) -> None:
    database = tmp_path / "ledger.db"
    database.write_bytes(b"")
    sync = WalSync(database)

    sync.sync()

    assert _descriptors_of(database) == []


def test_a_missing_database_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        WalSync(tmp_path / "nowhere.db").sync()


def test_a_full_ledger_closes_its_descriptor_of_the_log_with_it(tmp_path: Path) -> None:
    wal = tmp_path / "ledger.db-wal"
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
        during = len(_descriptors_of(wal))

    assert during == 2  # SQLite's and the ledger's own
    assert _descriptors_of(wal) == []


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every descriptor a ledger syncs from now on (the real sync still runs)."""
    seen: list[int] = []
    real_sync = wal_sync._sync

    def counting_sync(fd: int) -> None:
        seen.append(fd)
        real_sync(fd)

    monkeypatch.setattr(wal_sync, "_sync", counting_sync)
    return seen


def test_a_full_ledger_syncs_every_delivery_before_returning(
    tmp_path: Path, syncs: list[int]
) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
        assert len(syncs) == 1
        ledger.receiver.record_delivery(dedupe_key="msg_2", body=b"{}", headers={})
        assert len(syncs) == 2


def test_a_rejected_delivery_costs_no_sync_to_disk(tmp_path: Path, syncs: list[int]) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        for _ in range(3):
            ledger.receiver.record_rejected(
                reason="invalid_signature", body=b"{}", remote_addr=None
            )

        assert syncs == []
        assert ledger.database.execute("SELECT COUNT(*) FROM rejected_deliveries").fetchone() == (
            3,
        )
