"""Benchmark: ``payhooks sync`` over N transactions, its time and its peak memory.

The sandbox runs in a child process (seeded with N paid card transactions, sending no
notification), so the sync's process holds only the sync: the ledger expects every one of the N
payments and no notification ever came, so every transaction is a ``missed_notification``, the
most drift a sync can write and count. Pages of 100 (the sandbox's largest), over HTTP on
loopback, each page committed with its cursor (``synchronous=NORMAL``: the bench measures the
sync, not the disk). It prints the time, the rate, the peak RSS of the sync's process
(``ru_maxrss``: the interpreter and SQLite's page cache included) and, with ``--trace``, the
peak of Python's allocations during the sync (tracemalloc; slower). Run::

    python -m bench.sync                  # N = 1,000,000
    python -m bench.sync --n 10000 --trace
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from bench.rounds import at_least
from payhooks.service.client import ServiceClient
from payhooks.service.sync import sync_transactions
from payhooks.storage import Ledger

MERCHANT = "sandbox-merchant"

# The child: a sandbox with N paid card transactions; prints its URL and a token, then serves
# until its standard input closes.
_SANDBOX = """
import sys
from payhooks.service.client import Card, CardTransaction
from payhooks.service.sandbox import SandboxServer
n = int(sys.argv[1])
card = Card(number="4242424242424242", exp_month=12, exp_year=2030, cvc="123")
with SandboxServer.start() as server:
    for i in range(n):
        request = CardTransaction(
            external_identifier=f"order-{i:07}", amount=2500, currency="CNY", method="stripe",
            card=card,
        )
        server.sandbox.create_transaction("sandbox-merchant", request.to_wire())
    print(server.url, server.issue_token(), flush=True)
    sys.stdin.read()
"""


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=at_least(1), default=1_000_000, help="transactions (1,000,000)")
    parser.add_argument("--database", type=Path, help="the ledger file (a temporary one)")
    parser.add_argument("--trace", action="store_true", help="also trace Python's allocations")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="payhooks-bench-sync-"))
    database = args.database or folder / "sync.db"

    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", _SANDBOX, str(args.n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        with Ledger(database, synchronous="NORMAL") as ledger:
            batch = 10_000
            for first in range(0, args.n, batch):
                with ledger.transaction():
                    for i in range(first, min(first + batch, args.n)):
                        ledger.expect_transaction(f"order-{i:07}", 2500, "CNY")
            assert child.stdout is not None
            url, token = child.stdout.readline().split()
            print(f"N = {args.n:,} transactions; seeded in {time.perf_counter() - started:.1f} s")
            rss_before = _peak_rss_mib()
            with ServiceClient(url, access_token=token, merchant_account_id=MERCHANT) as client:
                if args.trace:
                    tracemalloc.start()
                began = time.perf_counter()
                report = sync_transactions(client, ledger, limit=100)
                took = time.perf_counter() - began
                traced = tracemalloc.get_traced_memory()[1] if args.trace else None
                tracemalloc.stop()
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=60)
    assert report.items == args.n, report
    assert report.drift == {"missed_notification": args.n}, report.drift
    rate = args.n / took
    print(f"sync        {took:8.1f} s   {rate:10,.0f} transactions/s   {report.pages:,} pages")
    print(f"peak RSS    {_peak_rss_mib():8.1f} MiB (before the sync: {rss_before:.1f} MiB)")
    if traced is not None:
        print(
            f"peak traced {traced / (1024 * 1024):8.1f} MiB of Python allocations during the sync"
        )
    print(f"drift       {report.drift}")


if __name__ == "__main__":
    main()
