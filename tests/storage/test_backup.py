"""``backup_ledger``: it never overwrites a file, even one created while the copy is made, the
copy is its owner's only, and a copy that fills the disk leaves nothing behind."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from payhooks.storage import Ledger, StorageError, backup_ledger
from tests.support.disks import small_tmpfs
from tests.support.retention import fill_old_deliveries

pytestmark = pytest.mark.sqlite_only


@pytest.fixture
def source(ledger: Ledger, database: Path) -> Path:
    """A ledger holding one delivery."""
    ledger.receiver.record_delivery(dedupe_key="k", body=b"{}", headers={})
    return database


@pytest.fixture
def lax_umask() -> Iterator[None]:
    """A umask that leaves new files readable by everyone (0644), as many systems have."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def test_a_file_created_while_the_copy_is_made_is_not_overwritten(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "backup.db"
    real_fsync = os.fsync

    def fsync_then_someone_writes_dest(handle: int) -> None:
        # The copy is synced just before it is put in place: another writer gets there first.
        real_fsync(handle)
        if not dest.exists():
            dest.write_bytes(b"someone else's")

    monkeypatch.setattr(os, "fsync", fsync_then_someone_writes_dest)

    with pytest.raises(StorageError, match="exists already"):
        backup_ledger(source, dest)

    assert dest.read_bytes() == b"someone else's"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".backup")) == []


@pytest.mark.usefixtures("lax_umask")
def test_the_copy_is_readable_by_its_owner_only(source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "backup.db"

    backup_ledger(source, dest)

    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    with Ledger(dest, create=False) as copy:
        assert copy.receiver.count_deliveries() == 1


def test_a_backup_that_fills_a_real_disk_leaves_nothing_behind(database: Path) -> None:
    fill_old_deliveries(database, 400, body_size=8000)  # about 3.5 MB
    with small_tmpfs("1m") as disk:
        with pytest.raises(StorageError) as exc_info:
            backup_ledger(database, disk / "backup.db")

        assert "full" in exc_info.value.message
        assert list(disk.iterdir()) == []  # neither the copy nor its journal
    with Ledger(database, create=False) as source:
        assert source.receiver.count_deliveries() == 400
