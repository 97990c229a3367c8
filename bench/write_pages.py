"""Pages each delivery writes to SQLite's write-ahead log, by b-tree, and commits per delivery.

Issue 17 ("a cheaper write per delivery"): every delivery is committed durably, and what a
commit costs grows with the pages it writes. Every page a transaction changes is appended to
the log as one frame at its commit (and later copied into the database by a checkpoint), so
the frames per delivery are the receiver's write volume, and the b-trees they belong to (a
table, or one of its indexes) say which part of the schema each frame pays for.

The method is :func:`bench.receive.wal_pages`'s, taken further: a ``TRUNCATE`` checkpoint
empties the log, then a read transaction is held open while the deliveries are sent, so no
checkpoint can copy the log back and restart it. Every frame written meanwhile stays in the
log file, which is then read here frame by frame: the page number in each frame's header gives
its b-tree (``dbstat``, read after the run), and a non-zero "database size after commit" marks
the last frame of a commit. The deliveries go through the Flask test client in this process
(verify, store, parse, record, reconcile, signal), each a distinct signed notification for an
expected payment: every one is a full write, as in :mod:`bench.receive`. A few deliveries are
sent before the count starts, so the schema's creation and the first pages of each table are
not counted. Each answer is closed, as a WSGI server closes it: the receiver then runs the
delivery's signals (``response.call_on_close``) and commits that they were sent, in commits of
their own that are counted with the delivery's.

A page freed and reused by another b-tree during the run is named after its last owner; the
count per b-tree is exact otherwise. The figures belong to the schema, not the machine: they
do not change from run to run.

Run by hand::

    python -m bench.write_pages               # 300 deliveries
    python -m bench.write_pages --count 1000
"""

from __future__ import annotations

import argparse
import sqlite3
import struct
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from flask import Flask

from bench.receive import Job, post, prepare, stop_receiver
from bench.rounds import at_least
from payhooks.receiver import PayHooks, signals
from payhooks.verify import generate_keypair

#: Deliveries sent before the count starts: the file, its tables and first pages are made.
WARMUP = 20
_WAL_HEADER = 32
_FRAME_HEADER = 24


@dataclass(frozen=True)
class WalCount:
    """What a run added to the log: the frames by b-tree name, and the commits."""

    deliveries: int
    frames: Counter[str]
    commits: int

    @property
    def frames_per_delivery(self) -> float:
        return sum(self.frames.values()) / self.deliveries

    @property
    def commits_per_delivery(self) -> float:
        return self.commits / self.deliveries


def read_wal(wal: bytes) -> tuple[list[int], int]:
    """The page number of each frame in a write-ahead log's bytes, and how many frames end a
    commit (their "database size after commit" is not zero: the SQLite file format, 4.1)."""
    (page_size,) = struct.unpack(">I", wal[8:12])
    frame_size = _FRAME_HEADER + page_size
    pages, commits = [], 0
    for start in range(_WAL_HEADER, len(wal) - frame_size + 1, frame_size):
        page, size_after_commit = struct.unpack(">II", wal[start : start + 8])
        pages.append(page)
        commits += size_after_commit != 0
    return pages, commits


def btree_names(database: Path) -> dict[int, str]:
    """Each page's b-tree (table or index name), from SQLite's ``dbstat`` table."""
    conn = sqlite3.connect(database)
    try:
        return dict(conn.execute("SELECT pageno, name FROM dbstat"))
    finally:
        conn.close()


def _returning_receiver(number: int) -> Callable[..., None]:
    """A merchant's receiver that returns at once (the README's ``ship`` without its file),
    named as a function of the merchant's module would be."""

    def receiver(sender: Flask, **extra: object) -> None:
        return None

    receiver.__qualname__ = f"create_app.<locals>.returning_receiver_{number}"
    receiver.__module__ = "shop"
    return receiver


def count_writes(folder: Path, count: int, receivers: int = 0) -> WalCount:
    """Send ``WARMUP`` then ``count`` deliveries to a new ledger in ``folder``, counting the
    log frames of the last ``count`` only; with ``receivers`` returning receivers connected to
    each signal, so what recording their runs costs is counted."""
    database = folder / "ledger.db"
    keys = generate_keypair("standard-webhooks")
    jobs: list[Job] = prepare([database], 0, WARMUP + count, keys.signing_key)
    app = Flask("write_pages", instance_path=str(folder))
    app.config.update(PAYHOOKS_DATABASE=str(database), PAYHOOKS_SECRETS=[keys.verifying_key])
    PayHooks(app)
    for number in range(receivers):
        for signal in (signals.notification_received, signals.payment_succeeded):
            signal.connect(_returning_receiver(number), sender=app, weak=False)
    client = app.test_client()
    for body, headers in jobs[:WARMUP]:
        post(client, body, headers)
    pin = sqlite3.connect(database, isolation_level=None, timeout=30)
    try:
        busy, log, _ = pin.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy or log != 0:
            raise RuntimeError(f"{database}: the write-ahead log could not be emptied")
        pin.execute("BEGIN")
        pin.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # the read starts here
        for body, headers in jobs[WARMUP:]:
            answer = post(client, body, headers)
            if answer.status_code != 200:
                raise RuntimeError(f"a delivery was answered {answer.status_code}: {answer.data!r}")
        pages, commits = read_wal((folder / "ledger.db-wal").read_bytes())
        pin.execute("COMMIT")
    finally:
        pin.close()
        stop_receiver(app)
    names = btree_names(database)
    frames = Counter(names.get(page, f"page {page}") for page in pages)
    return WalCount(count, frames, commits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "count", nargs="?", type=at_least(1), help="deliveries counted (same as --count)"
    )
    parser.add_argument("--count", dest="count_option", type=at_least(1), default=300)
    parser.add_argument(
        "--receivers",
        type=at_least(0),
        default=0,
        help="returning receivers connected to notification_received and payment_succeeded",
    )
    args = parser.parse_args(argv)
    count = args.count if args.count is not None else args.count_option
    with tempfile.TemporaryDirectory() as folder:
        result = count_writes(Path(folder), count, args.receivers)
    print(
        f"{result.frames_per_delivery:.2f} WAL frames per delivery, "
        f"{result.commits_per_delivery:.2f} commits per delivery ({count} deliveries, "
        f"{args.receivers} receiver(s) per signal)"
    )
    for name, frames in sorted(result.frames.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {frames / count:6.2f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
