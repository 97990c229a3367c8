"""Under load, with redeliveries racing each other and a worker killed mid-run, the receiver
keeps working and loses nothing.

The receiver runs as it would in production: gunicorn, 4 sync workers (separate processes on
one SQLite file), on 127.0.0.1. Eight sender threads deliver every notification 2 or 3 times
with the same ``webhook-id``, in shuffled order, so redeliveries of one notification often run
in two workers at once; part-way through, a worker is killed with SIGKILL in the middle of a
request (frozen first, and killed only while it holds a client's connection), and gunicorn
forks a replacement. Senders retry a 503 or a broken connection with backoff, as the service
would. At the end the SQLite file must hold every notification exactly once, every distinct
outcome exactly once, and a reconciliation equal, row by row and in its totals, to what the
plan (``tests/support/load_plan.py``) says was sent.

Size: ``PAYHOOKS_LOAD_SCALE`` (default 0.2) times 5,000 distinct notifications, at least 200.
CI runs the default, about 1,000 notifications and 2,500 requests (well under a minute);
the full run is by hand::

    PAYHOOKS_LOAD_SCALE=1 pytest tests/system/test_load.py -v

Needs ``/proc`` (Linux) to find gunicorn's workers; skipped elsewhere.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from payhooks.storage import Ledger
from payhooks.verify import get_signer
from tests.support.app import TEST_SECRET
from tests.support.gunicorn_server import HAS_PROC, GunicornServer
from tests.support.load_plan import (
    Notification,
    build_plan,
    deliver_all,
    expected_summary,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAS_PROC, reason="finding gunicorn's workers needs /proc"),
]

#: The full run's size; ``PAYHOOKS_LOAD_SCALE`` scales it.
FULL_NOTIFICATIONS = 5000
SCALE = float(os.environ.get("PAYHOOKS_LOAD_SCALE", "0.2"))
NOTIFICATIONS = max(200, round(FULL_NOTIFICATIONS * SCALE))
SENDERS = 8
#: Workers killed mid-request during the run: one at the CI size, three at the full size.
KILLS = max(1, round(3 * SCALE))
WORKERS = 4
NOTIFY = "/payhooks/notifications"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "load.db"


@pytest.fixture
def server(tmp_path: Path, database: Path) -> Iterator[GunicornServer]:
    with Ledger(database):
        pass  # create the schema before four workers race to
    env = {
        "PAYHOOKS_DATABASE": str(database),
        "PAYHOOKS_SECRETS": TEST_SECRET,
        "SECRET_KEY": "load-test",
    }
    with GunicornServer(
        "payhooks.receiver.demo:create_app()", env=env, cwd=tmp_path, workers=WORKERS, preload=True
    ) as running:
        yield running


def _rows(database: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(database)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_every_notification_is_stored_once_through_redeliveries_and_a_killed_worker(
    server: GunicornServer, database: Path
) -> None:
    plan = build_plan(NOTIFICATIONS)
    with Ledger(database) as setup:
        plan.register(setup)
    rng = random.Random(11)
    jobs: list[Notification] = [
        notification for notification in plan.notifications for _ in range(rng.choice((2, 3)))
    ]
    rng.shuffle(jobs)
    sent_per_id = Counter(job.webhook_id for job in jobs)

    # Kill a worker in the middle of a request at even steps of the run (one kill at the CI
    # size), waiting each time for gunicorn to fork its replacement.
    steps = [threading.Event() for _ in range(KILLS)]
    killed: list[int] = []

    def progress(finished: int) -> None:
        for number, step in enumerate(steps, start=1):
            if finished >= len(jobs) * number // (KILLS + 1):
                step.set()

    def killer() -> None:
        for step in steps:
            if not step.wait(timeout=120):
                return
            killed.append(server.kill_busy_worker())
            server.wait_for_workers(gone=killed[-1])

    kill_thread = threading.Thread(target=killer, name="killer", daemon=True)
    kill_thread.start()
    delivered = deliver_all(
        server.url(NOTIFY),
        jobs,
        get_signer("standard-webhooks", TEST_SECRET),
        senders=SENDERS,
        on_progress=progress,
    )
    kill_thread.join(timeout=60)
    log = server.log_text()
    print(  # shown with -s: how hard the run was
        f"{len(plan.notifications)} notifications, {len(jobs)} deliveries, "
        f"{sum(len(tries) for tries in delivered.attempts.values())} requests; "
        f"answers {dict(delivered.statuses())}; killed workers {killed}"
    )

    # The crash happened and gunicorn noticed it; nothing of ours logged a traceback.
    assert len(killed) == KILLS, killed
    for pid in killed:
        assert f"(pid:{pid}) was sent SIGKILL" in log
    assert "Traceback" not in log, log

    # No answer was a server error; every delivery ended in its right answer, after retries.
    statuses = delivered.statuses()
    assert set(statuses) <= {200, 422, 503, None}, statuses
    assert delivered.gave_up == []
    for notification in plan.notifications:
        finals = delivered.finals[notification.webhook_id]
        assert len(finals) == sent_per_id[notification.webhook_id]
        if notification.outcome is None:
            assert {(a.status, a.outcome) for a in finals} == {(422, "invalid_payload")}
        else:
            assert {a.status for a in finals} == {200}, finals
            assert {a.outcome for a in finals} <= {"processed", "duplicate"}

    # Every notification is one delivery row, and each stored attempt was a real request.
    deliveries = {
        key: (status, attempts, outcome_id)
        for key, status, attempts, outcome_id in _rows(
            database, "SELECT dedupe_key, status, attempts, outcome_id FROM deliveries"
        )
    }
    assert set(deliveries) == {n.webhook_id for n in plan.notifications}
    for webhook_id, (_, attempts, _) in deliveries.items():
        assert 1 <= attempts <= len(delivered.attempts[webhook_id])

    # Every distinct outcome is stored once, from one of the deliveries that carried it; each
    # delivery points at its outcome and says whether it was the first to bring it.
    outcomes = {
        (transaction_id, status): (outcome_id, key)
        for outcome_id, transaction_id, status, key in _rows(
            database,
            "SELECT o.id, o.transaction_id, o.payment_status, d.dedupe_key "
            "FROM outcomes AS o JOIN deliveries AS d ON d.id = o.delivery_id",
        )
    }
    assert len(outcomes) == _rows(database, "SELECT COUNT(*) FROM outcomes")[0][0]
    assert set(outcomes) == plan.outcomes
    for notification in plan.notifications:
        status, _, outcome_id = deliveries[notification.webhook_id]
        if notification.outcome is None:
            assert (status, outcome_id) == ("invalid_payload", None)
            continue
        first_id, first_key = outcomes[notification.outcome]
        assert outcome_id == first_id
        expected = "processed" if first_key == notification.webhook_id else "duplicate"
        assert status == expected
    assert _rows(database, "SELECT COUNT(*) FROM rejected_deliveries") == [(0,)]

    # The reconciliation, row by row and in its totals, is what was sent.
    with Ledger(database) as check:
        rows = {
            row.external_identifier: (
                row.state,
                row.currency,
                row.expected_amount_minor,
                row.received_currency,
                row.received_amount_minor,
            )
            for row in check.reconcile()
        }
        summary = check.summary()
    assert rows == {
        eid: (
            e.state,
            e.currency,
            e.expected_amount_minor,
            e.received_currency,
            e.received_amount_minor,
        )
        for eid, e in plan.rows.items()
    }
    assert summary == expected_summary(plan.rows.values())


def test_a_storm_of_simultaneous_redeliveries_stores_each_outcome_once(
    server: GunicornServer, database: Path
) -> None:
    """Every sender posts the same notification at the same instant, for many notifications:
    the four workers race on one ``dedupe_key`` (and, for the same outcome under fresh ids, on
    one outcome) and exactly one row of each survives."""
    plan = build_plan(40, seed=3)
    with Ledger(database) as setup:
        plan.register(setup)
    signer = get_signer("standard-webhooks", TEST_SECRET)
    url = server.url(NOTIFY)
    barrier = threading.Barrier(SENDERS)

    def storm(notification: Notification) -> list[int | None]:
        def one(_: int) -> int | None:
            barrier.wait(timeout=30)
            result = deliver_all(url, [notification], signer, senders=1)
            return result.finals[notification.webhook_id][0].status

        with ThreadPoolExecutor(max_workers=SENDERS) as pool:
            return list(pool.map(one, range(SENDERS)))

    answers = {n.webhook_id: storm(n) for n in plan.notifications}

    for notification in plan.notifications:
        wanted = 422 if notification.outcome is None else 200
        assert answers[notification.webhook_id] == [wanted] * SENDERS
    assert _rows(database, "SELECT COUNT(*), COUNT(DISTINCT dedupe_key) FROM deliveries") == [
        (len(plan.notifications), len(plan.notifications))
    ]
    assert _rows(database, "SELECT SUM(attempts) FROM deliveries") == [
        (SENDERS * len(plan.notifications),)
    ]
    assert _rows(database, "SELECT COUNT(*) FROM outcomes") == [(len(plan.outcomes),)]
    with Ledger(database) as check:
        assert {row.external_identifier: row.state for row in check.reconcile()} == {
            eid: e.state for eid, e in plan.rows.items()
        }
