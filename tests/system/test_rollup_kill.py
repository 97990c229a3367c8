"""``payhooks rollup`` killed (SIGKILL, a real subprocess) at random points, many times, while
notifications keep arriving: after the next refresh the rollup's totals are the live ones and
``--verify`` finds nothing (payhooks.storage.reads.rollup: marks and watermark move together, a
day's rows and the clearing of its mark too)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from payhooks.storage import Ledger, PaymentState
from payhooks.storage.reads.local_hours import day_bounds
from tests.support.factories import make_outcome, record

pytestmark = pytest.mark.slow

_DAYS = 40


def _env(database: Path | str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}
    return {**env, "PAYHOOKS_DATABASE": str(database)}


def _history(ledger: Ledger, rng: random.Random, start: int, count: int) -> None:
    """``count`` payments registered now, each paid (some refunded) on one of the last
    :data:`_DAYS` days in turn: late notifications for days long ended, every day touched."""
    now = datetime.now(UTC)
    for n in range(start, start + count):
        ident = f"order-{n}"
        ledger.expect_transaction(ident, 1000 + n % 7, rng.choice(["CNY", "USD"]))
        paid_at = now - timedelta(days=n % _DAYS, minutes=rng.randrange(1440))
        for code, state in [
            ("PS", PaymentState.SUCCEEDED),
            *([("RS", PaymentState.REFUNDED)] if n % 5 == 0 else []),
        ]:
            outcome = make_outcome(
                external_identifier=ident, transaction_id=f"{ident}-t1", payment_status=code,
                state=state, amount_minor=1000 + n % 3, paid_at=paid_at, currency="CNY",
            )  # fmt: skip
            record(ledger, outcome)


def _dirty(ledger: Ledger) -> int:
    with ledger._engine.read() as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM finance_rollup_dirty").fetchone()
    return int(count)


def _wait_for_marks(ledger: Ledger, child: subprocess.Popen[bytes]) -> None:
    """Until the refresh has written its marks (or ended), looking every few milliseconds."""
    give_up = time.monotonic() + 30
    while child.poll() is None and not _dirty(ledger) and time.monotonic() < give_up:
        time.sleep(0.003)


def test_a_refresh_killed_anywhere_many_times_leaves_the_totals_exact(
    database: Path | str,
) -> None:
    rng = random.Random(39)
    env = _env(database)
    kills = midway = 0
    with Ledger(database) as ledger:
        with ledger.transaction():  # many rows a day, so each day takes a while to compute
            _history(ledger, rng, 0, 4_000)
        for round_ in range(40):
            if kills >= 8 and midway >= 3:
                break
            _history(ledger, rng, 10_000 * (round_ + 1), _DAYS)
            child = subprocess.Popen(
                [sys.executable, "-m", "payhooks.receiver", "rollup"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            if round_ % 2:  # anywhere: starting, marking, computing, done
                time.sleep(rng.uniform(0.2, 1.2))
            else:  # once its marks are written: while it computes the days
                _wait_for_marks(ledger, child)
                time.sleep(rng.uniform(0, 0.05))
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
                kills += 1
            child.wait()
            midway += bool(_dirty(ledger))
        assert kills >= 8, "too few kills landed while the refresh ran"
        assert midway >= 3, "too few kills landed between a refresh's marks and its last day"
        assert ledger.finance.rollup.refresh().done
        assert ledger.finance.rollup.verify(days=_DAYS + 2) == []
        today = datetime.now(UTC).date()
        periods = [day_bounds(today - timedelta(days=d), UTC) for d in range(_DAYS)]
        periods.append((periods[-1][0], periods[0][1]))
        for since, until in periods:
            ledger.finance.rollup.enabled = True
            kept = ledger.finance.overview(since, until)
            ledger.finance.rollup.enabled = False
            live = ledger.finance.overview(since, until)
            assert (kept.figures, kept.totals, kept.buckets) == (
                live.figures, live.totals, live.buckets,
            )  # fmt: skip
            assert kept.as_of is None
