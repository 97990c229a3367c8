"""Four real processes writing one new ledger file at once: every write lands exactly once.

The processes start with ``spawn`` (nothing inherited), wait on a barrier, then all open the
same brand-new file, so they also race through the migration. Each makes 500 writes, 2,000
in all: registrations, deliveries and outcomes that the others repeat (duplicates by design)
and deliveries of its own. A write either succeeds or raises ``StorageError``; anything else
(a bare ``sqlite3.OperationalError`` above all) crashes the worker and fails the test.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path
from typing import Any

from payhooks.storage import DeliveryStatus, Ledger, Outcome, ReconciliationState, StorageError
from payhooks.storage.sqlite import SCHEMA_VERSION
from tests.support.factories import make_outcome

WORKERS = 4
ROUNDS = 125  # four writes a round: 500 a worker, 2,000 in all


def _outcome(i: int) -> Outcome:
    return make_outcome(transaction_id=f"ll-{i}", external_identifier=f"order-{i}")


def worker(index: int, path: str, barrier: Any, report: str) -> None:
    """One process: open the file with the others, write, and report what each write did."""
    results: dict[str, list[Any]] = {"expect": [], "shared": [], "own": [], "outcome": []}
    errors: list[str] = []
    barrier.wait()
    with Ledger(path, busy_timeout_ms=60_000) as ledger:
        for i in range(ROUNDS):
            try:
                results["expect"].append([i, ledger.expect_transaction(f"order-{i}", 2500, "CNY")])
            except StorageError as err:
                errors.append(err.code)
            try:
                shared = ledger.receiver.record_delivery(
                    dedupe_key=f"shared-{i}", body=b"{}", headers={}
                )
                results["shared"].append([i, shared.is_new])
            except StorageError as err:
                errors.append(err.code)
            try:
                own = ledger.receiver.record_delivery(
                    dedupe_key=f"own-{index}-{i}", body=b"{}", headers={}
                )
                results["own"].append([i, own.id])
                recorded = ledger.receiver.record_outcome(_outcome(i), delivery_id=own.id)
                results["outcome"].append([i, recorded.is_new, recorded.delivery_status.value])
            except StorageError as err:
                errors.append(err.code)
    Path(report).write_text(json.dumps({"results": results, "errors": errors}))


def test_four_processes_writing_one_new_file_lose_and_double_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WORKERS)
    path = tmp_path / "shared.db"
    reports = [tmp_path / f"worker-{n}.json" for n in range(WORKERS)]
    processes = [
        context.Process(target=worker, args=(n, str(path), barrier, str(reports[n])))
        for n in range(WORKERS)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * WORKERS

    done = [json.loads(report.read_text()) for report in reports]
    # With a long busy timeout no write should give up; had one, it must be a StorageError.
    assert [d["errors"] for d in done] == [[]] * WORKERS
    writes = sum(len(r) for d in done for r in d["results"].values())
    assert writes == WORKERS * ROUNDS * 4

    def new_per_round(kind: str) -> list[int]:
        counts = [0] * ROUNDS
        for d in done:
            for i, is_new, *_ in d["results"][kind]:
                counts[i] += bool(is_new)
        return counts

    # Each shared write was new for exactly one process.
    assert new_per_round("expect") == [1] * ROUNDS
    assert new_per_round("shared") == [1] * ROUNDS
    assert new_per_round("outcome") == [1] * ROUNDS

    with Ledger(path) as ledger:
        conn = ledger.database.conn
        assert ledger.schema_version == SCHEMA_VERSION
        assert conn.execute("SELECT COUNT(*) FROM _sqlite_migrations").fetchone() == (
            SCHEMA_VERSION,
        )
        assert conn.execute("SELECT COUNT(*) FROM payments").fetchone() == (ROUNDS,)
        assert conn.execute("SELECT COUNT(*) FROM outcomes").fetchone() == (ROUNDS,)
        assert conn.execute(
            "SELECT COUNT(*), MIN(attempts), MAX(attempts) FROM deliveries "
            "WHERE dedupe_key LIKE 'shared-%'"
        ).fetchone() == (ROUNDS, WORKERS, WORKERS)
        own = dict(
            conn.execute(
                "SELECT status, COUNT(*) FROM deliveries WHERE dedupe_key LIKE 'own-%' "
                "GROUP BY status"
            ).fetchall()
        )
        assert own == {
            DeliveryStatus.PROCESSED.value: ROUNDS,
            DeliveryStatus.DUPLICATE.value: ROUNDS * (WORKERS - 1),
        }
        assert {row.state for row in ledger.reconcile()} == {ReconciliationState.PAID}


def test_threads_each_with_their_own_ledger_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    Ledger(path).close()
    new_counts: list[int] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            with Ledger(path, busy_timeout_ms=30_000) as ledger:
                new = 0
                for i in range(50):
                    new += ledger.expect_transaction(f"order-{i}", 2500, "CNY")
                    delivery = ledger.receiver.record_delivery(
                        dedupe_key=f"k-{i}", body=b"", headers={}
                    )
                    ledger.receiver.record_outcome(_outcome(i), delivery_id=delivery.id)
                new_counts.append(new)
        except BaseException as err:  # collected: a thread's exception would be lost
            failures.append(err)

    threads = [threading.Thread(target=run) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert sum(new_counts) == 50
    with Ledger(path) as ledger:
        assert [row.state for row in ledger.reconcile()] == [ReconciliationState.PAID] * 50


OPENERS = 8
NEW_FILES = 10


def opener(directory: str, barrier: Any, report: str) -> None:
    """Open each of the new files at the same moment as the other processes, and write once."""
    outcomes: list[str] = []
    for n in range(NEW_FILES):
        barrier.wait()
        try:
            with Ledger(Path(directory) / f"new-{n}.db", busy_timeout_ms=60_000) as ledger:
                ledger.expect_transaction("order-1", 2500, "CNY")
            outcomes.append("ok")
        except StorageError as err:
            outcomes.append(err.message)
    Path(report).write_text(json.dumps(outcomes))


def test_many_processes_opening_new_files_at_once_all_get_in(tmp_path: Path) -> None:
    # Switching a new file to WAL can fail at once with SQLITE_BUSY while other connections
    # open it; the ledger waits for that as it waits for any lock, up to the busy timeout.
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(OPENERS)
    reports = [tmp_path / f"opener-{n}.json" for n in range(OPENERS)]
    processes = [
        context.Process(target=opener, args=(str(tmp_path), barrier, str(report)))
        for report in reports
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * OPENERS
    assert [json.loads(r.read_text()) for r in reports] == [["ok"] * NEW_FILES] * OPENERS
    for n in range(NEW_FILES):
        with Ledger(tmp_path / f"new-{n}.db") as ledger:
            assert ledger.database.conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            assert ledger.state("order-1") is ReconciliationState.PENDING
