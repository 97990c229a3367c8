"""Which production setup slow clients cannot stall, and what it costs in throughput.

Issue 13.3: gunicorn with sync workers and nothing in front (the README's command until then)
was held for 31 s at a time by 4 slow connections. A sync worker serves one connection from
its first byte to its last, so as many slow clients as workers take every worker until
gunicorn's worker timeout kills them, and every notification waits behind them.

Each candidate setup is started on loopback with the demo app
(``payhooks.receiver.demo:create_app()``, its own ledger file, ``synchronous=FULL``):

- ``today``: gunicorn, 4 sync workers, no proxy (the command this replaces);
- ``gthread``: gunicorn, 4 gthread workers x 8 threads, ``--timeout 30 --graceful-timeout 30
  --keep-alive 5``;
- ``nginx``: the nginx site ``docs/deployment.md`` recommends (read from the page, so what
  is measured is what is documented), buffering every request whole, in front of gunicorn's
  4 sync workers on another loopback port;
- ``nginx-gthread``: the same nginx in front of 4 gthread workers x 8 threads;
- and, with ``--setups``, variants of ``nginx``: ``nginx-unix`` (gunicorn on a unix socket)
  and ``nginx1-gthread`` (one nginx worker process).

and measured twice:

1. **Throughput**: signed notifications as fast as ``bench/receive.py``'s client sends them
   (its pieces: the same jobs, processes and connections), in alternating rounds, the setups'
   order rotated each round. Each setup's figure is the median over rounds of its rate divided
   by ``today``'s rate *in the same round*, with the spread (lowest and highest such ratio):
   the machine is shared and noisy, and a ratio taken side by side is what survives that.
2. **Slow clients**: a bounded slowloris (``tests/support/slow_clients.py``: ``--slow``
   connections, half trickling headers and half a body, a byte every ``--interval`` seconds,
   loopback only) held open while ordinary notifications are sent at ``--probe-rate`` a second
   for ``--probe-seconds``, each on a fresh connection, each given ``--late`` seconds. Reported:
   p50, p99 and max latency, and how many did not complete in time.

Run by hand; it prints figures and never fails on them (``tests/system/test_bench_smoke.py``
runs it in a tiny size to keep it working)::

    python -m bench.slowloris                     # about 12 minutes on 2 CPUs
    python -m bench.slowloris --tiny              # a smoke run, under a minute
    python -m bench.slowloris --setups today,nginx --slow 4,16,64

It needs nginx for the setups behind it (``apt-get install -y nginx``); without it they are
reported as skipped. A setup that answers anything but 200 is flagged: its speed means
nothing. Every server it starts it stops, on error too.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from bench.receive import DEMO_APP, Figures, Job, notification, register, run_clients
from bench.rounds import at_least
from payhooks.verify import generate_keypair, get_signer
from tests.support.gunicorn_server import GunicornServer
from tests.support.nginx_server import NginxServer, nginx_missing_reason
from tests.support.slow_clients import ProbeResult, Slowloris, SlowStats, probe

BASELINE = "today"


@dataclass(frozen=True)
class Setup:
    """A candidate: how gunicorn runs, and whether the documented nginx is in front."""

    name: str
    title: str
    worker_class: str = "sync"
    threads: int | None = None
    extra_args: tuple[str, ...] = ()
    behind_nginx: bool = False
    #: nginx reaches gunicorn over a unix socket rather than loopback TCP.
    unix_socket: bool = False
    nginx_workers: str = "auto"


SETUPS: dict[str, Setup] = {
    setup.name: setup
    for setup in (
        Setup("today", "gunicorn 4 sync workers, no proxy"),
        Setup(
            "gthread",
            "gunicorn 4 gthread workers x 8 threads, no proxy",
            worker_class="gthread",
            threads=8,
            extra_args=("--timeout", "30", "--graceful-timeout", "30", "--keep-alive", "5"),
        ),
        Setup("nginx", "nginx (docs/deployment.md) -> gunicorn 4 sync workers", behind_nginx=True),
        Setup(
            "nginx-gthread",
            "nginx (docs/deployment.md) -> gunicorn 4 gthread workers x 8 threads",
            worker_class="gthread",
            threads=8,
            behind_nginx=True,
        ),
        # Variants, for --setups: over a unix socket; with one nginx worker.
        Setup(
            "nginx-unix",
            "nginx -> gunicorn 4 sync workers, over a unix socket",
            behind_nginx=True,
            unix_socket=True,
        ),
        Setup(
            "nginx1-gthread",
            "nginx, 1 worker process -> gunicorn 4 gthread workers x 8 threads",
            worker_class="gthread",
            threads=8,
            behind_nginx=True,
            nginx_workers="1",
        ),
    )
}


class Running:
    """A started setup: gunicorn, and nginx in front when the setup has it; :attr:`port` is
    where clients connect."""

    def __init__(self, setup: Setup, env: dict[str, str], folder: Path) -> None:
        self.setup = setup
        self.socket = folder / "gunicorn.sock"
        unix_bind = ("--bind", f"unix:{self.socket}") if setup.unix_socket else ()
        self.gunicorn = GunicornServer(
            DEMO_APP,
            env=env,
            cwd=folder,
            workers=4,
            worker_class=setup.worker_class,
            threads=setup.threads,
            extra_args=(*setup.extra_args, *unix_bind),
        )
        self.nginx: NginxServer | None = None
        self._folder = folder

    def start(self) -> Running:
        if self.setup.unix_socket:
            # nginx's workers run as an unprivileged user: let it reach the socket.
            self.socket.parent.chmod(0o711)
            self.socket.parent.parent.chmod(0o711)
        try:
            self.gunicorn.start()
            if self.setup.behind_nginx:
                upstream = (
                    f"unix:{self.socket}"
                    if self.setup.unix_socket
                    else f"127.0.0.1:{self.gunicorn.port}"
                )
                self.nginx = NginxServer.documented(
                    upstream=upstream,
                    prefix=self._folder / "nginx",
                    worker_processes=self.setup.nginx_workers,
                    tls=False,  # the clients trickle plain sockets; buffering is measured
                ).start()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def port(self) -> int:
        return self.nginx.port if self.nginx is not None else self.gunicorn.port

    def stop(self) -> None:
        try:
            if self.nginx is not None:
                self.nginx.stop()
        finally:
            self.gunicorn.stop()


def sign(first: int, count: int, signing_key: str) -> list[Job]:
    """Notifications ``first`` to ``first + count - 1`` (``bench/receive.py``'s), signed."""
    signer = get_signer("standard-webhooks", signing_key)
    jobs = []
    for number in range(first, first + count):
        body = notification(number)
        jobs.append((body, {**signer.sign(body), "Content-Type": "application/json"}))
    return jobs


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM ends the bench as Ctrl-C does, through every ``finally`` that stops a server
    (by default it would end the process at once and leave them running)."""
    raise SystemExit(128 + signum)


def wait_until_answering(port: int, *, timeout: float = 45.0) -> float:
    """Wait until ``GET /`` is answered within a second (after a slowloris, sync workers may
    still be held or restarting); how long that took."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        try:
            conn.request("GET", "/")
            conn.getresponse().read()
            return time.monotonic() - began
        except (OSError, http.client.HTTPException):
            time.sleep(0.2)
        finally:
            conn.close()
    return time.monotonic() - began


@dataclass
class SlowFigures:
    """One setup under one slowloris size, pooled over rounds."""

    probes: list[ProbeResult] = field(default_factory=list)
    slow: list[SlowStats] = field(default_factory=list)
    held_at_end: list[int] = field(default_factory=list)

    def pooled(self) -> ProbeResult:
        pooled = ProbeResult(self.probes[0].timeout)
        for result in self.probes:
            pooled.latencies.extend(result.latencies)
            pooled.late += result.late
            pooled.statuses.update(result.statuses)
        return pooled

    def line(self) -> str:
        pooled = self.pooled()
        opened = sum(stats.opened for stats in self.slow)
        dropped = sum(stats.dropped for stats in self.slow)
        return (
            f"{pooled.summary()}  statuses {dict(pooled.statuses)}  "
            f"slow connections opened {opened}, dropped by the server {dropped}, "
            f"open at the end {'/'.join(map(str, self.held_at_end))}"
        )


def ratios(figures: dict[str, Figures], name: str) -> list[float]:
    """``name``'s rate over the baseline's, round by round."""
    return [
        mine / base for mine, base in zip(figures[name].rates, figures[BASELINE].rates, strict=True)
    ]


def ratio_text(values: Sequence[float]) -> str:
    return (
        f"{statistics.median(values):.2f}x today's "
        f"[{min(values):.2f}-{max(values):.2f} over {len(values)} rounds]"
    )


def rotated(items: Sequence[str], by: int) -> list[str]:
    shift = by % len(items)
    return [*items[shift:], *items[:shift]]


def measure(args: argparse.Namespace, names: list[str]) -> None:
    slow_sizes: list[int] = args.slow if args.slow_rounds > 0 else []  # 0: throughput only
    probes_per_phase = max(1, round(args.probe_rate * args.probe_seconds))
    phases = args.slow_rounds * len(slow_sizes)
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        keys = generate_keypair("standard-webhooks")
        databases = {name: folder / f"{name}.db" for name in names}
        print(f"registering payments ({os.cpu_count()} CPUs) ...")
        total = args.warmup + args.rounds * args.count + phases * probes_per_phase
        for database in databases.values():
            register(database, 0, total)
        first = 0

        def jobs(count: int) -> list[Job]:
            """The next ``count`` notifications, signed now: a signature's timestamp is only
            accepted for minutes, and registering takes minutes on a busy machine."""
            nonlocal first
            made = sign(first, count, keys.signing_key)
            first += count
            return made

        running: dict[str, Running] = {}
        try:
            for name in names:
                setup = SETUPS[name]
                folder_of = folder / name
                folder_of.mkdir()
                env = {
                    "PAYHOOKS_DATABASE": str(databases[name]),
                    "PAYHOOKS_SECRETS": keys.verifying_key,
                    "SECRET_KEY": "bench",
                }
                running[name] = Running(setup, env, folder_of).start()
            warmup = jobs(args.warmup)
            for name in names:
                run_clients(running[name].port, warmup, args.client_processes, args.connections)

            print(
                f"throughput: {args.rounds} alternating rounds of {args.count} notifications "
                f"per setup; client {args.client_processes} processes, "
                f"{args.connections} connections"
            )
            figures = {name: Figures(name) for name in names}
            for index in range(args.rounds):
                round_jobs = jobs(args.count)
                for name in rotated(names, index):
                    result = run_clients(
                        running[name].port, round_jobs, args.client_processes, args.connections
                    )
                    figures[name].add(result, len(round_jobs), 0.0)
            for name in names:
                print(throughput_line(figures, name))

            if slow_sizes:
                print(
                    f"slow clients: {', '.join(map(str, slow_sizes))} slow connections (half "
                    f"headers, half body, a byte every {args.interval:g} s), "
                    f"{args.slow_rounds} alternating rounds; meanwhile {probes_per_phase} "
                    f"notifications at {args.probe_rate:g}/s, each given {args.late:g} s"
                )
            slow = {(name, size): SlowFigures() for name in names for size in slow_sizes}
            for index in range(args.slow_rounds):
                for size in slow_sizes:
                    phase_jobs = jobs(probes_per_phase)
                    for name in rotated(names, index):
                        slow_phase(slow[name, size], running[name], size, phase_jobs, args)
            for size in slow_sizes:
                for name in names:
                    print(f"{name:<13} {size:>3} slow: {slow[name, size].line()}")
        finally:
            for server in running.values():
                server.stop()

    print("summary, one line per setup:")
    for name in names:
        parts = [f"throughput {ratio_text(ratios(figures, name))}{answered(figures[name])}"]
        parts += [f"{size} slow: {slow[name, size].pooled().summary()}" for size in slow_sizes]
        print(f"setup {name} ({SETUPS[name].title}): " + "; ".join(parts))


def answered(figures: Figures) -> str:
    """Empty when every notification was answered 200; else a warning with the statuses (a
    setup that answers 502 quickly is not fast, it is broken)."""
    if set(figures.statuses) == {200}:
        return ""
    return f" (NOT ALL ANSWERED 200: {dict(figures.statuses)})"


def throughput_line(figures: dict[str, Figures], name: str) -> str:
    mine = figures[name]
    ordered = sorted(mine.latencies)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    rounds = " ".join(f"{rate:.0f}" for rate in mine.rates)
    return (
        f"{name:<13} {mine.rate:6.0f} req/s (rounds {rounds})  {ratio_text(ratios(figures, name))}"
        f"  p50 {p50:5.2f} ms  p99 {p99:6.2f} ms  {dict(mine.statuses)}{answered(mine)}"
    )


def slow_phase(
    figures: SlowFigures,
    server: Running,
    size: int,
    jobs: Sequence[Job],
    args: argparse.Namespace,
) -> None:
    """One setup under ``size`` slow connections: start them, let them settle in, send the
    probes, note how many slow ones are still held, stop them."""
    waited = wait_until_answering(server.port)
    if waited > 1.0:
        print(f"  ({server.setup.name} took {waited:.1f} s to answer again before this phase)")
    duration = args.settle + len(jobs) / args.probe_rate + args.late + 5.0
    with Slowloris(server.port, size, interval=args.interval, duration=duration) as slowloris:
        slowloris.wait_until_open(timeout=5.0)
        time.sleep(args.settle)
        figures.probes.append(probe(server.port, jobs, rate=args.probe_rate, timeout=args.late))
        figures.held_at_end.append(slowloris.open_now)
    figures.slow.append(slowloris.stats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--setups",
        default="today,gthread,nginx,nginx-gthread",
        help=f"comma-separated, of: {', '.join(SETUPS)}",
    )
    parser.add_argument("--rounds", type=at_least(1), default=7, help="throughput rounds")
    parser.add_argument(
        "--count", type=at_least(1), default=1500, help="notifications per setup, round"
    )
    parser.add_argument("--warmup", type=at_least(0), default=200)
    parser.add_argument("--connections", type=at_least(1), default=8)
    parser.add_argument("--client-processes", type=at_least(1), default=2)
    parser.add_argument(
        "--slow",
        type=lambda text: [int(size) for size in text.split(",")],
        default=[4, 16, 64],
        help="slow connection counts, comma-separated",
    )
    parser.add_argument("--slow-rounds", type=at_least(1), default=2)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between bytes")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds before probing")
    parser.add_argument("--probe-rate", type=float, default=10.0, help="notifications a second")
    parser.add_argument("--probe-seconds", type=float, default=10.0)
    parser.add_argument("--late", type=float, default=5.0, help="seconds a probe is given")
    parser.add_argument("--tiny", action="store_true", help="a smoke run (figures meaningless)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.rounds, args.count, args.warmup, args.slow, args.slow_rounds = 1, 40, 10, [2], 1
        args.interval, args.settle, args.probe_rate, args.probe_seconds = 0.5, 0.3, 5.0, 1.0
        args.late = 2.0

    names = [name.strip() for name in args.setups.split(",") if name.strip()]
    unknown = [name for name in names if name not in SETUPS]
    if unknown or BASELINE not in names:
        parser.error(f"setups are {', '.join(SETUPS)} and must include {BASELINE}: {unknown}")
    missing = nginx_missing_reason()
    if missing is not None:
        for name in [name for name in names if SETUPS[name].behind_nginx]:
            print(f"setup {name} ({SETUPS[name].title}): skipped, {missing}")
            names.remove(name)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    measure(args, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
