"""Group commit for ``FULL``: one writer's sync of the log serves the commits made before it.

A commit takes a ticket (:class:`storage.commit_counters.CommitCounters`, in the lock file)
while it holds the write lock; :meth:`storage.wal_sync.WalSync.sync` returns without syncing
only when a sync that began after that commit has finished. These tests pin when a sync is
skipped and when it is not, that tickets follow commits one at a time across processes, and
that a lock file payhooks did not write never makes a sync look done.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from storage import Ledger
from storage.commit_counters import MAGIC, CommitCounters
from storage.wal_sync import WalSync
from storage.write_lock import LOCK_SUFFIX, WriteLock

pytestmark = pytest.mark.skipif(os.name != "posix", reason="group commit needs flock and mmap")


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A database file with a write-ahead log beside it: the tests drive the syncs directly
    (what is in the files does not matter to a sync)."""
    path = tmp_path / "ledger.db"
    path.write_bytes(b"a database")
    (tmp_path / "ledger.db-wal").write_bytes(b"a log")
    return path


def _syncer(database: Path) -> WalSync:
    return WalSync(database, counters=str(database) + LOCK_SUFFIX)


def test_a_commit_that_another_writers_later_sync_covered_is_not_synced_again(
    database: Path,
) -> None:
    first, second = _syncer(database), _syncer(database)
    try:
        early = first.ticket()
        late = second.ticket()
        assert early is not None
        assert late is not None
        assert late == early + 1

        assert second.sync(late) is True  # began after both commits: covers both
        assert first.sync(early) is False
    finally:
        first.close()
        second.close()


def test_a_commit_after_the_last_sync_is_synced(database: Path) -> None:
    first, second = _syncer(database), _syncer(database)
    try:
        covered = first.ticket()
        assert covered is not None
        assert first.sync(covered) is True
        later = second.ticket()
        assert later is not None

        assert first.sync(later) is True  # nobody synced since that commit
        assert second.sync(later) is False
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("ticket", [None, 1])
def test_without_shared_counters_every_sync_syncs(database: Path, ticket: int | None) -> None:
    alone = WalSync(database)
    try:
        assert alone.ticket() is None
        assert alone.sync(ticket) is True
        assert alone.sync(ticket) is True
    finally:
        alone.close()


@pytest.mark.parametrize(
    "content",
    [b"", b"\xff" * 300, b"not ours" + b"\x00" * 400],
    ids=["empty lock file of an older payhooks", "all bits set", "someone else's bytes"],
)
def test_a_lock_file_payhooks_did_not_write_starts_from_zero(
    database: Path, content: bytes
) -> None:
    Path(str(database) + LOCK_SUFFIX).write_bytes(content)
    syncer = _syncer(database)
    try:
        assert syncer.ticket() == 1
        assert syncer.sync(1) is True  # a stray "synced" count must never skip a sync
    finally:
        syncer.close()
    assert Path(str(database) + LOCK_SUFFIX).read_bytes().startswith(MAGIC)


def test_a_lock_file_that_cannot_be_mapped_means_a_sync_per_commit(tmp_path: Path) -> None:
    database = tmp_path / "ledger.db"
    database.write_bytes(b"")
    (tmp_path / "ledger.db.lock").mkdir()  # a folder where the lock file should be
    syncer = _syncer(database)
    try:
        assert syncer.ticket() is None
        assert syncer.sync(None) is True
    finally:
        syncer.close()


def test_a_full_ledger_takes_a_ticket_per_write_and_syncs_up_to_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger(path) as ledger:
        for number in range(5):
            ledger.record_delivery(dedupe_key=f"msg_{number}", body=b"{}", headers={})
        counters = CommitCounters(str(path) + LOCK_SUFFIX)
        try:
            written = counters.committed()
            assert written >= 5  # and the migrations' own writes, when they took the lock
            assert counters.synced() == written
        finally:
            counters.close()


@pytest.mark.parametrize("options", [{"synchronous": "NORMAL"}, {"write_lock": False}])
def test_only_a_full_ledger_with_the_write_lock_counts_commits(
    tmp_path: Path, options: dict[str, object]
) -> None:
    path = tmp_path / "ledger.db"
    with Ledger(path, **options) as ledger:  # type: ignore[arg-type]
        ledger.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
    lock_file = Path(str(path) + LOCK_SUFFIX)
    assert not lock_file.exists() or not lock_file.read_bytes().startswith(MAGIC)


# -- several processes -------------------------------------------------------------------------

PROCESSES = 4
COMMITS = 150


def committer(database: str, start: float, report: str) -> None:
    """Commit (a ticket under the write lock) and sync, ``COMMITS`` times; write down every
    ticket, how many calls synced, and any ticket found uncovered after its sync returned."""
    lock = WriteLock(database)
    syncer = WalSync(database, counters=database + LOCK_SUFFIX)
    counters = CommitCounters(database + LOCK_SUFFIX)
    tickets, synced, uncovered = [], 0, []
    while time.time() < start:
        time.sleep(0.001)
    for _ in range(COMMITS):
        lock.acquire(time.monotonic() + 30)
        ticket = syncer.ticket()
        lock.release()
        assert ticket is not None
        synced += syncer.sync(ticket)
        if counters.synced() < ticket:  # the count only grows while the log stays the same
            uncovered.append(ticket)
        tickets.append(ticket)
    Path(report).write_text(f"{synced}\n{' '.join(map(str, tickets))}\n{uncovered}")


def test_processes_get_one_ticket_per_commit_and_each_sync_covers_its_own(
    database: Path,
) -> None:
    context = multiprocessing.get_context("spawn")
    start = time.time() + 1.5
    reports = [database.parent / f"report-{n}.txt" for n in range(PROCESSES)]
    workers = [
        context.Process(target=committer, args=(str(database), start, str(report)))
        for report in reports
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0

    tickets: list[int] = []
    syncs = 0
    for report in reports:
        count, numbers, uncovered = report.read_text().splitlines()
        syncs += int(count)
        tickets.extend(int(number) for number in numbers.split())
        assert uncovered == "[]"
    assert sorted(tickets) == list(range(1, PROCESSES * COMMITS + 1))  # none lost, none twice
    assert 1 <= syncs <= PROCESSES * COMMITS
