"""What ``GET {prefix}/health`` costs the server per call, on SQLite and on PostgreSQL.

The route is asked by load balancers every few seconds per worker, so its cost is paid all
day: this times it in the server, through the Flask test client in this process (no socket,
no client), after a warm-up that opens the thread's ledger. The route answers from its last
check for a second (``payhooks.receiver.web.health_cache``), so its figures are mostly the
kept answer's, with about one real check a second among them. The check itself
(``Ledger.health``, timed alone) is on SQLite mostly the write-lock probe (``BEGIN IMMEDIATE``
and ``ROLLBACK``) and ``statvfs``; on PostgreSQL, the round trip of one ``SELECT`` to the
server. For comparison it times the same app answering its own trivial route.

Figures, never pass or fail. Run by hand::

    python -m bench.health                          # SQLite, 2000 calls
    python -m bench.health --count 500 --start-postgres
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from flask import Flask

from bench.postgres import add_arguments, postgres_database, settings
from payhooks.receiver import PayHooks, receiver_state
from payhooks.storage import migrate
from payhooks.verify import generate_keypair

WARMUP = 50


def _timed(call: Callable[[], object], count: int) -> list[float]:
    for _ in range(WARMUP):
        call()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def _line(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    return (
        f"{name:<28} median {statistics.median(times) * 1e6:8.1f} us   "
        f"p99 {p99 * 1e6:8.1f} us   ({len(times)} calls)"
    )


def measure(database: str, count: int) -> list[str]:
    keys = generate_keypair("standard-webhooks")
    app = Flask("bench_health")
    app.config.update(PAYHOOKS_DATABASE=database, PAYHOOKS_SECRETS=[keys.verifying_key])
    PayHooks(app)

    @app.get("/bench/trivial")
    def trivial() -> str:
        return "ok"

    client = app.test_client()

    def health() -> None:
        answer = client.get("/payhooks/health")
        assert answer.status_code == 200, answer.get_data(as_text=True)

    try:
        ledger = receiver_state(app).ledger
        return [
            _line("GET /payhooks/health", _timed(health, count)),
            _line("GET (a trivial route)", _timed(lambda: client.get("/bench/trivial"), count)),
            _line("Ledger.health() alone", _timed(ledger.health, count)),
        ]
    finally:
        receiver_state(app).ledgers.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    add_arguments(parser, "time the route")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        print("SQLite:")
        for line in measure(str(Path(folder) / "payhooks.db"), args.count):
            print("  " + line)
    with postgres_database(args) as url:
        if url is not None:
            migrate(url)
            print(settings(url) + ":")
            for line in measure(url, args.count):
                print("  " + line)


if __name__ == "__main__":
    main()
