"""Does syncing the log after the write lock (the ledger's ``FULL``) beat SQLite's own ``FULL``?

Issue 17 ("fewer syncs without weaker promises"): a ``FULL`` ledger commits under SQLite's
``NORMAL``, releases the write lock and only then syncs the log itself
(:mod:`payhooks.storage.sqlite.wal_sync`), so the next writer commits while this one waits for
the disk, and one sync can cover several writers' commits. SQLite's own ``FULL`` syncs inside
the commit, under the lock: every writer waits for the one before it to reach the disk. Either
way nobody is answered before their own delivery is on disk. This measures whether the first
is faster, where the recommended server runs the receiver: several processes (gunicorn's sync
workers, one request at a time each) writing one file.

Each contender is ``--processes`` processes that each store ``--count`` distinct deliveries
through the receiver's own pipeline (:func:`payhooks.receiver.pipeline.receive_delivery`:
delivery, outcome, reconciliation, owed signals, one commit; no HTTP, no signature), each
process with its own ledger on a shared file, all started together:

- ``sync after the lock``: ``Ledger(path)``, the ledger's ``FULL``;
- ``SQLite's FULL``: a ledger over a ``sqlite_utils.Database`` this bench opens itself with
  ``PRAGMA synchronous = FULL`` (the ledger then leaves syncing to SQLite), with the same write
  lock and everything else equal.

The contenders alternate round by round (:mod:`bench.rounds`), each on a fresh file per
round, and the figure printed last is the median of the per-round ratios of deliveries per
second, with its spread. Within one process the question does not arise: a process has one
request at a time under sync workers, so only processes can share a sync. Run::

    python -m bench.group_commit                  # 4 processes x 200 deliveries, 7 rounds
    python -m bench.group_commit --processes 8
"""

from __future__ import annotations

import argparse
import multiprocessing
import sqlite3
import tempfile
import time
from collections.abc import Callable
from datetime import UTC
from multiprocessing.synchronize import Barrier
from pathlib import Path

from sqlite_utils import Database

from bench.receive import notification
from bench.rounds import alternate, at_least, ratios
from payhooks.receiver.pipeline import receive_delivery
from payhooks.storage import Ledger

AFTER_LOCK = "sync after the lock"
SQLITE_FULL = "SQLite's FULL"
CONTENDERS = (AFTER_LOCK, SQLITE_FULL)


def _open(contender: str, path: Path) -> tuple[Ledger, sqlite3.Connection | None]:
    """A ledger on ``path`` that syncs as ``contender`` does, and the connection this opened
    for it (to close after the ledger), if any."""
    if contender == AFTER_LOCK:
        return Ledger(path), None
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return Ledger(Database(conn)), conn


def _worker(contender: str, path: Path, first: int, count: int, start: Barrier) -> None:
    ledger, own_conn = _open(contender, path)
    try:
        start.wait()
        for number in range(first, first + count):
            receive_delivery(
                ledger,
                dedupe_key=f"msg_{number}",
                body=notification(number),
                headers={},
                time_zone=UTC,
                status_map=None,
            )
    finally:
        ledger.close()
        if own_conn is not None:
            own_conn.close()


def _prepare(path: Path, total: int) -> None:
    """The file, migrated, with every payment the deliveries name expected."""
    with Ledger(path) as ledger, ledger.transaction():
        for number in range(total):
            ledger.expect_transaction(f"order-{number}", 2500, "CNY")


def measure(folder: Path, processes: int, count: int) -> Callable[[str, int], float]:
    """``measure(contender, round)``: deliveries per second of one round on a fresh file."""

    def run(contender: str, round_index: int) -> float:
        path = folder / f"{round_index}-{contender.split()[0]}.db"
        _prepare(path, processes * count)
        context = multiprocessing.get_context("fork")
        start = context.Barrier(processes + 1)
        workers = [
            context.Process(target=_worker, args=(contender, path, i * count, count, start))
            for i in range(processes)
        ]
        for worker in workers:
            worker.start()
        start.wait()
        began = time.perf_counter()
        for worker in workers:
            worker.join()
        elapsed = time.perf_counter() - began
        if any(worker.exitcode != 0 for worker in workers):
            raise SystemExit(f"{contender}: a worker failed")
        with Ledger(path) as ledger:
            stored = sum(1 for _ in ledger.receiver.deliveries("processed"))
        if stored != processes * count:
            raise SystemExit(f"{contender}: {stored} of {processes * count} deliveries stored")
        return processes * count / elapsed

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=at_least(1), default=4, help="writers, as sync workers")
    parser.add_argument("--count", type=at_least(1), default=200, help="deliveries per writer")
    parser.add_argument("--rounds", type=at_least(1), default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        figures = alternate(
            CONTENDERS, args.rounds, measure(Path(folder), args.processes, args.count)
        )
    print(
        f"{args.processes} processes x {args.count} deliveries, one file, "
        f"{args.rounds} alternating rounds (deliveries per second by round):"
    )
    for name in CONTENDERS:
        rounds = " ".join(f"{figure:.0f}" for figure in figures[name])
        print(f"  {name:<20} {rounds}")
    ratio = ratios(figures, AFTER_LOCK, SQLITE_FULL)
    print(f"sync after the lock / SQLite's FULL: {ratio.text()}")


if __name__ == "__main__":
    main()
