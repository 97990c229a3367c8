"""The marks of sent signals that wait for the worker's next write
(:mod:`payhooks.receiver.pipeline.sent_marks`), on a real ledger: taken and put back, written
by the thread once due, by ``close`` and at a normal exit, and never by a forked child."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from payhooks.receiver.ledgers import LedgerPool
from payhooks.receiver.pipeline.sent_marks import SentMarks
from payhooks.storage import Ledger
from tests.support.engines import tables
from tests.support.factories import make_outcome, record

SENT_AT = datetime(2026, 11, 23, 4, 30, tzinfo=UTC)


class Failed(Exception):
    """Stands for a transaction that fails after it took the marks."""


def _owed(ledger: Ledger, transaction_id: str) -> int:
    """An outcome owing one signal; its id."""
    recorded = record(ledger, make_outcome(transaction_id=transaction_id))
    delivery_id = (
        tables(ledger)
        .execute("SELECT delivery_id FROM outcomes WHERE id = ?", (recorded.outcome_id,))
        .fetchone()[0]
    )
    ledger.owe_signals(
        recorded.outcome_id,
        delivery_id=int(delivery_id),
        signals=["notification-received"],
        reconciliation="paid",
    )
    return recorded.outcome_id


def _owing(ledger: Ledger) -> set[int]:
    return {row.outcome_id for row in ledger.owed_signals()}


@pytest.fixture
def ledgers(database: Path | str) -> Iterator[LedgerPool]:
    """Each thread's ledger on the test's database, as the receiver's state holds them."""
    pool = LedgerPool(database, busy_timeout_ms=5000)
    yield pool
    pool.close()


@pytest.fixture
def marks(ledgers: LedgerPool) -> Iterator[SentMarks]:
    """Marks that wait a minute for a delivery."""
    made = SentMarks(ledgers.get, delay=60)
    yield made
    made.close()


def test_marks_a_failed_transaction_took_wait_again(marks: SentMarks, ledger: Ledger) -> None:
    outcome_id = _owed(ledger, "ll-1")
    marks.add(outcome_id, SENT_AT)

    def fail_after_taking() -> None:
        with marks.carried() as taken:
            assert taken == {outcome_id: SENT_AT}
            raise Failed

    with pytest.raises(Failed):
        fail_after_taking()

    assert marks.waiting() == 1
    with marks.carried() as taken:
        ledger.mark_many_signals_sent(taken)
    assert marks.waiting() == 0
    assert _owing(ledger) == set()


@pytest.mark.parametrize(("older_than", "taken_count"), [(None, 1), (0.0, 1), (60.0, 0)])
def test_only_marks_older_than_asked_are_taken(
    marks: SentMarks, older_than: float | None, taken_count: int
) -> None:
    marks.add(1, SENT_AT)

    with marks.carried(older_than) as taken:
        assert len(taken) == taken_count
    assert marks.waiting() == 1 - taken_count


def test_the_thread_writes_a_mark_once_it_is_due_and_close_ends_it(
    ledger: Ledger, ledgers: LedgerPool
) -> None:
    outcome_id = _owed(ledger, "ll-1")
    marks = SentMarks(ledgers.get, delay=0.05)
    try:
        marks.add(outcome_id, SENT_AT)
        thread = marks._thread
        assert thread is not None
        assert thread.is_alive()

        deadline = time.monotonic() + 10
        while _owing(ledger) and time.monotonic() < deadline:
            time.sleep(0.01)

        assert _owing(ledger) == set()  # the thread wrote it
    finally:
        marks.close()
    assert not thread.is_alive()
    (sent_at,) = tables(ledger).execute("SELECT sent_at FROM owed_signals").fetchone()
    assert sent_at.startswith("2026-11-23T04:30:00")  # when the receivers ran, not when written


def test_a_mark_without_a_time_zone_is_refused(marks: SentMarks) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        marks.add(1, datetime(2026, 11, 23, 4, 30))
    assert marks.waiting() == 0


def test_close_writes_what_waits(marks: SentMarks, ledger: Ledger) -> None:
    owed = [_owed(ledger, f"ll-{number}") for number in (1, 2)]
    for outcome_id in owed:
        marks.add(outcome_id, SENT_AT)

    marks.close()

    assert marks.waiting() == 0
    assert _owing(ledger) == set()


@pytest.mark.sqlite_only  # the child process opens the file
def test_a_normal_exit_writes_what_waits(ledger: Ledger, database: Path) -> None:
    outcome_id = _owed(ledger, "ll-1")
    script = (
        "import sys; from datetime import UTC, datetime\n"
        "from payhooks.receiver.pipeline.sent_marks import SentMarks\n"
        "from payhooks.storage import Ledger\n"
        "ledger = Ledger(sys.argv[1])\n"
        "marks = SentMarks(lambda: ledger, delay=60)\n"
        "marks.add(int(sys.argv[2]), datetime.now(UTC))\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", script, str(database), str(outcome_id)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert _owing(ledger) == set()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX's")
def test_a_forked_child_starts_with_no_marks_and_a_free_lock(marks: SentMarks) -> None:
    marks.add(1, SENT_AT)

    with warnings.catch_warnings():  # Python 3.12+ warns of fork() with threads running
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: take the lock (an inherited held one would hang), report, leave
        with marks.carried() as taken:
            os._exit(0 if taken == {} else 1)
    deadline = time.monotonic() + 30
    while (ended := os.waitpid(pid, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.01)
    if ended == (0, 0):
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on the marks' lock")

    assert os.waitstatus_to_exitcode(ended[1]) == 0
    assert marks.waiting() == 1  # the parent's own mark is still the parent's
