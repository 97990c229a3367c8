"""``bench.owed`` still runs, in a small size, on each engine, and its checks still hold; and the
checks it counts by can see what they look for.

The smoke run serves the bench's shop under gunicorn (4 workers), pays 60 orders through the
sandbox with the warehouse down (the receiver raises for 6 of them), keeps it down 4 s, kills
one worker, recovers, and waits for nothing owed. What is asserted is the goal's counts, never a
time: every order paid and shipped, none lost, no two runs of one outcome at once, nothing owed
at the end, and the failing orders' receivers raised more than once each time round (retried,
not merely run once). Were the raised signals not retried (or parked at their first raise), the
6 orders would stay unshipped past the drain limit and the run would fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.owed_shop import Duplicate, Kill, Run, duplicates, overlapping
from tests.support.gunicorn_server import HAS_PROC

REPO = Path(__file__).resolve().parents[2]
#: The smoke run's size: a quarter of a minute of serving on a quiet 2-CPU machine.
SMOKE = ("--orders", "60", "--down-seconds", "4", "--kill-workers", "1", "--drain-limit", "60")
#: The whole run's limit: about 25 s per engine on a quiet 2-CPU machine, several times that on a
#: loaded one; under pytest-timeout's 600 s, so the bench's own output is what a failure shows.
LIMIT = 540


def _figure(output: str, label: str) -> str:
    match = re.search(rf"^  {re.escape(label)}: +(.+)$", output, re.MULTILINE)
    assert match, output
    return match.group(1)


@pytest.mark.skipif(not HAS_PROC, reason="the bench finds gunicorn's workers in /proc")
def test_the_owed_bench_ships_every_paid_order_after_recovery_with_a_worker_killed(
    engine: str, request: pytest.FixtureRequest
) -> None:
    where = []
    if engine == "postgresql":
        where = ["--postgres", request.getfixturevalue("postgres_url"), "--no-sqlite"]
    result = subprocess.run(
        [sys.executable, "-m", "bench.owed", *SMOKE, *where],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )
    output = result.stdout
    assert result.returncode == 0, output + result.stderr[-3000:]
    assert output.count("\non ") == 1, output
    assert ("on PostgreSQL" in output) == (engine == "postgresql")
    assert _figure(output, "orders paid") == "60 of 60"
    assert _figure(output, "orders shipped").startswith("60 ")
    assert _figure(output, "lost (paid, never shipped)") == "0"
    assert _figure(output, "overlapping runs of one outcome") == "0"
    assert _figure(output, "shipped more than once").endswith("(0 not explained by a kill)")
    assert _figure(output, "`payhooks signals` after") == "No signal is owed."
    assert _figure(output, "signals parked").endswith("(0 owed at the end)")
    assert re.match(r"[\d.]+ s$", _figure(output, "time to drain after recovery")), output
    assert len(re.findall(r"^  killed worker \d+ ", output, re.MULTILINE)) == 1, output
    raised = re.match(r"(\d+) times, for 6 orders .*", _figure(output, "receiver raised"))
    assert raised, output
    assert int(raised.group(1)) > 6, output  # retried while down: each failing order raised again


def _run(outcome_id: int, pid: int, start: int, end: int, order: str = "order-00010") -> Run:
    return Run(outcome_id, order, pid, start, end, shipped=True)


@pytest.mark.parametrize(
    ("second_start", "overlaps"),
    [(150, True), (199, True), (200, False), (300, False)],
)
def test_two_runs_of_one_outcome_overlap_when_the_second_starts_before_the_first_ends(
    second_start: int, overlaps: bool
) -> None:
    first, second = _run(7, 1, 100, 200), _run(7, 2, second_start, second_start + 50)
    other = _run(8, 3, 120, 180, order="order-00020")  # another outcome: never an overlap

    assert overlapping([second, other, first]) == ([(first, second)] if overlaps else [])


def test_a_run_inside_a_long_one_overlaps_it_even_after_a_short_one_between() -> None:
    long, short, inside = _run(7, 1, 100, 1000), _run(7, 2, 1001, 1002), _run(7, 3, 500, 600)

    assert overlapping([long, short, inside]) == [(long, inside)]


@pytest.mark.parametrize(
    ("kills", "second_outcome", "explained"),
    [
        ([Kill(pid=1, at_ns=250)], 7, True),  # killed after shipping, before the second run
        ([], 7, False),  # no kill at all
        ([Kill(pid=2, at_ns=250)], 7, False),  # another worker was killed
        ([Kill(pid=1, at_ns=150)], 7, False),  # killed while it still ran: it never shipped
        ([Kill(pid=1, at_ns=350)], 7, False),  # killed after the second run had started
        ([Kill(pid=1, at_ns=250)], 8, False),  # a second outcome of the order
    ],
)
def test_a_duplicate_is_explained_only_by_a_kill_of_its_worker_between_its_shipments(
    kills: list[Kill], second_outcome: int, explained: bool
) -> None:
    first, second = _run(7, 1, 100, 200), _run(second_outcome, 2, 300, 400)

    found = duplicates([second, first, _run(9, 2, 10, 20, order="order-00030")], kills)

    assert [(d.order, d.runs) for d in found] == [("order-00010", (first, second))]
    assert isinstance(found[0], Duplicate)
    assert found[0].explained is explained
