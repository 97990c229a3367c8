"""Notifications per second and latency of the whole receiver under gunicorn, against a floor.

The pipeline measured is the one a merchant runs: gunicorn on 127.0.0.1 with the demo app
(``payhooks.receiver.demo:create_app()``), each request capped, verified (Standard Webhooks), stored
durably in SQLite (WAL), parsed, recorded and reconciled, then acknowledged. Every request is a
distinct signed notification for an expected payment, so every one is a full write.

The floor is ``bench/floor_app.py``: a bare Flask route that reads the body and returns the
same small JSON, served by the same gunicorn configuration (worker count and class), hit by
the same client with the same signed requests, in the same run. Its share is printed for
context, with every notification stored (the run checks the database after); it is not the
goal, for no durable receiver can reach the bare route: the durable floor below takes about
two thirds of it by itself.

Beside it, per durability setting, the *durable floor* (same file): the bare route plus an
``INSERT`` of the raw body into SQLite committed with that ``synchronous`` setting, the
obvious way, and nothing else. It tells how much of the distance to the floor storing each
notification takes by itself, before payhooks does any of its own work.

The pipeline runs once per ``PAYHOOKS_SQLITE_SYNCHRONOUS`` setting (``--synchronous``; both by
default), each on its own gunicorn and ledger file, in the same alternating rounds: ``FULL``
(the default, every commit synced to disk) and ``NORMAL`` (synced at checkpoints; loses the
last acknowledged deliveries to a power loss), so the price of each is measured side by side.

Every app runs once per round, in an order rotated from round to round (:mod:`bench.rounds`),
and the apps are compared within each round: the shares printed are the medians of the
per-round ratios, with their spread (lowest and highest). Rounds are short (six of a thousand
requests per app by default, rather than three of two thousand): on a shared machine the load
changes within seconds, and the shorter the round, the more alike its apps' conditions.

Per app, two figures that explain the throughput rather than measure it:

- *WAL pages per delivery*: how many pages each delivery adds to SQLite's write-ahead log, by
  SQLite's own count (the log frames ``PRAGMA wal_checkpoint`` reports), over ``--wal-count``
  deliveries sent to each app after the timed rounds, with the log held from being
  checkpointed meanwhile (:func:`wal_pages` says how and why apart from the rounds). Every
  page is written to the log and later copied into the database, so it is the write volume.
- *Server CPU per request*: the user and system CPU time of gunicorn's master and workers
  over each round (``/proc/<pid>/stat``), divided by the round's requests; the median of the
  rounds, with their spread.

With ``--postgres URL`` (or ``--start-postgres``), the receiver also runs on PostgreSQL
(``FULL``: every commit waits for the server's WAL flush, as the server's
``synchronous_commit`` says), beside its own durable floor on the same server
(``bench.floor_app:create_durable_postgres_app()``: the bare route plus one committed ``INSERT``
of the raw body into a table of the same database, through the same connection pool settings),
in the same alternating rounds. SQLite's durable floor would be the wrong yardstick there: a
PostgreSQL commit is a round trip to another process and its WAL writer, not a local file. For
PostgreSQL the write volume is the server's WAL bytes per delivery (``pg_current_wal_lsn()``
before and after the same deliveries) rather than SQLite's pages, and the server CPU per
request is gunicorn's alone (PostgreSQL's backends do part of the work and are not counted).

Beside ``FULL``, the same receiver with metrics and structured logs (``bench/metrics_app.py``:
:class:`payhooks.receiver.Metrics` in prometheus_client's multiprocess mode, and
``PAYHOOKS_DELIVERY_LOG`` writing each delivery's JSON line to a file), on a ledger file of its
own, in the same rounds: its share of FULL's durable floor, printed under FULL's, tells what
they cost (the goal: at most 3 points of the share). After the rounds it scrapes its metrics
and counts its log lines, so a run shows the counts were kept. ``--no-metrics`` leaves it out.

With ``--without-index NAME``, one more app runs in the same rounds: the receiver with ``FULL``
on a ledger of its own from which the index ``NAME`` (or each of ``NAME,NAME,...``, to cost
several together) was dropped after the schema was made
(same gunicorn, same requests, same counts), so an index's cost to the receiver is measured
against the same durable floor in the same rounds: both shares are printed, and the index's
cost as the median of the per-round differences between them (without minus with), in points
of that share.

It prints last, per durability setting and then for PostgreSQL, the receiver's share of its
durable floor's throughput (the median of the per-round ratios, with their spread; the goals
are at least 50% with ``FULL`` on SQLite and 35% on PostgreSQL), after the WAL pages (or
bytes) per delivery and the server CPU per request of each app.

Making it fair on a small machine (this one has 2 cores, shared by client and server):

- Requests are built and signed before the clock starts; the client only sends.
- The client is ``--client-processes`` processes (no shared GIL) of ``--connections / P``
  threads, each thread one ``http.client`` connection (kept alive where the worker class
  allows it; gunicorn's sync workers close after each answer, for both apps alike).
- Both runs report the CPU time the client and the server spent per request (from
  ``os.times()`` in the client processes and ``/proc`` for gunicorn's processes), so the
  client's share of the machine is visible, and the ratio of server CPU per request is given
  beside the throughput ratio: it is what the ratio would be if the client cost nothing.

Run by hand; it prints figures and never fails on them (CI runs it only in a tiny size, in
``tests/system/test_bench_smoke.py``, to keep it working)::

    python -m bench.receive                       # 4 sync workers, 8 connections, 6 x 1000 each
    python -m bench.receive --worker-class gthread --threads 4
    python -m bench.receive --profile             # also: where the time goes, in process
    python -m bench.receive --postgres postgresql://...  # also: the receiver on PostgreSQL
    python -m bench.receive --start-postgres      # the same, on a throwaway server of its own
    python -m bench.receive --without-index deliveries_identifier  # also: FULL without it

To see a worker from outside while the bench runs: ``py-spy top --pid <worker pid>`` or
``py-spy record -o profile.svg --pid <worker pid>`` (``pip install py-spy``).
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import json
import multiprocessing
import os
import pstats
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from bench.floor_app import (
    FLOOR_SUFFIX,
    postgres_floor_stored,
    prepare_durable_floor,
    prepare_durable_postgres_floor,
)
from bench.postgres import add_arguments, postgres_database, settings
from bench.proc_cpu import TICKS_PER_SECOND, cpu_ticks
from bench.rounds import Ratios, alternate, at_least, ratios
from payhooks.receiver import PayHooks, receiver_state
from payhooks.storage import Ledger, migrate
from payhooks.verify import generate_keypair, get_signer
from tests.support.gunicorn_server import HAS_PROC, GunicornServer

#: The receiver under test, in gunicorn's syntax.
DEMO_APP = "payhooks.receiver.demo:create_app()"

NOTIFY = "/payhooks/notifications"
REPO = Path(__file__).resolve().parent.parent
FORMS: tuple[dict[str, str], ...] = (
    {},
    {"stripe_payment_intent_id": "pi_bench", "status": "succeeded"},
    {"adyen_psp_reference": "PSP-bench", "result_code": "Authorised"},
)

Job = tuple[bytes, dict[str, str]]


def notification(number: int) -> bytes:
    """A distinct notification for ``order-<number>``, in one of the three forms."""
    return json.dumps(
        {
            "ll_transaction_id": f"ll-{number}",
            "merchant_transaction_id": f"order-{number}",
            "payment_data": {
                "payment_status": "PS",
                "payment_amount": "25.00",
                "payment_currency_code": "CNY",
                "payment_time": "20261121120000",
                **FORMS[number % len(FORMS)],
            },
        }
    ).encode()


#: The name of the PostgreSQL run among the durability settings.
POSTGRES = "postgresql"
#: The receiver with metrics and structured logs (``bench/metrics_app.py``), on SQLite with
#: ``FULL``: its share of FULL's durable floor beside the plain receiver's tells what they cost.
METRICS = "FULL+metrics"
#: The goal: metrics and logs cost the receiver at most this many points of its share.
METRICS_GOAL_POINTS = 3


def register(database: Path | str, first: int, count: int) -> None:
    """Register ``count`` expected payments, ``order-<first>`` onwards, in one transaction."""
    with Ledger(database) as ledger, ledger.transaction():
        for number in range(first, first + count):
            ledger.expect_transaction(f"order-{number}", 2500, "CNY")


def sign(first: int, count: int, signing_key: str) -> list[Job]:
    """One signed notification for each payment ``order-<first>`` onwards. Signed now: the
    receiver refuses a signature older than its tolerance (five minutes), so a bench signs
    each batch just before it is sent, never the whole run's ahead."""
    signer = get_signer("standard-webhooks", signing_key)
    jobs = []
    for number in range(first, first + count):
        body = notification(number)
        jobs.append((body, {**signer.sign(body), "Content-Type": "application/json"}))
    return jobs


def prepare(databases: Sequence[Path | str], first: int, count: int, signing_key: str) -> list[Job]:
    """Register ``count`` expected payments in each database and sign one notification for
    each payment."""
    for database in databases:
        register(database, first, count)
    return sign(first, count, signing_key)


# -- the client ---------------------------------------------------------------------------------


@dataclass
class ClientResult:
    latencies: list[float]
    statuses: Counter[int]
    started: float
    finished: float
    cpu_seconds: float


def _client_process(port: int, jobs: list[Job], threads: int, start: Event, results: Any) -> None:
    """One client process: ``threads`` connections share ``jobs``; report when done."""
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    cursor = iter(jobs)

    def work() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine: list[float] = []
        seen: Counter[int] = Counter()
        try:
            while True:
                with lock:
                    job = next(cursor, None)
                if job is None:
                    break
                body, headers = job
                began = time.perf_counter()
                try:
                    conn.request("POST", NOTIFY, body=body, headers=headers)
                    response = conn.getresponse()
                    response.read()
                    seen[response.status] += 1
                except (OSError, http.client.HTTPException):
                    conn.close()
                    seen[0] += 1
                mine.append(time.perf_counter() - began)
        finally:
            conn.close()
        with lock:
            latencies.extend(mine)
            statuses.update(seen)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    cpu_before = sum(os.times()[:2])
    start.wait()
    started = time.monotonic()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    finished = time.monotonic()
    results.put(
        ClientResult(latencies, statuses, started, finished, sum(os.times()[:2]) - cpu_before)
    )


def run_clients(port: int, jobs: Sequence[Job], processes: int, connections: int) -> ClientResult:
    """Send every job from ``processes`` processes with ``connections`` connections in all."""
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    results = context.Queue()
    shares = [list(jobs[index::processes]) for index in range(processes)]
    threads = max(1, connections // processes)
    # Daemons: a bench stopped mid-round (Ctrl-C, SIGTERM) must not wait at exit for clients
    # still parked at the gate.
    workers = [
        context.Process(
            target=_client_process, args=(port, share, threads, start, results), daemon=True
        )
        for share in shares
    ]
    for worker in workers:
        worker.start()
    time.sleep(1.0)  # let every process import and reach the gate
    start.set()
    parts: list[ClientResult] = [results.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    return ClientResult(
        latencies=[value for part in parts for value in part.latencies],
        statuses=sum((part.statuses for part in parts), Counter()),
        started=min(part.started for part in parts),
        finished=max(part.finished for part in parts),
        cpu_seconds=sum(part.cpu_seconds for part in parts),
    )


# -- the servers --------------------------------------------------------------------------------


def server_cpu_seconds(server: GunicornServer) -> float:
    """User and system CPU time of gunicorn's master and its live workers, from ``/proc``."""
    total = sum(cpu_ticks(pid) for pid in (server.master_pid, *server.worker_pids()))
    return total / TICKS_PER_SECOND


@dataclass
class Figures:
    """One app's figures, round by round: rate, server and client CPU per request; and its
    pooled latencies and statuses."""

    name: str
    rates: list[float] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)

    def add(self, result: ClientResult, requests: int, server_cpu: float) -> float:
        """Record one round; return its rate."""
        rate = requests / (result.finished - result.started)
        self.rates.append(rate)
        self.server_cpu.append(server_cpu / requests)
        self.client_cpu.append(result.cpu_seconds / requests)
        self.latencies.extend(result.latencies)
        self.statuses.update(result.statuses)
        return rate

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)

    @property
    def server_cpu_us(self) -> float:
        """Server CPU per request, the median of the rounds, in microseconds."""
        return statistics.median(self.server_cpu) * 1e6

    def line(self) -> str:
        ordered = sorted(self.latencies)
        p50 = statistics.median(ordered) * 1000
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
        rounds = " ".join(f"{rate:.0f}" for rate in self.rates)
        return (
            f"{self.name:<29} {self.rate:5.0f} req/s (rounds {rounds})  p50 {p50:5.2f} ms  "
            f"p99 {p99:6.2f} ms  server CPU {self.server_cpu_us:5.0f} us/req  "
            f"client CPU {statistics.median(self.client_cpu) * 1e6:4.0f} us/req  "
            f"{dict(self.statuses)}"
        )

    def cpu_text(self) -> str:
        """Server CPU per request: the median of the rounds with their spread."""
        low, high = min(self.server_cpu) * 1e6, max(self.server_cpu) * 1e6
        return f"{self.server_cpu_us:5.0f} us server CPU/request (spread {low:.0f}-{high:.0f})"


def start_server(
    app: str, env: dict[str, str], folder: Path, args: argparse.Namespace
) -> GunicornServer:
    return GunicornServer(
        app,
        env=env,
        cwd=folder,
        workers=args.workers,
        worker_class=args.worker_class,
        threads=args.threads,
    ).start()


def start_metrics_server(
    database: Path, verifying_key: str, args: argparse.Namespace
) -> GunicornServer:
    """The receiver with metrics and structured logs (``bench/metrics_app.py``) on ``database``
    with ``FULL``, its counts in a multiprocess folder and its lines in a file beside it."""
    counts = database.parent / "prometheus"
    counts.mkdir()
    env = {
        "PAYHOOKS_DATABASE": str(database),
        "PAYHOOKS_SECRETS": verifying_key,
        "PAYHOOKS_SQLITE_SYNCHRONOUS": "FULL",
        "PAYHOOKS_DELIVERY_LOG": "1",
        "SECRET_KEY": "bench",
        "PROMETHEUS_MULTIPROC_DIR": str(counts),
        "BENCH_DELIVERY_LOG": str(database.parent / "deliveries.log"),
        "PYTHONPATH": str(REPO),
    }
    return start_server("bench.metrics_app:create_app()", env, database.parent, args)


def scrape_processed(port: int) -> float:
    """How many deliveries the metrics counted as processed, over every worker."""
    from prometheus_client.parser import text_string_to_metric_families

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "payhooks_deliveries_total" and sample.labels.get("code") == "processed"
    )


def measure_round(
    figures: Figures, server: GunicornServer, jobs: Sequence[Job], args: argparse.Namespace
) -> float:
    """Send one round's jobs to ``server``; record and return its rate."""
    cpu_before = server_cpu_seconds(server)
    result = run_clients(server.port, jobs, args.client_processes, args.connections)
    return figures.add(result, len(jobs), server_cpu_seconds(server) - cpu_before)


def wal_pages(database: Path, send: Callable[[], object]) -> int:
    """How many pages (WAL frames) the writes that ``send()`` causes add to ``database``'s
    write-ahead log, by SQLite's own count.

    Between rounds, with the servers idle: a ``TRUNCATE`` checkpoint empties the log, then a
    read transaction is held open here while ``send()`` runs. A reader that began on an empty
    log reads the database file itself, so no checkpoint can copy the log back (and let it
    start over) until it ends: every frame written meanwhile stays in the log, and the log
    frames ``PRAGMA wal_checkpoint`` reports afterwards are exactly the pages written. (In
    the timed rounds the log is checkpointed and restarted every thousand pages, as it is in
    production, which is why this count is taken apart from them.)
    """
    pin = sqlite3.connect(database, isolation_level=None, timeout=30)
    probe = sqlite3.connect(database, isolation_level=None, timeout=30)
    try:
        for _ in range(100):
            busy, log, _ = pin.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy and log == 0:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"{database}: the write-ahead log could not be emptied")
        pin.execute("BEGIN")
        pin.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # the read starts here
        send()
        # A PASSIVE checkpoint cannot pass the reader: it only reports the log's frames.
        _, frames, _ = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        pin.execute("COMMIT")
    finally:
        pin.close()
        probe.close()
    return int(frames)


def wal_bytes(url: str, send: Callable[[], object]) -> int:
    """How many bytes of PostgreSQL's write-ahead log the writes that ``send()`` causes take:
    the server's WAL position (``pg_current_wal_lsn()``) before and after, read between
    rounds with every app idle. It is the whole server's log, so anything else writing
    meanwhile (autovacuum, a checkpoint's full-page images) lands in it too: a rough figure."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        before = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        send()
        found = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (before[0] if before else None,)
        ).fetchone()
    assert found is not None
    return int(found[0])


def without_index(suffix: str) -> str | None:
    """The index an app's name says it runs without (``FULL-without-<index>``), or None."""
    head, _, index = suffix.partition(WITHOUT)
    return index if head == "FULL" and index else None


#: How an app without an index is named among the settings: ``FULL-without-<index>``.
WITHOUT = "-without-"


def drop_index(database: Path, names: str) -> None:
    """Drop each index of ``names`` (comma-separated) from the migrated ledger ``database``;
    exit if it has none so named (a typo must not measure the receiver against itself)."""
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        for name in names.split(","):
            found = conn.execute(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)
            ).fetchone()[0]
            if not found:
                raise SystemExit(f"--without-index: the ledger has no index named {name!r}")
            conn.execute(f'DROP INDEX "{name}"')
    finally:
        conn.close()


def share_points(rates: dict[str, list[float]], index: str) -> Ratios:
    """Per round, the share of its durable floor of the ``FULL`` receiver without ``index``
    minus that of the one with it, in points (0.03 is 3 points): what keeping the index costs
    (negative when the receiver with it did better that round)."""
    floor = rates["durable-FULL"]
    return Ratios(
        tuple(
            (bare - full) / durable
            for full, bare, durable in zip(
                rates["FULL"], rates[f"FULL{WITHOUT}{index}"], floor, strict=True
            )
        )
    )


def points_text(points: Ratios) -> str:
    """``+1.2 points (spread -0.5 to +2.0 over 4 rounds)``: a difference of shares."""
    rounds = len(points.values)
    return (
        f"{points.median * 100:+.1f} points (spread {points.low * 100:+.1f} to "
        f"{points.high * 100:+.1f} over {rounds} round{'s' if rounds != 1 else ''})"
    )


def check_stored(database: Path | str) -> tuple[int, int]:
    """How many deliveries are processed and how many outcomes the file holds, read with a
    fresh connection after the server stopped: what is there is what was committed."""
    if isinstance(database, str):  # PostgreSQL
        import psycopg

        with psycopg.connect(database) as pg:
            found = pg.execute(
                "SELECT (SELECT COUNT(*) FROM deliveries WHERE status = 'processed'), "
                "(SELECT COUNT(*) FROM outcomes)"
            ).fetchone()
        assert found is not None
        return int(found[0]), int(found[1])
    conn = sqlite3.connect(database)
    try:
        processed = conn.execute(
            "SELECT COUNT(*) FROM deliveries WHERE status = 'processed'"
        ).fetchone()[0]
        outcomes = conn.execute("SELECT COUNT(*) FROM outcomes").fetchone()[0]
    finally:
        conn.close()
    return int(processed), int(outcomes)


def floor_stored(database: Path) -> int:
    """How many bodies the durable floor stored beside ``database``."""
    conn = sqlite3.connect(f"{database}{FLOOR_SUFFIX}")
    try:
        return int(conn.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0])
    finally:
        conn.close()


def over_gunicorn(args: argparse.Namespace, postgres: str | None) -> None:
    """The floor, and per durability setting the durable floor and the pipeline (each on its
    own gunicorn and file), measured in alternating rounds; then each file's WAL pages per
    delivery. With ``postgres`` (a URL), the pipeline on PostgreSQL and its own durable floor
    too, in the same rounds, and the server's WAL bytes per delivery for each."""
    modes: list[str] = args.synchronous
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        databases: dict[str, Path | str] = {
            mode: directory / f"bench-{mode.lower()}.db" for mode in modes
        }
        if postgres:  # the same pipeline on PostgreSQL (FULL), beside SQLite's
            migrate(postgres)
            if check_stored(postgres) != (0, 0):
                raise SystemExit("--postgres: give an empty database; this one holds deliveries")
            databases[POSTGRES] = postgres
            print(f"on {settings(postgres)}")
        if args.without_index:  # FULL again, on a file without that index
            if "FULL" not in modes:
                raise SystemExit("--without-index compares with FULL: keep it in --synchronous")
            databases[f"FULL{WITHOUT}{args.without_index}"] = (
                directory / f"bench-full-without-{args.without_index}.db"
            )
        keys = generate_keypair("standard-webhooks")
        files = list(databases.values())
        with_metrics = "FULL" in modes and not args.no_metrics
        metrics_file = directory / "bench-full-metrics.db"
        if with_metrics:
            files.append(metrics_file)
        # Every payment registered now; each batch of notifications signed just before it is
        # sent (a signature older than the receiver's tolerance is refused with a 401).
        total = args.warmup + args.rounds * args.count + args.wal_count
        for database in files:
            register(database, 0, total)
        for mode, database in databases.items():
            if (index := without_index(mode)) is not None:
                assert isinstance(database, Path)
                drop_index(database, index)

        def round_jobs(index: int) -> list[Job]:
            """Round ``index``'s notifications, signed afresh for each app just before it
            runs (the same notifications for every app): signed once per round, a round of
            many apps on a loaded machine outlived the receiver's five-minute tolerance, and
            the last apps' requests were refused with a 401, fast, which inflated their rate."""
            return sign(args.warmup + index * args.count, args.count, keys.signing_key)

        counted_first = args.warmup + args.rounds * args.count
        config = f"{args.workers} {args.worker_class} workers" + (
            f" x {args.threads} threads" if args.threads else ""
        )
        print(
            f"gunicorn, {config}; client: {args.client_processes} processes, "
            f"{args.connections} connections; {args.rounds} alternating rounds of "
            f"{args.count} requests per app, after {args.warmup}; {os.cpu_count()} CPUs"
        )
        # bench/ is not installed and gunicorn runs in `directory`: tell it where bench is.
        servers: dict[str, GunicornServer] = {}
        figures = {"floor": Figures("floor (bare Flask route)")}
        stored_in: dict[str, Path] = {}  # each app's file, for its WAL pages
        wal_of: dict[str, str] = {}  # each PostgreSQL app's database, for its WAL bytes
        try:
            servers["floor"] = start_server(
                "bench.floor_app:create_app()", {"PYTHONPATH": str(REPO)}, directory, args
            )
            for mode, database in databases.items():
                env = {
                    "PAYHOOKS_DATABASE": str(database),
                    "PAYHOOKS_SECRETS": keys.verifying_key,
                    "PAYHOOKS_SQLITE_SYNCHRONOUS": "FULL" if mode == POSTGRES else mode,
                    "SECRET_KEY": "bench",
                }
                if mode == POSTGRES:  # its own durable floor: a table in the same database
                    assert isinstance(database, str)
                    durable = f"durable-{mode}"
                    prepare_durable_postgres_floor(database)
                    servers[durable] = start_server(
                        "bench.floor_app:create_durable_postgres_app()",
                        {**env, "PYTHONPATH": str(REPO)},
                        directory,
                        args,
                    )
                    figures[durable] = Figures("durable floor, PostgreSQL")
                    servers[mode] = start_server(DEMO_APP, env, directory, args)
                    figures[mode] = Figures("receiver, PostgreSQL (FULL)")
                    wal_of[durable] = wal_of[mode] = database
                    continue
                assert isinstance(database, Path)
                if (index := without_index(mode)) is not None:  # FULL's durable floor serves
                    env["PAYHOOKS_SQLITE_SYNCHRONOUS"] = "FULL"
                    servers[mode] = start_server(DEMO_APP, env, directory, args)
                    figures[mode] = Figures(f"receiver, FULL without {index}")
                    stored_in[mode] = database
                    continue
                durable = f"durable-{mode}"
                prepare_durable_floor(str(database))
                servers[durable] = start_server(
                    "bench.floor_app:create_durable_app()",
                    {**env, "PYTHONPATH": str(REPO)},
                    directory,
                    args,
                )
                figures[durable] = Figures(f"durable floor, {mode}")
                stored_in[durable] = Path(f"{database}{FLOOR_SUFFIX}")
                servers[mode] = start_server(DEMO_APP, env, directory, args)
                figures[mode] = Figures(f"receiver, synchronous={mode}")
                stored_in[mode] = database
            if with_metrics:
                servers[METRICS] = start_metrics_server(metrics_file, keys.verifying_key, args)
                figures[METRICS] = Figures("receiver, FULL+metrics+logs")
                stored_in[METRICS] = metrics_file
            for server in servers.values():
                warmup = sign(0, args.warmup, keys.signing_key)
                run_clients(server.port, warmup, args.client_processes, args.connections)
            # Round by round, every app in a rotated order: a machine that speeds up or slows
            # down meanwhile touches them all, and the ratios are taken within each round.
            rates = alternate(
                list(servers),
                args.rounds,
                lambda name, index: measure_round(
                    figures[name], servers[name], round_jobs(index), args
                ),
            )

            def send_counted(name: str) -> Callable[[], object]:
                """Send the counted deliveries to ``name``'s server, for a write-volume count."""
                return partial(
                    run_clients,
                    servers[name].port,
                    sign(counted_first, args.wal_count, keys.signing_key),
                    args.client_processes,
                    args.connections,
                )

            pages = {
                name: wal_pages(database, send_counted(name)) / args.wal_count
                for name, database in stored_in.items()
            }
            pg_bytes = {
                name: wal_bytes(url, send_counted(name)) / args.wal_count
                for name, url in wal_of.items()
            }
            counted = scrape_processed(servers[METRICS].port) if with_metrics else 0
        finally:
            for server in servers.values():
                server.stop()
        stored = {mode: check_stored(database) for mode, database in databases.items()}
        if with_metrics:
            stored[METRICS] = check_stored(metrics_file)
            log_lines = len((directory / "deliveries.log").read_text().splitlines())
        floor_rows = {
            mode: floor_stored(database)
            if isinstance(database, Path)
            else postgres_floor_stored(database)
            for mode, database in databases.items()
            if without_index(mode) is None
        }

    floor = figures["floor"]
    print(floor.line())
    # SQLite's settings, then PostgreSQL's run if any; the app without an index apart.
    measured = [mode for mode in databases if without_index(mode) is None]
    for mode in measured:
        durable_name = f"durable-{mode}"
        pipeline, durable_floor = figures[mode], figures[durable_name]
        processed, outcomes = stored[mode]
        durable = "all" if processed == outcomes == total else "NOT ALL"
        print(durable_floor.line())
        print(
            f"  durable floor, {mode}: {ratios(rates, durable_name, 'floor').text('%')} of the "
            f"floor's throughput; stored: {floor_rows[mode]} of {total} bodies"
        )
        print(pipeline.line())
        print(
            f"  {mode}: {ratios(rates, mode, 'floor').text('%')} of the floor's throughput; "
            f"by server CPU per request: "
            f"{floor.server_cpu_us / pipeline.server_cpu_us:.0%}; stored: {processed} of "
            f"{total} deliveries processed, {outcomes} outcomes ({durable})"
        )
        if mode == "FULL" and with_metrics:
            processed, outcomes = stored[METRICS]
            print(figures[METRICS].line())
            print(
                f"  {METRICS}: {ratios(rates, METRICS, 'floor').text('%')} of the floor's "
                f"throughput; stored: {processed} of {total} deliveries processed; counted by "
                f"its metrics: {counted:.0f}; log lines: {log_lines}"
            )
    if args.without_index:
        bare = f"FULL{WITHOUT}{args.without_index}"
        processed, outcomes = stored[bare]
        print(figures[bare].line())
        print(
            f"  FULL without {args.without_index}: {ratios(rates, bare, 'floor').text('%')} of "
            f"the floor's throughput; stored: {processed} of {total} deliveries processed, "
            f"{outcomes} outcomes ({'all' if processed == outcomes == total else 'NOT ALL'})"
        )
    print(
        f"per app: WAL pages per delivery (SQLite's log frames over {args.wal_count} deliveries "
        f"after the rounds) and server CPU per request (gunicorn's processes, median of rounds):"
    )
    for name, app in figures.items():
        if name in pages:
            wal_text = f"{pages[name]:5.2f} WAL pages/delivery"
        elif name in pg_bytes:  # PostgreSQL has no pages count of its own: its log's bytes
            wal_text = f"{pg_bytes[name]:5.0f} WAL bytes/delivery"
        else:
            wal_text = ""
        print(f"  {app.name:<29} {wal_text:<23}  {app.cpu_text()}")
    if POSTGRES in databases:
        print(
            "  (PostgreSQL: WAL bytes from pg_current_wal_lsn() over the same deliveries, the "
            "whole server's; server CPU is gunicorn's only, not PostgreSQL's backends')"
        )
    print("the receiver's share of its durable floor's throughput (median of per-round ratios):")
    if args.without_index:  # before the goals' lines, so PostgreSQL's stays last
        bare = f"FULL{WITHOUT}{args.without_index}"
        print(
            f"  FULL without {args.without_index}: {ratios(rates, bare, 'durable-FULL').text('%')}"
        )
        print(
            f"  cost of {args.without_index} to FULL's share: "
            f"{points_text(share_points(rates, args.without_index))} (without minus with)"
        )
    for mode in measured:  # PostgreSQL's last: its goal is the figure this run is for
        goal = {"FULL": "  (goal: 50%)", POSTGRES: "  (goal: 35%)"}.get(mode, "")
        print(f"  {mode:<10} {ratios(rates, mode, f'durable-{mode}').text('%')}{goal}")
        if mode == "FULL" and with_metrics:
            print(
                f"  {METRICS:<10} {ratios(rates, METRICS, 'durable-FULL').text('%')}  (goal: at "
                f"most {METRICS_GOAL_POINTS} points under FULL)"
            )


# -- in process, and the profile ----------------------------------------------------------------


def post(client: FlaskClient, body: bytes, headers: dict[str, str]) -> TestResponse:
    """Send one delivery through the test client and close its answer, as a WSGI server does:
    the receiver sends the delivery's signals (and writes that they were sent) in the
    answer's ``call_on_close``, which the test client runs only when the answer is closed."""
    response = client.post(NOTIFY, data=body, headers=headers)
    response.close()
    return response


def in_process(count: int, profile: bool) -> tuple[float, pstats.Stats | None]:
    """Deliveries per second through Flask's test client: the pipeline (signals included) and
    SQLite alone."""
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        database = directory / "in-process.db"
        keys = generate_keypair("standard-webhooks")
        jobs = prepare([database], 0, count, keys.signing_key)
        app = Flask("bench", instance_path=str(directory))
        app.config.update(PAYHOOKS_DATABASE=str(database), PAYHOOKS_SECRETS=[keys.verifying_key])
        PayHooks(app)
        client = app.test_client()
        warm = min(50, count // 2)
        for body, headers in jobs[:warm]:
            post(client, body, headers)  # connection, schema check
        profiler = cProfile.Profile() if profile else None
        start = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        for body, headers in jobs[warm:]:
            response = post(client, body, headers)
            assert response.status_code == 200, response.get_data(as_text=True)
        if profiler is not None:
            profiler.disable()
        rate = (count - warm) / (time.perf_counter() - start)
        stop_receiver(app)
    return rate, None if profiler is None else pstats.Stats(profiler)


def stop_receiver(app: Flask) -> None:
    """Close the app's ledgers before its folder goes (else the exit would try to close a file
    that is gone)."""
    receiver_state(app).ledgers.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--count", type=at_least(1), default=1000, help="requests per app and round"
    )
    parser.add_argument("--rounds", type=at_least(1), default=6)
    parser.add_argument("--warmup", type=at_least(0), default=300)
    parser.add_argument(
        "--wal-count", type=at_least(1), default=300, help="deliveries per app for its WAL pages"
    )
    parser.add_argument("--workers", type=at_least(1), default=4)
    parser.add_argument("--worker-class", default="sync")
    parser.add_argument(
        "--threads", type=at_least(1), default=None, help="gthread threads per worker"
    )
    parser.add_argument("--connections", type=at_least(1), default=8)
    parser.add_argument("--client-processes", type=at_least(1), default=2)
    parser.add_argument("--in-process-count", type=at_least(1), default=2000)
    parser.add_argument("--profile", action="store_true", help="cProfile the in-process run")
    parser.add_argument(
        "--no-metrics",
        action="store_true",
        help="leave out the receiver with metrics and structured logs (FULL+metrics)",
    )
    parser.add_argument(
        "--synchronous",
        type=lambda text: [mode.strip().upper() for mode in text.split(",")],
        default=["FULL", "NORMAL"],
        help="PAYHOOKS_SQLITE_SYNCHRONOUS settings to measure, comma-separated",
    )
    parser.add_argument(
        "--without-index",
        metavar="NAME",
        default=None,
        help=(
            "also the receiver with FULL on a ledger without this index (or these, "
            "comma-separated), in the same rounds"
        ),
    )
    add_arguments(parser, "measure the receiver and its durable floor (migrated first)")
    args = parser.parse_args(argv)
    if not HAS_PROC:
        print("bench.receive needs /proc (Linux) to watch gunicorn's processes", file=sys.stderr)
        return 1

    rate, stats = in_process(args.in_process_count, args.profile)
    print(f"in process (test client): {rate:.0f} req/s")
    with postgres_database(args) as postgres:
        over_gunicorn(args, postgres)
    if stats is not None:
        print("\nin-process profile, by own time:")
        stats.sort_stats("tottime").print_stats(20)
        print("in-process profile, by cumulative time:")
        stats.sort_stats("cumulative").print_stats(45)
    return 0


if __name__ == "__main__":
    sys.exit(main())
