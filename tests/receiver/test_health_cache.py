"""The health cache: one probe per window whatever the callers, one probe in flight at a time,
and ``ledger_locked`` only once the write lock has been busy for the grace, probe after probe.

The probes are a real SQLite ledger's :meth:`~payhooks.storage.Ledger.health`, its write lock
held by another real connection; the clock is injected, so the windows are exact."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from payhooks.receiver.web.health_cache import HealthCache
from payhooks.storage import Ledger, LedgerHealth


class Clock:
    """Seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "payhooks.db", check_same_thread=False) as opened:
        yield opened


@pytest.fixture
def lock(tmp_path: Path, ledger: Ledger) -> Iterator[threading.Event]:
    """Set it and another connection takes the ledger's write lock; clear it and it lets go."""
    holder = sqlite3.connect(tmp_path / "payhooks.db", isolation_level=None)
    wanted = _Lock(holder)
    yield wanted
    wanted.clear()
    holder.close()


class _Lock(threading.Event):
    def __init__(self, holder: sqlite3.Connection) -> None:
        super().__init__()
        self._holder = holder

    def set(self) -> None:
        self._holder.execute("BEGIN EXCLUSIVE")
        super().set()

    def clear(self) -> None:
        if self.is_set():
            self._holder.execute("ROLLBACK")
        super().clear()


def _probe(ledger: Ledger) -> LedgerHealth:
    return ledger.health(lock_timeout_ms=10)


def test_answers_within_the_window_reuse_one_probe_and_a_later_one_probes_again(
    ledger: Ledger,
) -> None:
    clock = Clock()
    cache = HealthCache(locked_grace=5, max_age=1, clock=clock)

    answers = [cache.answer(lambda: _probe(ledger)) for _ in range(50)]
    clock.now += 0.999
    answers.append(cache.answer(lambda: _probe(ledger)))
    assert cache.probes == 1
    clock.now += 0.001
    answers.append(cache.answer(lambda: _probe(ledger)))

    assert cache.probes == 2
    assert {answer.code for answer in answers} == {None}


@pytest.mark.parametrize(
    ("busy_at", "locked_at"),
    [
        pytest.param([0, 1, 2, 3, 4, 5, 6], [5, 6], id="every-second"),
        pytest.param([0, 2, 4.999], [], id="just-short-of-the-grace"),
        pytest.param([0, 2, 5], [5], id="at-the-grace"),
        pytest.param([0, 30], [30], id="asked-rarely"),
        pytest.param([0], [], id="once"),
    ],
)
def test_ledger_locked_is_reported_once_every_probe_for_the_grace_found_the_lock_busy(
    ledger: Ledger, lock: threading.Event, busy_at: list[float], locked_at: list[float]
) -> None:
    clock = Clock()
    cache = HealthCache(locked_grace=5, max_age=1, clock=clock)
    start = clock.now
    lock.set()

    reported = []
    for second in busy_at:
        clock.now = start + second
        if cache.answer(lambda: _probe(ledger)).code == "ledger_locked":
            reported.append(second)

    assert reported == locked_at
    assert cache.probes == len(busy_at)


def test_a_probe_that_finds_the_lock_free_starts_the_grace_again(
    ledger: Ledger, lock: threading.Event
) -> None:
    clock = Clock()
    cache = HealthCache(locked_grace=5, max_age=1, clock=clock)

    codes = []
    for second, held in [(0, True), (4, True), (5, False), (6, True), (10, True), (11, True)]:
        lock.set() if held else lock.clear()
        clock.now = 100 + second
        codes.append(cache.answer(lambda: _probe(ledger)).code)
        lock.clear()

    assert codes == [None, None, None, None, None, "ledger_locked"]


def test_concurrent_callers_wait_for_the_first_probe_and_share_its_answer(
    ledger: Ledger,
) -> None:
    cache = HealthCache(locked_grace=5, max_age=1, clock=Clock())
    callers = 16
    arrived = threading.Barrier(callers + 1)
    release = threading.Event()
    answers: list[LedgerHealth] = []

    def slow_probe() -> LedgerHealth:
        release.wait()
        return _probe(ledger)

    def call() -> None:
        arrived.wait()
        answers.append(cache.answer(slow_probe))

    threads = [threading.Thread(target=call) for _ in range(callers)]
    for thread in threads:
        thread.start()
    arrived.wait()
    release.set()
    for thread in threads:
        thread.join()

    assert cache.probes == 1
    assert len(answers) == callers
    assert len({id(answer) for answer in answers}) == 1


def test_while_one_caller_probes_the_others_get_the_last_answer(ledger: Ledger) -> None:
    clock = Clock()
    cache = HealthCache(locked_grace=5, max_age=1, clock=clock)
    first = cache.answer(lambda: _probe(ledger))
    clock.now += 2
    probing = threading.Event()
    release = threading.Event()

    def slow_probe() -> LedgerHealth:
        probing.set()
        release.wait()
        return _probe(ledger)

    prober = threading.Thread(target=cache.answer, args=(slow_probe,))
    prober.start()
    probing.wait()
    meanwhile = cache.answer(lambda: _probe(ledger))
    release.set()
    prober.join()

    assert meanwhile is first
    assert cache.probes == 2


def test_a_probe_that_raises_keeps_the_last_answer_and_the_next_caller_probes(
    ledger: Ledger,
) -> None:
    clock = Clock()
    cache = HealthCache(locked_grace=5, max_age=1, clock=clock)

    def broken() -> LedgerHealth:
        raise RuntimeError("the probe broke")

    with pytest.raises(RuntimeError):
        cache.answer(broken)
    answer = cache.answer(lambda: _probe(ledger))

    assert (answer.code, cache.probes) == (None, 2)
