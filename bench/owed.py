"""Owed signals under gunicorn: a receiver that raises for a while, worker kills, and the count.

The README's shop (:mod:`bench.owed_shop`: its ``ship`` receiver logs each run, and raises for 1
order in 10 while a ``warehouse-down`` file exists) is served by gunicorn (4 sync workers on
127.0.0.1). The bench registers and pays ``--orders`` orders through the local sandbox of the
service (:class:`payhooks.service.sandbox.SandboxServer`, which signs each notification and
sends it to the receiver over HTTP) with the warehouse down, keeps it down ``--down-seconds``
after the last notification was delivered (the retry phase: the failing signals are retried
with backoff by each worker's timer and by the deliveries' senders, and raise again), then
removes the file (recovery) and waits, up to ``--drain-limit`` seconds, until the ledger shows
nothing owed. With ``--kill-workers K`` it SIGKILLs K random workers at random times between
the end of the payments and ``--kill-window`` seconds after recovery (gunicorn forks new ones).

The retry settings are short so that a run takes minutes, not a day: a first retry after 1 s,
doubling up to 4 s, 20 rounds before parking (about 70 s down), each worker's timer looking
every second, and a lease of 10 s (far longer than the 5 ms receiver, so a second sender could
only start the same outcome while the first still ran if a whole claim took longer than that).

It then counts, from the receiver's own logs and the ledger: orders paid, orders shipped,
orders shipped more than once (each with whether its shipments share one outcome id and whether
every shipment but the last was by a worker killed after it: the one duplicate the docs allow),
overlapping runs of one outcome (two runs at once), orders paid and never shipped (lost),
signals parked, and the time to drain after recovery. It exits 1 when an order is lost, two
runs overlapped, or a duplicate is not explained by a kill; the times are figures, never
checked. SQLite always (a ledger file, ``synchronous`` FULL); PostgreSQL too with ``--postgres
URL`` or ``--start-postgres`` (``--no-sqlite`` for PostgreSQL alone)::

    python -m bench.owed                                   # 1,000 orders on SQLite, no kill
    python -m bench.owed --kill-workers 2 --start-postgres # and on PostgreSQL, 2 kills each
    python -m bench.owed --orders 60 --down-seconds 4 --kill-workers 1  # the smoke run's size

CI runs it small in ``tests/system/test_bench_smoke.py``.
"""

from __future__ import annotations

import argparse
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.owed_shop import (
    RAISED_LOG,
    SHIPMENTS_LOG,
    SHOP_SOURCE,
    WAREHOUSE_DOWN,
    Kill,
    duplicates,
    failing_order,
    order_name,
    overlapping,
    read_runs,
)
from bench.postgres import add_arguments, postgres_database, settings
from bench.rounds import at_least
from payhooks.service.client import Card, CardTransaction, ServiceClient
from payhooks.service.sandbox import NotificationState, SandboxServer, SandboxSettings
from payhooks.storage import Ledger, migrate
from payhooks.verify import DEFAULT_SCHEME, generate_keypair
from tests.support.gunicorn_server import GunicornServer

#: The short retry settings (see the module docstring), as the shop reads them from its
#: environment.
RETRY_SETTINGS = {
    "PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS": "1",
    "PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS": "4",
    "PAYHOOKS_SIGNALS_MAX_ATTEMPTS": "20",
    "PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS": "1",
    "PAYHOOKS_SIGNALS_LEASE_SECONDS": "10",
}
#: How long a kill waits for a worker to be caught sending signals before it picks one at random.
_CATCH_SECONDS = 2.0
_MERCHANT = "sandbox-merchant"
_PAYING_CARD = Card(number="4242424242424242", exp_month=12, exp_year=2030, cvc="123")


@dataclass
class Figures:
    """What one engine's run counted; :meth:`failures` says which of them break the goal."""

    orders: int
    paid: int
    shipped: int
    shipments: int
    lost: list[str]
    duplicates: list[str]
    unexplained: int
    overlapping: int
    raising_runs: int
    raised_by_ledger: int
    failing_orders: int
    parked_at_recovery: int
    parked_at_end: int
    owed_at_end: int
    drain_seconds: float | None

    def failures(self) -> list[str]:
        found = []
        if self.paid < self.orders:
            found.append(f"{self.orders - self.paid} order(s) never paid: the run proves nothing")
        if self.lost:
            found.append(f"{len(self.lost)} paid order(s) never shipped")
        if self.overlapping:
            found.append(f"{self.overlapping} overlapping run(s) of one outcome")
        if self.unexplained:
            found.append(f"{self.unexplained} duplicate(s) not explained by a kill")
        return found


def _pay(sandbox: SandboxServer, database: str, numbers: list[int]) -> None:
    """Register and pay these orders, one after the other, through a client of their own."""
    with (
        Ledger(database) as ledger,
        ServiceClient(
            sandbox.url,
            access_token=sandbox.issue_token(),
            merchant_account_id=_MERCHANT,
            ledger=ledger,
        ) as client,
    ):
        for number in numbers:
            client.create_transaction(
                CardTransaction(
                    external_identifier=order_name(number),
                    amount=19900,
                    currency="CNY",
                    method="stripe",
                    card=_PAYING_CARD,
                    description="Tea set",
                )
            )


def _owed(ledger: Ledger) -> tuple[int, int]:
    """Signals still owed, and how many of them are parked."""
    owed = ledger.signals.owed()
    return len(owed), sum(1 for signal in owed if signal.parked_at is not None)


class _Killer:
    """SIGKILLs a worker at each of its times (``time.monotonic()``), when called.

    At each time it watches the receiver's logs for up to :data:`_CATCH_SECONDS` and kills the
    worker that appends the next line, at once: that worker is sending owed signals, so the
    kill most likely lands between a receiver's end and the round's record, or in the middle of
    a claim of several outcomes, the windows where a signal could be lost or run twice. A
    worker picked at random when no receiver ran meanwhile.
    """

    def __init__(
        self, server: GunicornServer, folder: Path, times: list[float], chooser: random.Random
    ) -> None:
        self.server, self.times, self.chooser = server, sorted(times), chooser
        self.logs = [folder / SHIPMENTS_LOG, folder / RAISED_LOG]
        self.kills: list[Kill] = []
        #: Per kill, whether it caught a worker sending signals (True) or picked one at random.
        self.caught: list[bool] = []

    def __call__(self) -> None:
        while self.times and self.times[0] <= time.monotonic():
            self.times.pop(0)
            pid = self._sending_worker()
            self.caught.append(pid is not None)
            if pid is None:
                pid = self.chooser.choice(sorted(self.server.worker_pids()))
            self.server.kill_worker(pid)
            self.kills.append(Kill(pid, time.time_ns()))
            self.server.wait_for_workers(gone=pid, timeout=120)

    def _sending_worker(self) -> int | None:
        """The worker that appends the next line to a receiver's log within the catch time."""
        sizes = {log: _size(log) for log in self.logs}
        deadline = time.monotonic() + _CATCH_SECONDS
        while time.monotonic() < deadline:
            for log in self.logs:
                if _size(log) > sizes[log]:
                    with log.open("rb") as lines:
                        lines.seek(sizes[log])
                        pid = int(lines.read().splitlines()[0].split()[2])
                    if pid in self.server.worker_pids():
                        return pid
                    sizes[log] = _size(log)
            time.sleep(0.001)
        return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _wait(seconds: float, killer: _Killer) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        killer()
        time.sleep(0.05)


def _signals_listing(database: str) -> str:
    """The last line of ``payhooks signals`` on the ledger, as a person would read it."""
    listed = subprocess.run(
        [sys.executable, "-m", "payhooks.receiver", "signals", "--database", database],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = (listed.stdout or listed.stderr).strip().splitlines()
    return lines[-1] if lines else f"(exit {listed.returncode}, no output)"


@dataclass
class _Timeline:
    """What the serving part of a run saw, for the count after it."""

    kills: list[Kill]
    caught: list[bool]
    recovered_ns: int
    owed_at_recovery: int
    parked_at_recovery: int
    drain_seconds: float | None


def _pay_all(sandbox: SandboxServer, database: str, args: argparse.Namespace) -> None:
    """Every order, by ``args.clients`` threads; then wait for the sandbox's notifications."""
    started = time.monotonic()
    numbers = list(range(args.orders))
    with ThreadPoolExecutor(args.clients) as pool:
        for done in pool.map(
            lambda n: _pay(sandbox, database, numbers[n :: args.clients]), range(args.clients)
        ):
            del done
    delivered_all = sandbox.wait_for_notifications(args.drain_limit)
    notes = sandbox.notifications()
    delivered = sum(note.state is NotificationState.DELIVERED for note in notes)
    print(
        f"  paid {args.orders} orders in {time.monotonic() - started:.1f} s: {delivered} "
        f"notifications delivered ({sum(len(note.tries) for note in notes)} tries)"
        + ("" if delivered_all else ", some still pending")
    )


def _retry_and_recover(
    server: GunicornServer, ledger: Ledger, folder: Path, args: argparse.Namespace
) -> _Timeline:
    """The warehouse down ``args.down_seconds`` more, then up; the kills meanwhile; then the
    wait until nothing is owed (and every kill is done)."""
    chooser = random.Random(args.seed)
    paid_at = time.monotonic()
    recovery = paid_at + args.down_seconds
    times = [
        chooser.uniform(paid_at, recovery + args.kill_window) for _ in range(args.kill_workers)
    ]
    killer = _Killer(server, folder, times, chooser)
    _wait(recovery - time.monotonic(), killer)
    owed_at_recovery, parked_at_recovery = _owed(ledger)
    (folder / WAREHOUSE_DOWN).unlink()
    recovered, recovered_ns = time.monotonic(), time.time_ns()
    print(
        f"  recovery after {recovered - paid_at:.1f} s down: {owed_at_recovery} signal(s) owed, "
        f"{parked_at_recovery} parked"
    )
    drained: float | None = None
    while time.monotonic() < recovered + args.drain_limit:
        killer()
        owed, _ = _owed(ledger)
        if owed:
            drained = None
        elif drained is None:
            drained = time.monotonic() - recovered
        if drained is not None and not killer.times:
            break
        time.sleep(0.1)
    time.sleep(1.0)  # a second run of anything, were there one, would land now
    return _Timeline(
        killer.kills, killer.caught, recovered_ns, owed_at_recovery, parked_at_recovery, drained
    )


def run(engine: str, database: str, folder: Path, args: argparse.Namespace) -> Figures:
    """One run on ``database`` (a SQLite file or a PostgreSQL URL), the shop in ``folder``;
    prints as it goes."""
    keys = generate_keypair(DEFAULT_SCHEME)
    (folder / "shop.py").write_text(SHOP_SOURCE, encoding="utf-8")
    migrate(database)  # before the workers start
    with Ledger(database) as ledger:
        if ledger.signals.owed() or ledger.state(order_name(0)) is not None:
            raise SystemExit(f"{engine}: give an empty database; this one holds payments")
        env = {
            "PYTHONPATH": str(folder),
            "SECRET_KEY": secrets.token_hex(32),
            "PAYHOOKS_DATABASE": database,
            "PAYHOOKS_SECRETS": keys.verifying_key,
            **RETRY_SETTINGS,
        }
        (folder / WAREHOUSE_DOWN).write_text("the ERP is down\n", encoding="utf-8")
        with GunicornServer(
            "shop:create_app()", env=env, cwd=folder, workers=args.workers
        ) as server:
            sandbox_settings = SandboxSettings(
                signing_key=keys.signing_key,
                notification_url=server.url("/payhooks/notifications"),
                notify_backoff=0.2,
                notify_attempts=10,
            )
            with SandboxServer.start(sandbox_settings) as sandbox:
                _pay_all(sandbox, database, args)
                timeline = _retry_and_recover(server, ledger, folder, args)
        owed_at_end, parked_at_end = _owed(ledger)
        raised_by_ledger = sum(count for _, _, count in ledger.signals.receiver_errors())
        paid = sum(str(ledger.state(order_name(n))) == "paid" for n in range(args.orders))
    for kill, caught in zip(timeline.kills, timeline.caught, strict=True):
        print(
            f"  killed worker {kill.pid} {(kill.at_ns - timeline.recovered_ns) / 1e9:+.1f} s "
            f"from recovery ({'sending signals' if caught else 'picked at random'})"
        )
    print(f"  `payhooks signals` after: {_signals_listing(database)}")
    shipped_runs = read_runs(folder / SHIPMENTS_LOG, shipped=True)
    raised_runs = read_runs(folder / RAISED_LOG, shipped=False)
    shipped = {run.order for run in shipped_runs}
    doubles = duplicates(shipped_runs, timeline.kills)
    for double in doubles:
        outcomes = ", ".join(f"outcome {run.outcome_id} in {run.pid}" for run in double.runs)
        print(
            f"  {double.order} shipped {len(double.runs)} times ({outcomes}): "
            f"{'the same' if double.same_outcome else 'different'} outcome id, "
            f"{'after a kill' if double.after_kill else 'NOT after a kill'}"
        )
    overlaps = overlapping([*shipped_runs, *raised_runs])
    for first, second in overlaps:
        print(f"  outcome {first.outcome_id} ran at once in workers {first.pid} and {second.pid}")
    return Figures(
        orders=args.orders,
        paid=paid,
        shipped=len(shipped),
        shipments=len(shipped_runs),
        lost=[order_name(n) for n in range(args.orders) if order_name(n) not in shipped],
        duplicates=[double.order for double in doubles],
        unexplained=sum(not double.explained for double in doubles),
        overlapping=len(overlaps),
        raising_runs=len(raised_runs),
        raised_by_ledger=raised_by_ledger,
        failing_orders=sum(failing_order(n) for n in range(args.orders)),
        parked_at_recovery=timeline.parked_at_recovery,
        parked_at_end=parked_at_end,
        owed_at_end=owed_at_end,
        drain_seconds=timeline.drain_seconds,
    )


def report(figures: Figures) -> None:
    """The figures, one line each."""
    drain = "not drained" if figures.drain_seconds is None else f"{figures.drain_seconds:.1f} s"
    print(f"  orders paid:                       {figures.paid} of {figures.orders}")
    print(f"  orders shipped:                    {figures.shipped} ({figures.shipments} shipments)")
    print(
        f"  receiver raised:                   {figures.raising_runs} times, for "
        f"{figures.failing_orders} orders (1 in 10) while the warehouse was down; "
        f"{figures.raised_by_ledger} recorded by the ledger"
    )
    print(
        f"  shipped more than once:            {len(figures.duplicates)} "
        f"({figures.unexplained} not explained by a kill)"
    )
    print(f"  overlapping runs of one outcome:   {figures.overlapping}")
    lost = f" ({', '.join(figures.lost[:10])}{', ...' if len(figures.lost) > 10 else ''})"
    print(f"  lost (paid, never shipped):        {len(figures.lost)}{lost if figures.lost else ''}")
    print(
        f"  signals parked:                    {figures.parked_at_recovery} at recovery, "
        f"{figures.parked_at_end} at the end ({figures.owed_at_end} owed at the end)"
    )
    print(f"  time to drain after recovery:      {drain}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.owed", description=__doc__)
    parser.add_argument("--orders", type=at_least(1), default=1000, help="orders paid (1000)")
    parser.add_argument("--workers", type=at_least(1), default=4, help="gunicorn workers (4)")
    parser.add_argument(
        "--clients", type=at_least(1), default=4, help="threads creating payments (4)"
    )
    parser.add_argument(
        "--down-seconds",
        type=float,
        default=20.0,
        help="how long the warehouse stays down after the last notification (20)",
    )
    parser.add_argument(
        "--kill-workers", type=at_least(0), default=0, help="workers SIGKILLed meanwhile (0)"
    )
    parser.add_argument(
        "--kill-window",
        type=float,
        default=4.0,
        help="kills fall between the payments' end and this long after recovery (4 s: the "
        "longest retry delay, when the raised signals run again)",
    )
    parser.add_argument(
        "--drain-limit",
        type=float,
        default=300.0,
        help="the longest wait for the notifications, and for nothing owed after recovery",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="the kills' times and targets (printed if drawn)"
    )
    parser.add_argument(
        "--no-sqlite", action="store_true", help="PostgreSQL only (with --postgres or ...)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the shop's folder (its logs, its ledger file)"
    )
    add_arguments(parser, "run")
    args = parser.parse_args(argv)
    if args.no_sqlite and not (args.postgres or args.start_postgres):
        parser.error("--no-sqlite: give --postgres URL or --start-postgres")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 32)
    print(
        f"{args.orders} orders, {args.workers} gunicorn workers, warehouse down "
        f"{args.down_seconds:g} s after the payments, {args.kill_workers} worker kill(s) "
        f"(--seed {args.seed}); "
        + ", ".join(
            f"{key.removeprefix('PAYHOOKS_SIGNALS_')}={value}"
            for key, value in RETRY_SETTINGS.items()
        )
    )
    failed = False
    with postgres_database(args) as postgres:
        engines: list[tuple[str, str | None]] = []
        if not args.no_sqlite:
            engines.append(("SQLite (a ledger file, synchronous FULL)", None))
        if postgres:
            engines.append((settings(postgres), postgres))
        for engine, url in engines:
            folder = Path(tempfile.mkdtemp(prefix="payhooks-owed-"))
            print(f"on {engine}:")
            try:
                figures = run(engine, url or str(folder / "payhooks.db"), folder, args)
            finally:
                if args.keep:
                    print(f"  the shop, its logs and its ledger are in {folder}")
                else:
                    shutil.rmtree(folder, ignore_errors=True)
            report(figures)
            for failure in figures.failures():
                print(f"  FAILED: {failure}")
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
