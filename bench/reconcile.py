"""Benchmark: the full reconciliation report and summary against a bare SQL floor.

Builds a ledger with N payments and N outcomes (a realistic mix: most paid, some mismatched,
failed, pending, refunded before their success arrived, duplicated, unexpected; the rollup
tables filled once at the end, as an upgrade does), then, in a fresh child process so its peak
memory is the report's own and not the build's:

- ``floor``: a bare SQL aggregate over the same tables, one row per payment joined to its
  outcomes (``COUNT``, ``SUM``, ``MAX``), fetched as plain tuples: the least any per-payment
  report can cost;
- ``report``: ``Ledger.reconcile()`` iterated to the end, reading every row's Decimal
  amounts as the CLI does;
- ``summary``: ``Ledger.summary()``.

The phases (and the two SQL-only queries that tell where the report's time goes) alternate
round by round in the child, the order rotated each round (:mod:`bench.rounds`). It prints each
phase's median CPU time, the per-row cost (compare two N for linearity), the child's peak RSS
(``ru_maxrss``: SQLite's page cache included), and last the ratios to the floor: the medians of
the per-round ratios with their spread, the report's (the figure to keep down) at the very
end. Run::

    python -m bench.reconcile            # N = 100,000
    python -m bench.reconcile --n 1000000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from payhooks.storage import STATE_RANK, Ledger, PaymentState
from payhooks.storage.sqlite import TRIGGERS, create_views

from bench.rounds import alternate, ratios

CURRENCIES = ("CNY", "USD", "JPY", "KWD")
START = datetime(2026, 1, 1, tzinfo=UTC)

FLOOR_SQL = """
SELECT p.external_identifier, COUNT(o.id), SUM(o.amount_minor), MAX(o.paid_at)
FROM payments AS p LEFT JOIN outcomes AS o ON o.external_identifier = p.external_identifier
GROUP BY p.external_identifier"""

# The floor, with only a count leaving SQLite.
FLOOR_SQL_ONLY = (
    f"SELECT COUNT(*), MAX(n) FROM ({FLOOR_SQL.replace('COUNT(o.id)', 'COUNT(o.id) AS n')})"  # noqa: S608
)

# Every column of the view computed, only a count leaves SQLite.
VIEW_ONLY_SQL = """
SELECT COUNT(*), MAX(state), MAX(transaction_ids), MAX(received_amount_minor), MAX(opened_at)
FROM reconciliation"""


def _payment(i: int) -> tuple[object, ...]:
    subscription = i % 10 == 9
    return (
        f"order-{i:09d}",
        "subscription" if subscription else "transaction",
        2500,
        CURRENCIES[i % len(CURRENCIES)],
        1900 if subscription else None,
        (START + timedelta(seconds=i)).isoformat(),
    )


def _outcome(j: int, n: int) -> tuple[object, ...]:
    """Outcome j, mostly for payment j; the mix is fixed by j % 100."""
    bucket = j % 100
    target, status, state, amount = j, "PS", PaymentState.SUCCEEDED, 2500
    if 80 <= bucket < 85:
        amount = 2600
    elif 85 <= bucket < 90:
        status, state = "PF", PaymentState.FAILED
    elif 90 <= bucket < 93:
        status, state = "WP", PaymentState.PENDING
    elif 93 <= bucket < 95:
        status, state = "RS", PaymentState.REFUNDED
    elif 95 <= bucket < 98:
        target = n + j  # no such payment: unexpected
    elif bucket >= 98:
        target, amount = j - 1, 1900  # a second transaction: a period, or a duplicate
    currency = CURRENCIES[target % len(CURRENCIES)] if target < n else "CNY"
    paid_at = (START + timedelta(days=1, seconds=j)).isoformat()
    return (
        j + 1,
        f"ll-{j:09d}",
        f"order-{target:09d}",
        "wallet",
        status,
        str(state),
        STATE_RANK[state],
        f"{amount // 100}.{amount % 100:02d}",
        currency,
        amount,
        paid_at,
        paid_at,
    )


_EMPTY_BODY_SHA256 = hashlib.sha256(b"{}").hexdigest()


def _deliveries(n: int) -> Iterator[tuple[object, ...]]:
    now = START.isoformat()
    for j in range(n):
        yield (j + 1, f"msg_{j:09d}", now, "{}", b"{}", _EMPTY_BODY_SHA256, "processed", now)


def build(path: Path, n: int) -> float:
    """Create the ledger file with N payments, deliveries and outcomes; return seconds taken."""
    started = time.perf_counter()
    with Ledger(path) as ledger:
        conn = ledger.database.conn
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO payments (external_identifier, kind, amount_minor, currency, "
            "plan_amount_minor, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (_payment(i) for i in range(n)),
        )
        conn.executemany(
            "INSERT INTO deliveries (id, dedupe_key, received_at, headers, body, body_sha256, "
            "status, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            _deliveries(n),
        )
        # The rollup triggers would recompute a transaction and an identifier per inserted
        # outcome; for a bulk load, drop them and let create_views refill the tables once.
        for name in TRIGGERS:
            conn.execute(f"DROP TRIGGER {name}")
        conn.executemany(
            "INSERT INTO outcomes (delivery_id, transaction_id, external_identifier, flow, "
            "payment_status, state, state_rank, amount, currency, amount_minor, paid_at, "
            "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (_outcome(j, n) for j in range(n)),
        )
        create_views(ledger.database)
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    return time.perf_counter() - started


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(path: Path, rounds: int) -> dict[str, Any]:
    """The timed phases, in alternating rounds; runs in the child process."""
    results: dict[str, Any] = {}
    with Ledger(path) as ledger:
        results["open_rss_mb"] = _rss_mb()
        conn = ledger.database.conn
        for _ in conn.execute(FLOOR_SQL):  # warm the OS cache for every phase alike
            pass
        counted: dict[str, int] = {}

        def floor() -> None:
            counted["floor"] = sum(1 for _ in conn.execute(FLOOR_SQL))

        def report() -> None:
            rows = 0
            for row in ledger.reconcile():
                row.expected_amount  # noqa: B018 - what a report prints
                row.received_amount  # noqa: B018
                rows += 1
            counted["report"] = rows

        def summary() -> None:
            counted["summary"] = len(ledger.summary())

        # Where the report's time goes: the view computed by SQLite alone, no Python rows.
        def view_sql() -> None:
            conn.execute(VIEW_ONLY_SQL).fetchall()

        def floor_sql() -> None:
            conn.execute(FLOOR_SQL_ONLY).fetchall()

        phases: dict[str, Callable[[], None]] = {
            "floor": floor,
            "report": report,
            "summary": summary,
            "view_sql": view_sql,
            "floor_sql": floor_sql,
        }

        def timed(name: str, _: int) -> float:
            # CPU time, not the wall clock: the file is in the OS cache (warmed above), so
            # every phase is CPU-bound, and on a shared machine the scheduler's pauses would
            # otherwise land on whichever phase was running.
            started = time.process_time()
            phases[name]()
            return time.process_time() - started

        results["seconds"] = alternate(list(phases), rounds, timed)
        results["peak_rss_mb"] = _rss_mb()

        # The Python heap during the report, in a separate untimed pass (tracemalloc is slow).
        tracemalloc.start()
        for row in ledger.reconcile():
            row.received_amount  # noqa: B018
        results["report_heap_peak_kb"] = tracemalloc.get_traced_memory()[1] / 2**10
        tracemalloc.stop()

    results["floor_rows"] = counted["floor"]
    results["report_rows"] = counted["report"]
    results["summary_rows"] = counted["summary"]
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="payments and outcomes")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    parser.add_argument("--database", type=Path, help="keep the ledger here (default: temp)")
    parser.add_argument("--measure-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.measure_only is not None:
        print(json.dumps(measure(args.measure_only, args.rounds)))
        return

    with tempfile.TemporaryDirectory() as tmp:
        path = args.database or Path(tmp) / "bench.db"
        if path.exists():
            sys.exit(f"{path} exists; choose a new path")
        build_s = build(path, args.n)
        size_mb = path.stat().st_size / 2**20
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.reconcile",
                "--rounds",
                str(args.rounds),
                "--measure-only",
                str(path),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        r = json.loads(child.stdout)

    n = args.n
    seconds: dict[str, list[float]] = r["seconds"]
    median = {name: statistics.median(values) for name, values in seconds.items()}
    print(
        f"N = {n:,} payments, {n:,} outcomes; built in {build_s:.1f} s, file {size_mb:.0f} MB; "
        f"{args.rounds} alternating rounds"
    )
    print(
        f"floor   (bare SQL per-payment aggregate): {median['floor']:7.2f} s CPU (median of rounds)"
    )
    for phase in ("report", "summary"):
        print(f"{phase:7} {median[phase]:37.2f} s  {median[phase] / n * 1e6:6.2f} us per payment")
    print(
        f"  of which SQL alone: view {median['view_sql']:.2f} s vs floor "
        f"{median['floor_sql']:.2f} s ({ratios(seconds, 'view_sql', 'floor_sql').text()}); "
        "the rest is building Python rows"
    )
    print(
        f"rows: report {r['report_rows']:,}, floor {r['floor_rows']:,}, summary {r['summary_rows']}"
    )
    print(
        f"memory of the measuring process: peak RSS {r['peak_rss_mb']:.0f} MB "
        f"({r['open_rss_mb']:.0f} MB once open); Python heap peak during the report "
        f"{r['report_heap_peak_kb']:.0f} KiB"
    )
    print(f"summary / floor: {ratios(seconds, 'summary', 'floor').text()}")
    print(f"report / floor:  {ratios(seconds, 'report', 'floor').text()}")


if __name__ == "__main__":
    main()
