"""Benchmark: the receiver's latency while finance's rollup is rebuilt from the whole history.

Issue 39's goal: a full refresh of 10^6 payments' history said in time and peak memory, and
chunked so that the receiver keeps answering during it. The ledger is
:mod:`bench.console_ledger`'s (N payments and deliveries over 120 days, built once per
``--database`` and reused), served by the receiver as ``bench.receive`` serves it (gunicorn, 4
sync workers, the demo app) on loopback. A client sends distinct signed notifications for
expected payments at a steady ``--rate``, each timed from when it was due
(:func:`bench.console_load.send`), in two conditions per round, in rotated order
(:mod:`bench.rounds`):

``alone``
    the receiver alone, for as long as the last refresh took.
``refresh``
    the receiver while ``payhooks rollup`` runs in a process of its own (``--nice``: at a
    lower CPU priority, as a cron job may run it), after
    ``DELETE FROM finance_rollup_state``, which makes it rebuild every day of the history
    (:meth:`payhooks.storage.reads.rollup.Rollup.refresh` builds when the state is gone); the
    notifications go on until it exits.

One refresh runs before the rounds (the file's pages cold, then in the cache, as in the rounds),
said apart. Per round: each condition's p50 and p99, the ratio p99(refresh) / p99(alone), and
the refresh's seconds (as ``payhooks rollup`` says them) and peak RSS (its process's
``ru_maxrss``, from ``wait4``: on PostgreSQL the server's backend is not counted); then the
median of the per-round ratios with their spread, and the refreshes' median seconds and
highest MB.

Run::

    python -m bench.rollup --n 2000 --rounds 1                    # a smoke run
    python -m bench.rollup --n 1000000 --database /tmp/l6.db      # 10^6, SQLite
    python -m bench.rollup --n 1000000 --start-postgres --no-sqlite
    python -m bench.rollup --database /tmp/l6.db --nice 10      # the refresh at a lower priority
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from math import ceil
from pathlib import Path

from bench.console import _built
from bench.console_ledger import build
from bench.console_load import FIRST_ORDER, percentile, send
from bench.postgres import add_arguments, postgres_database, settings
from bench.receive import DEMO_APP, Job, register, sign
from bench.rounds import alternate, at_least, ratios
from payhooks.verify import generate_keypair
from tests.support.gunicorn_server import GunicornServer

ALONE, REFRESH = "alone", "refresh"
#: The receiver's workers, as docs/deployment.md and the other benches serve it.
WORKERS = 4
#: What ``payhooks rollup`` says it did: the local hours computed, in how many seconds.
_REPORT = re.compile(r"computed (\d+) .* in ([\d.]+) s")


@dataclass
class Refresh:
    """One ``payhooks rollup`` run from scratch."""

    #: As it reports them (the refresh alone), and from start to exit (the phase's length).
    seconds: float
    wall: float
    peak_mb: float
    hours: int


@dataclass
class Rebuild:
    """``payhooks rollup`` rebuilding the rollup of ``target`` in a process of its own."""

    target: Path | str
    #: Its niceness over the bench's (which the receiver inherits).
    nice: int = 0
    process: subprocess.Popen[str] = field(init=False)
    #: Its exit status and resource use once reaped (``wait4``: this child's alone, where
    #: ``RUSAGE_CHILDREN`` would mix in every child waited for, gunicorn's included).
    reaped: tuple[int, resource.struct_rusage, float] | None = None
    started: float = 0.0

    def start(self) -> Rebuild:
        """Forget the rollup's state (the next refresh builds every day), then start it."""
        _forget(self.target)
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "payhooks.receiver", "rollup"],
            env={**os.environ, "PAYHOOKS_DATABASE": str(self.target)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if self.nice:
            niceness = os.getpriority(os.PRIO_PROCESS, 0) + self.nice
            os.setpriority(os.PRIO_PROCESS, self.process.pid, niceness)
        return self

    def running(self) -> bool:
        if self.reaped is None:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                self.reaped = status, usage, time.perf_counter()
        return self.reaped is None

    def wait(self) -> Refresh:
        """Its seconds (as it reports them), its peak RSS and how many local hours it computed;
        raise when it failed."""
        if self.reaped is None:
            _, status, usage = os.wait4(self.process.pid, 0)
            self.reaped = status, usage, time.perf_counter()
        status, usage, ended = self.reaped
        self.process.returncode = os.waitstatus_to_exitcode(status)
        out, err = self.process.communicate()
        found = _REPORT.search(out)
        if self.process.returncode != 0 or found is None:
            raise RuntimeError(f"payhooks rollup exited {self.process.returncode}: {err[-2000:]}")
        return Refresh(
            float(found.group(2)), ended - self.started, usage.ru_maxrss / 1024, int(found.group(1))
        )


def _forget(target: Path | str) -> None:
    if isinstance(target, str):
        import psycopg

        with psycopg.connect(target, autocommit=True) as pg:
            pg.execute("DELETE FROM finance_rollup_state")
        return
    with closing(sqlite3.connect(target, isolation_level=None, timeout=30)) as conn:
        conn.execute("DELETE FROM finance_rollup_state")


def _jobs(first: int, count: int, key: str, until: Rebuild | None) -> Iterator[Job]:
    """``count`` notifications from ``order-<first>``, or fewer: only while ``until`` runs."""
    for job in sign(first, count, key):
        if until is not None and not until.running():
            return
        yield job


def run(target: Path | str, args: argparse.Namespace, folder: Path) -> None:
    """The refresh once, then every round on ``target``; print the figures."""
    keys = generate_keypair("standard-webhooks")
    env = {
        "PAYHOOKS_DATABASE": str(target),
        "PAYHOOKS_SECRETS": keys.verifying_key,
        "SECRET_KEY": "bench",
    }
    first = Rebuild(target, args.nice).start().wait()
    print(
        f"  first refresh (cold): {first.seconds:.1f} s, peak RSS {first.peak_mb:.0f} MB, "
        f"{first.hours} hours",
        flush=True,
    )
    refreshes: list[Refresh] = []
    latencies: dict[str, list[float]] = {ALONE: [], REFRESH: []}
    p50s: dict[str, list[float]] = {ALONE: [], REFRESH: []}
    next_order = FIRST_ORDER
    with GunicornServer(DEMO_APP, env=env, cwd=folder, workers=WORKERS) as server:
        register(target, next_order - 20, 20)
        send(server.port, sign(next_order - 20, 20, keys.signing_key))  # warm every worker

        def phase(name: str, round_index: int) -> float:
            nonlocal next_order
            seconds = (refreshes[-1] if refreshes else first).wall
            # Enough payments for a refresh three times as long as the last, and 10 s more.
            count = ceil(args.rate * (seconds if name == ALONE else 3 * seconds + 10))
            register(target, next_order, count)
            rebuild = Rebuild(target, args.nice).start() if name == REFRESH else None
            times = send(
                server.port,
                _jobs(next_order, count, keys.signing_key, rebuild),
                every=1 / args.rate,
            )
            next_order += count
            if rebuild is not None:
                refreshes.append(rebuild.wait())
            latencies[name].extend(times)
            p50s[name].append(statistics.median(times))
            p99 = percentile(times, 0.99)
            print(
                f"  round {round_index + 1} {name:>7}: {len(times)} notifications, "
                f"p50 {p50s[name][-1] * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"
                + (
                    f"; refresh {refreshes[-1].seconds:.1f} s, {refreshes[-1].peak_mb:.0f} MB"
                    if rebuild is not None
                    else ""
                ),
                flush=True,
            )
            return p99

        p99s = alternate((ALONE, REFRESH), args.rounds, phase)
    for index, (alone, during) in enumerate(zip(p99s[ALONE], p99s[REFRESH], strict=True)):
        print(f"  round {index + 1}: p99 during the refresh / alone: {during / alone:.2f}x")
    for name, shown in latencies.items():
        print(
            f"{name:>8}: p50 {percentile(shown, 0.5) * 1000:.1f} ms, "
            f"p99 {percentile(shown, 0.99) * 1000:.1f} ms over {len(shown)} notifications"
        )
    print(
        f"full refresh: {statistics.median(r.seconds for r in refreshes):.1f} s (median of "
        f"{len(refreshes)}; {min(r.seconds for r in refreshes):.1f}-"
        f"{max(r.seconds for r in refreshes):.1f}), peak RSS "
        f"{max(r.peak_mb for r in refreshes):.0f} MB, {refreshes[-1].hours} hours"
    )
    print(f"receiver's p99 during a full refresh / alone: {ratios(p99s, REFRESH, ALONE).text()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=at_least(100), default=1_000_000, help="payments in the ledger")
    parser.add_argument("--database", type=Path, default=None, help="the SQLite ledger, reused")
    parser.add_argument("--rounds", type=at_least(1), default=4)
    parser.add_argument(
        "--rate", type=at_least(1), default=20, help="notifications per second, steady"
    )
    parser.add_argument(
        "--nice", type=int, default=0, help="the refresh's niceness over the receiver's"
    )
    parser.add_argument("--no-sqlite", action="store_true")
    add_arguments(parser, "measure")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-rollup-") as temp:
        folder = Path(temp)
        with postgres_database(args) as url:
            targets: list[Path | str] = []
            if not args.no_sqlite:
                targets.append((args.database or folder / "rollup.db").resolve())
            if url:
                targets.append(url)
            for target in targets:
                found = _built(target)
                if found is None:
                    print(f"building {args.n:,} payments in {target} ...", flush=True)
                    print(f"  built in {build(target, args.n):.0f} s", flush=True)
                elif found != args.n:
                    raise SystemExit(f"{target} holds a ledger of N = {found:,}, not {args.n:,}")
                where = settings(target) if isinstance(target, str) else "SQLite"
                print(
                    f"{where}, {args.n:,} payments; {args.rate} notifications/s; "
                    f"{args.rounds} rounds; the refresh at nice +{args.nice}",
                    flush=True,
                )
                run(target, args, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
