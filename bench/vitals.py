"""Benchmark: ``Ledger.vitals`` on a large SQLite ledger: its cost must follow the last day's
traffic, not the ledger's size.

Builds a ledger straight in SQL (:func:`build`): N deliveries of a 400-byte body spread evenly
over ``--days`` days ending now, one in ``--failed-every`` marked ``invalid_payload``; N
payments' reconciliation rows, one in 100 ``amount_mismatch`` and one in 200 ``unexpected``;
one complete sync that listed N transactions, one in 1000 with drift. (Not the reconciliation
benchmark's builder: that one computes every row by the ledger's rules, for minutes; these
figures only need the tables' sizes and mix.) Then it reads the vitals ``--rounds`` times and
prints each read's wall time, their median and the figures read. Figures, never pass or fail.
With ``--start-postgres`` (or ``--postgres URL``) the same ledger is then copied into
PostgreSQL (``payhooks copy-ledger``, then ``VACUUM (ANALYZE)``) and the reads timed there
too. Run::

    python -m bench.vitals --n 1000000 --database /tmp/vitals.db [--start-postgres]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.postgres import add_arguments, postgres_database, settings
from payhooks.storage import Ledger, copy_ledger

_BODY = b"{" + b" " * 398 + b"}"


def _deliveries(n: int, days: int, failed_every: int) -> Iterator[tuple[object, ...]]:
    end = datetime.now(UTC)
    step = timedelta(days=days) / n
    for i in range(1, n + 1):
        at = (end - step * (n - i)).isoformat()
        failed = i % failed_every == 0
        status, error = ("invalid_payload", "bench") if failed else ("processed", None)
        yield (i, f"msg_{i:09d}", at, "{}", _BODY, "0" * 64, status, error, at)


def _states(n: int, at: str) -> Iterator[tuple[object, ...]]:
    for i in range(n):
        state = "amount_mismatch" if i % 100 == 0 else "paid"
        kind: str | None = "transaction"
        if i % 200 == 1:
            state, kind = "unexpected", None
        yield (f"order-{i:09d}", kind, state, "CNY", at, "[]", at)


def _listed(n: int, at: str) -> Iterator[tuple[object, ...]]:
    for i in range(n):
        drift = "missed_notification" if i % 1000 == 0 else None
        yield (f"tx-{i:09d}", f"order-{i:09d}", "PAID", "succeeded", 3, at, at, 1, drift)


def build(path: Path, n: int, days: int, failed_every: int) -> None:
    """The ledger described above, in one transaction."""
    at = datetime.now(UTC).isoformat()
    with Ledger(path) as ledger:
        conn = ledger.database.conn
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO deliveries (id, dedupe_key, received_at, headers, body, body_sha256, "
            "status, error, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _deliveries(n, days, failed_every),
        )
        conn.executemany(
            "INSERT INTO payment_states (external_identifier, kind, state, currency, "
            "refunded_amount_minor, charged_back_amount_minor, opened_at, periods_paid, "
            "transaction_ids, unknown_outcomes, refused_deliveries, conflicting_deliveries, "
            "updated_at) VALUES (?, ?, ?, ?, 0, 0, ?, 1, ?, 0, 0, 0, ?)",
            _states(n, at),
        )
        conn.execute(
            "INSERT INTO sync_runs (id, started_at, expected_before, status, updated_at, "
            "finished_at) VALUES (1, ?, ?, 'complete', ?, ?)",
            (at, at, at, at),
        )
        conn.executemany(
            "INSERT INTO service_transactions (transaction_id, external_identifier, status, "
            "state, state_rank, first_seen_at, last_seen_at, sync_run, drift) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _listed(n, at),
        )
        conn.execute("COMMIT")
        conn.execute("ANALYZE")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="payments and deliveries")
    parser.add_argument("--database", type=Path, required=True, help="the ledger (reused)")
    parser.add_argument("--days", type=int, default=30, help="the deliveries' time span")
    parser.add_argument("--failed-every", type=int, default=50, help="one failed in so many")
    parser.add_argument("--rounds", type=int, default=7, help="reads timed")
    add_arguments(parser, "time the reads")
    args = parser.parse_args(argv)
    if not args.database.exists():
        started = time.perf_counter()
        build(args.database, args.n, args.days, args.failed_every)
        print(f"built {args.n:,} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    report(args.database, "SQLite", args.rounds)
    with postgres_database(args) as url:
        if url is not None:
            started = time.perf_counter()
            copy_ledger(args.database, url)
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM (ANALYZE)")  # as autovacuum would have, by then
            print(f"copied in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            report(url, settings(url), args.rounds)


def report(target: Path | str, where: str, rounds: int) -> None:
    """Time ``rounds`` reads of the vitals on ``target``; print them and the figures."""
    with Ledger(target) as ledger:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            vitals = ledger.vitals()
            times.append(time.perf_counter() - started)
    print(f"{where}:")
    print(f"  last hour: {vitals.last_hour}; last day: {vitals.last_day}")
    print(f"  mismatches: {vitals.mismatch_total}; drift rows: {vitals.drift_total}")
    print("  reads (ms): " + ", ".join(f"{t * 1000:.1f}" for t in times))
    print(f"  median: {statistics.median(times) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
