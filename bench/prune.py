"""A receiver's latency while ``payhooks prune`` runs beside it, and the prune's memory.

The goal: pruning a ledger of 10^6 deliveries, the receiver's p99 latency during the prune
within 2x of without it, the prune's memory under 100 MB, and nothing acknowledged lost.

The receiver is gunicorn on 127.0.0.1 with the demo app on one SQLite ledger (``FULL``), as in
``bench.receive``, and its clients send distinct signed notifications (``bench.receive``'s
client processes). The ledger is filled first with ``--deliveries`` old finished deliveries
(``duplicate`` deliveries of one recorded outcome whose signals are sent, each with its own
body of ``--body-size`` bytes and its SHA-256, written straight into the table in large
transactions: the ledger's own path would take hours for 10^6), dated in one band per round:
round ``i``'s band is older than round ``i+1``'s, so each round's prune (``payhooks prune
--older-than``, its own process, ``--batch-size`` rows per transaction) finds exactly one band.

Each round sends ``--requests`` notifications twice, in the rotated order of
:mod:`bench.rounds`: once alone and once with that round's prune started as the clients start.
Printed per round: both p99 latencies, how long the prune took against the clients' run (the
overlap: a prune that ends early leaves the rest of the run unloaded), the prune's peak
resident memory (``VmHWM`` from ``/proc``, read every 50 ms until it ends); then the median of
the per-round p99 ratios with their spread. At the end every notification answered 200 must
have its delivery row, and the bench fails otherwise.

    python -m bench.prune --deliveries 1000000 --rounds 3

The figures are the machine's: on a small shared one they drift (see :mod:`bench.rounds`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.receive import DEMO_APP, ClientResult, prepare, run_clients
from bench.rounds import at_least, order, ratios
from payhooks.storage import Ledger
from payhooks.verify import generate_keypair
from tests.support.factories import make_outcome
from tests.support.gunicorn_server import GunicornServer

_INSERT = (
    "INSERT INTO deliveries (dedupe_key, received_at, headers, body, body_sha256, status, "
    "outcome_id, external_identifier, updated_at) VALUES (?, ?, '{}', ?, ?, 'duplicate', ?, ?, ?)"
)


def fill(database: Path, count: int, rounds: int, body_size: int) -> list[int]:
    """``count`` old finished deliveries, in ``rounds`` bands (band ``i`` dated ``100 + 2 *
    (rounds - i)`` days ago); returns the ``--older-than`` days that find band ``i`` alone."""
    with Ledger(database) as ledger:
        delivery = ledger.receiver.record_delivery(dedupe_key="first", body=b"{}", headers={})
        outcome = make_outcome(transaction_id="bench-old", external_identifier="bench-old")
        recorded = ledger.receiver.record_outcome(outcome, delivery_id=delivery.id)
        while claimed := ledger.signals.claim(lease=timedelta(minutes=5)):
            ledger.signals.mark_sent(claimed)
    now = datetime.now(UTC)
    conn = sqlite3.connect(database)
    try:
        padding = os.urandom(body_size)
        for number in range(0, count, 50_000):
            rows = []
            for n in range(number, min(count, number + 50_000)):
                band = n * rounds // count
                at = (now - timedelta(days=100 + 2 * (rounds - band))).isoformat()
                body = b'{"n": %d, "pad": "' % n + padding.hex().encode()[:body_size] + b'"}'
                rows.append(
                    (
                        f"old-{n}",
                        at,
                        body,
                        hashlib.sha256(body).hexdigest(),
                        recorded.outcome_id,
                        "bench-old",
                        at,
                    )
                )
            with conn:
                conn.executemany(_INSERT, rows)
    finally:
        conn.close()
    return [100 + 2 * (rounds - band) - 1 for band in range(rounds)]


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _high_water_kib(pid: int) -> int:
    """The process's peak resident memory so far (``VmHWM``), in KiB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def prune_beside(
    database: Path, archives: Path, days: int, batch: int, send: object
) -> tuple[ClientResult, float, float, int]:
    """Start ``payhooks prune`` and the clients together; the clients' result, how long the
    prune and the clients took, and the prune's peak resident memory in KiB."""
    began = time.monotonic()
    prune = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "payhooks.receiver",
            "prune",
            "--older-than",
            f"{days}d",
            "--archive",
            str(archives),
            "--batch-size",
            str(batch),
            "--database",
            str(database),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")},
    )
    ended: list[float] = []
    waited: list[int] = []
    peak = [0]

    def wait() -> None:
        # VmHWM, the peak since exec, read until the process ends (ru_maxrss from wait4 would
        # count the bench's own memory, which the child had between fork and exec).
        while True:
            pid, status, _ = os.wait4(prune.pid, os.WNOHANG)
            if pid:
                break
            peak[0] = max(peak[0], _high_water_kib(prune.pid))
            time.sleep(0.05)
        ended.append(time.monotonic())
        waited.append(status)

    waiter = threading.Thread(target=wait, name="prune-waiter")
    waiter.start()
    result: ClientResult = send()  # type: ignore[operator]
    clients_took = time.monotonic() - began
    waiter.join()
    prune_took = ended[0] - began
    prune.returncode = os.waitstatus_to_exitcode(waited[0])
    out, err = prune.communicate()
    if prune.returncode != 0:
        raise SystemExit(f"payhooks prune failed: {err.decode()}")
    print(f"    prune: {out.decode().splitlines()[-1]}")
    return result, prune_took, clients_took, peak[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=at_least(1), default=1_000_000)
    parser.add_argument("--rounds", type=at_least(1), default=3)
    parser.add_argument("--requests", type=at_least(10), default=2000)
    parser.add_argument("--body-size", type=at_least(2), default=700)
    parser.add_argument("--batch-size", type=at_least(1), default=1000)
    parser.add_argument("--workers", type=at_least(1), default=2)
    parser.add_argument("--connections", type=at_least(1), default=4)
    args = parser.parse_args()

    keys = generate_keypair("standard-webhooks")
    signing_key, verify_key = keys.signing_key, keys.verifying_key
    with tempfile.TemporaryDirectory(prefix="bench-prune-") as folder:
        root = Path(folder)
        database, archives = root / "ledger.db", root / "archives"
        archives.mkdir()
        started = time.monotonic()
        bands = fill(database, args.deliveries, args.rounds, args.body_size)
        size = database.stat().st_size
        print(
            f"{args.deliveries} old deliveries in {time.monotonic() - started:.0f}s "
            f"({size / 2**20:.0f} MiB)"
        )
        env = {
            "PAYHOOKS_DATABASE": str(database),
            "PAYHOOKS_SECRETS": verify_key,
            "SECRET_KEY": "bench-prune",
        }
        server = GunicornServer(DEMO_APP, env=env, cwd=root, workers=args.workers).start()
        figures: dict[str, list[float]] = {"alone": [], "pruning": []}
        memory: list[int] = []
        acknowledged = 0
        first = 0
        try:
            for round_index in range(args.rounds):
                for name in order(["alone", "pruning"], round_index):
                    jobs = prepare([database], first, args.requests, signing_key)
                    first += args.requests

                    def send(jobs: list = jobs) -> ClientResult:  # type: ignore[type-arg]
                        return run_clients(server.port, jobs, 1, args.connections)

                    if name == "alone":
                        result = send()
                        extra = ""
                    else:
                        result, prune_took, clients_took, rss = prune_beside(
                            database, archives, bands[round_index], args.batch_size, send
                        )
                        memory.append(rss)
                        extra = (
                            f", prune {prune_took:.1f}s against the clients' "
                            f"{clients_took:.1f}s, peak RSS {rss / 1024:.0f} MiB"
                        )
                    acknowledged += result.statuses[200]
                    if set(result.statuses) - {200}:
                        print(f"    answers: {dict(result.statuses)}")
                    figures[name].append(p99(result.latencies))
                    print(
                        f"round {round_index + 1} {name}: p99 "
                        f"{figures[name][-1] * 1000:.1f} ms{extra}"
                    )
        finally:
            server.stop()
        conn = sqlite3.connect(database)
        try:
            (stored,) = conn.execute(
                "SELECT COUNT(*) FROM deliveries WHERE dedupe_key NOT LIKE 'old-%' "
                "AND dedupe_key <> 'first'"
            ).fetchone()
            (left,) = conn.execute(
                "SELECT COUNT(*) FROM deliveries WHERE dedupe_key LIKE 'old-%' "
                "AND pruned_at IS NULL"
            ).fetchone()
        finally:
            conn.close()
        print(
            f"answered 200: {acknowledged}, new deliveries stored: {stored} (sent {first}); "
            f"old deliveries left unpruned: {left}"
        )
        print(f"p99 while pruning / alone: {ratios(figures, 'pruning', 'alone').text()}")
        print(f"prune peak RSS: {max(memory) / 1024:.0f} MiB (goal: under 100 MiB)")
        if stored < acknowledged:
            raise SystemExit("a notification answered 200 has no delivery row")


if __name__ == "__main__":
    main()
