"""Benchmark: ``Ledger.vitals`` on a large SQLite ledger: its cost must follow the last day's
traffic, not the ledger's size.

Builds (or reuses, with ``--database``) the reconciliation benchmark's ledger of N payments,
deliveries and outcomes (:func:`bench.reconcile.build`, ``--synced``), then spreads the
deliveries' ``received_at`` evenly over ``--days`` days ending now, marks every
``--failed-every``-th one failed, and leaves one outcome's signals owed: a ledger that has run
for a while. Then it reads the vitals ``--rounds`` times and prints each read's wall time and
their median, with the figures read (so a reader can see the windows held what they should).
Figures, never pass or fail. Run::

    python -m bench.vitals --n 1000000 --database /tmp/vitals.db
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.reconcile import build
from payhooks.storage import Ledger

#: The partial index the vitals read the mismatches through (created here when a ledger was
#: built before it was part of the schema).
MISMATCH_INDEX_SQL = (
    "CREATE INDEX IF NOT EXISTS payment_states_mismatches ON payment_states (state, updated_at) "
    "WHERE state IN ('amount_mismatch', 'currency_mismatch', 'duplicate_payment', 'unexpected',"
    "\n        'unknown_status')"
)


def spread(path: Path, days: int, failed_every: int) -> int:
    """Give the deliveries times ``days`` apart end to end, in id order, ending now; mark every
    ``failed_every``-th one ``invalid_payload``. How many deliveries."""
    with Ledger(path) as ledger:
        conn = ledger.database.conn
        (count,) = conn.execute("SELECT count(*) FROM deliveries").fetchone()
        end = datetime.now(UTC)
        step = timedelta(days=days) / max(count, 1)
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "UPDATE deliveries SET received_at = ? WHERE id = ?",
            (((end - step * (count - n)).isoformat(), n) for n in range(1, count + 1)),
        )
        conn.execute(
            "UPDATE deliveries SET status = 'invalid_payload', error = 'bench' WHERE id % ? = 0",
            (failed_every,),
        )
        conn.execute(MISMATCH_INDEX_SQL)
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    return int(count)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="payments and deliveries")
    parser.add_argument("--database", type=Path, required=True, help="the ledger (reused)")
    parser.add_argument("--days", type=int, default=30, help="the deliveries' time span")
    parser.add_argument("--failed-every", type=int, default=50, help="one failed in so many")
    parser.add_argument("--rounds", type=int, default=7, help="reads timed")
    args = parser.parse_args(argv)
    if not args.database.exists():
        started = time.perf_counter()
        build(args.database, args.n, synced=True)
        print(f"built {args.n:,} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    deliveries = spread(args.database, args.days, args.failed_every)
    with Ledger(args.database) as ledger:
        times = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            vitals = ledger.vitals()
            times.append(time.perf_counter() - started)
    print(f"{deliveries:,} deliveries over {args.days} days; one in {args.failed_every} failed")
    print(f"last hour: {vitals.last_hour}; last day: {vitals.last_day}")
    print(f"mismatches: {vitals.mismatch_total}; drift rows: {vitals.drift_total}")
    print("reads (ms): " + ", ".join(f"{t * 1000:.1f}" for t in times))
    print(f"median: {statistics.median(times) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
