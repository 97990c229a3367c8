"""The shop ``bench.owed`` serves, and how its receiver's runs are read back and checked.

The shop is the README's ``shop.py`` with its ``ship`` receiver made to leave evidence: each run
sleeps 5 ms (so that two runs of one outcome at once would overlap visibly) and then, in one
``O_APPEND`` write (so gunicorn's workers never mix their lines), appends
``<outcome_id> <order> <pid> <start_ns> <end_ns>`` to ``shipments.log`` when it ships, or to
``raised.log`` before it raises. It raises (``RuntimeError``) for 1 order in 10 (the orders whose
number ends in 0) while a ``warehouse-down`` file exists beside it: the warehouse's ERP is down,
and a receiver must raise when the work did not happen, so that payhooks keeps the signal owed.

A run cut short by a SIGKILL writes no line: its overlap with another run cannot be seen, but
neither can it have shipped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

__all__ = [
    "RAISED_LOG",
    "SHIPMENTS_LOG",
    "SHOP_SOURCE",
    "WAREHOUSE_DOWN",
    "Duplicate",
    "Kill",
    "Run",
    "duplicates",
    "failing_order",
    "order_name",
    "overlapping",
    "read_runs",
]

#: The marker file whose presence makes the receiver raise for 1 order in 10.
WAREHOUSE_DOWN = "warehouse-down"
SHIPMENTS_LOG = "shipments.log"
RAISED_LOG = "raised.log"

#: ``shop.py``: the README's app, its checkout left out (``bench.owed`` registers each order
#: through the service client, as the checkout's comment says a shop creates the payment). It
#: names the three files above.
SHOP_SOURCE = '''\
import os
import time

from flask import Flask

from payhooks.receiver import PayHooks, config_from_env, signals

payhooks = PayHooks()
HERE = os.path.dirname(os.path.abspath(__file__))


def _append(name, line):
    """One O_APPEND write: lines of several workers never mix."""
    descriptor = os.open(os.path.join(HERE, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


def create_app(config=None):
    app = Flask(__name__)
    if config is None:  # SECRET_KEY and every PAYHOOKS_* variable set by bench.owed
        config = {"SECRET_KEY": os.environ.get("SECRET_KEY"), **config_from_env(os.environ)}
    app.config.update(config)
    payhooks.init_app(app)

    @signals.payment_succeeded.connect_via(app)
    def ship(sender, *, outcome, outcome_id, **extra):
        order = outcome.external_identifier
        start = time.time_ns()
        time.sleep(0.005)  # the warehouse's call: long enough for an overlap to show
        down = os.path.exists(os.path.join(HERE, "warehouse-down"))
        if down and int(order.rsplit("-", 1)[1]) % 10 == 0:
            _append("raised.log", f"{outcome_id} {order} {os.getpid()} {start} {time.time_ns()}\\n")
            raise RuntimeError(f"the warehouse is down: {order} not shipped")
        _append("shipments.log", f"{outcome_id} {order} {os.getpid()} {start} {time.time_ns()}\\n")

    return app
'''


def order_name(number: int) -> str:
    """The order's external identifier: ``order-00042``."""
    return f"order-{number:05d}"


def failing_order(number: int) -> bool:
    """Whether the shop's receiver raises for this order while the warehouse is down."""
    return number % 10 == 0


@dataclass(frozen=True, slots=True)
class Run:
    """One run of the ``ship`` receiver that got to its end: it shipped, or raised."""

    outcome_id: int
    order: str
    pid: int
    start_ns: int
    end_ns: int
    shipped: bool


@dataclass(frozen=True, slots=True)
class Kill:
    """A worker the bench SIGKILLed, and when (``time.time_ns()``, the receiver's clock)."""

    pid: int
    at_ns: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    """An order shipped more than once: its shipments in time order, whether they share one
    outcome id, and whether each but the last was by a worker killed after it ran (the one
    way the docs allow: the worker died before recording the round, and the lease passed)."""

    order: str
    runs: tuple[Run, ...]
    same_outcome: bool
    after_kill: bool

    @property
    def explained(self) -> bool:
        return self.same_outcome and self.after_kill


def read_runs(path: Path, *, shipped: bool) -> list[Run]:
    """The runs a log holds (none when it was never written)."""
    if not path.exists():
        return []
    runs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        outcome_id, order, pid, start, end = line.split()
        runs.append(Run(int(outcome_id), order, int(pid), int(start), int(end), shipped))
    return runs


def overlapping(runs: Iterable[Run]) -> list[tuple[Run, Run]]:
    """Pairs of runs of one outcome that overlapped in time (run twice at once): each run
    paired with the one before it that was still running when it started."""
    by_outcome: dict[int, list[Run]] = defaultdict(list)
    for run in runs:
        by_outcome[run.outcome_id].append(run)
    found = []
    for group in by_outcome.values():
        group.sort(key=lambda run: run.start_ns)
        latest = group[0]
        for run in group[1:]:
            if run.start_ns < latest.end_ns:
                found.append((latest, run))
            if run.end_ns > latest.end_ns:
                latest = run
    return found


def _killed_after(run: Run, following: Run, kills: Sequence[Kill]) -> bool:
    """Whether ``run``'s worker was killed after ``run`` ended and before ``following``."""
    return any(
        kill.pid == run.pid and run.end_ns <= kill.at_ns <= following.start_ns for kill in kills
    )


def duplicates(shipments: Iterable[Run], kills: Sequence[Kill]) -> list[Duplicate]:
    """Every order shipped more than once, by order."""
    by_order: dict[str, list[Run]] = defaultdict(list)
    for run in shipments:
        by_order[run.order].append(run)
    found = []
    for order in sorted(by_order):
        runs = sorted(by_order[order], key=lambda run: run.start_ns)
        if len(runs) < 2:
            continue
        found.append(
            Duplicate(
                order,
                tuple(runs),
                same_outcome=len({run.outcome_id for run in runs}) == 1,
                after_kill=all(
                    _killed_after(run, following, kills) for run, following in pairwise(runs)
                ),
            )
        )
    return found
