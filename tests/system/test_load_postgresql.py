"""Several receiver hosts, one PostgreSQL ledger: nothing lost or doubled.

Three gunicorn receivers (2 sync workers each, ``--preload``) on loopback share one PostgreSQL
database, as three hosts behind a load balancer would. Every notification is delivered 2 or 3
times with the same ``webhook-id``, each copy to another receiver, in shuffled order, so
redeliveries of one notification race in two hosts at once; part-way through, one worker of
each receiver is killed with SIGKILL in the middle of a request. Senders retry a 503 or a
broken connection, as the service would. At the end the database must hold every notification
exactly once, every distinct outcome exactly once, and the reconciliation the plan says.

Size: ``PAYHOOKS_LOAD_SCALE`` (default 0.2) times 3,000 notifications, at least 150.
"""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest

from payhooks.storage import Ledger
from payhooks.verify import get_signer
from tests.support.app import TEST_SECRET
from tests.support.gunicorn_server import HAS_PROC, GunicornServer
from tests.support.load_plan import Delivered, Notification, build_plan, deliver_all

pytestmark = [
    pytest.mark.slow,
    pytest.mark.system,
    pytest.mark.skipif(not HAS_PROC, reason="finding gunicorn's workers needs /proc"),
]

SCALE = float(os.environ.get("PAYHOOKS_LOAD_SCALE", "0.2"))
NOTIFICATIONS = max(150, round(3000 * SCALE))
RECEIVERS = 3
WORKERS = 2
NOTIFY = "/payhooks/notifications"


@pytest.fixture
def receivers(tmp_path: Path, postgres_url: str) -> Iterator[list[GunicornServer]]:
    env = {
        "PAYHOOKS_DATABASE": postgres_url,
        "PAYHOOKS_SECRETS": TEST_SECRET,
        "SECRET_KEY": "load-test",
    }
    with ExitStack() as stack:
        yield [
            stack.enter_context(
                GunicornServer(
                    "payhooks.receiver.demo:create_app()",
                    env=env,
                    cwd=tmp_path,
                    workers=WORKERS,
                    preload=True,
                )
            )
            for _ in range(RECEIVERS)
        ]


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()  # type: ignore[arg-type,unused-ignore]


def test_three_receivers_on_one_database_store_each_notification_once(
    receivers: list[GunicornServer], postgres_url: str
) -> None:
    plan = build_plan(NOTIFICATIONS, seed=5)
    with Ledger(postgres_url) as setup:
        plan.register(setup)
    rng = random.Random(17)
    copies = [(n, rng.choice((2, 3))) for n in plan.notifications]
    # Each copy of one notification goes to another receiver.
    per_receiver: list[list[Notification]] = [[] for _ in receivers]
    for index, (notification, count) in enumerate(copies):
        for copy in range(count):
            per_receiver[(index + copy) % RECEIVERS].append(notification)
    for jobs in per_receiver:
        rng.shuffle(jobs)
    sent_per_id = Counter(n.webhook_id for jobs in per_receiver for n in jobs)

    halfway = [threading.Event() for _ in receivers]
    killed: list[int] = []
    results: list[Delivered] = []
    signer = get_signer("standard-webhooks", TEST_SECRET)

    def send(number: int) -> None:
        jobs = per_receiver[number]

        def progress(finished: int) -> None:
            if finished >= len(jobs) // 2:
                halfway[number].set()

        url = receivers[number].url(NOTIFY)
        results.append(deliver_all(url, jobs, signer, senders=4, on_progress=progress))

    def killer() -> None:
        for number, server in enumerate(receivers):
            if halfway[number].wait(timeout=120):
                killed.append(server.kill_busy_worker())
                server.wait_for_workers(gone=killed[-1])

    threads = [threading.Thread(target=send, args=(n,)) for n in range(RECEIVERS)]
    threads.append(threading.Thread(target=killer, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)

    print(  # shown with -s: how hard the run was
        f"{len(plan.notifications)} notifications, {sum(sent_per_id.values())} deliveries over "
        f"{RECEIVERS} receivers; killed workers {killed}"
    )
    assert len(killed) == RECEIVERS, killed
    for server in receivers:
        assert "Traceback" not in server.log_text()
    finals: dict[str, list[Any]] = {}
    for delivered in results:
        assert delivered.gave_up == []
        assert set(delivered.statuses()) <= {200, 422, 503, None}
        for webhook_id, answers in delivered.finals.items():
            finals.setdefault(webhook_id, []).extend(answers)
    for notification in plan.notifications:
        answers = finals[notification.webhook_id]
        assert len(answers) == sent_per_id[notification.webhook_id]
        if notification.outcome is None:
            assert {a.status for a in answers} == {422}
        else:
            assert {a.status for a in answers} == {200}, answers

    # One delivery row per notification; one outcome per distinct outcome; all reconciled.
    keys = [key for (key,) in _rows(postgres_url, "SELECT dedupe_key FROM deliveries")]
    assert sorted(keys) == sorted(n.webhook_id for n in plan.notifications)
    outcomes = _rows(postgres_url, "SELECT transaction_id, payment_status FROM outcomes")
    assert len(outcomes) == len(set(outcomes))
    assert set(outcomes) == plan.outcomes
    assert _rows(
        postgres_url,
        "SELECT COUNT(*) FROM deliveries WHERE status NOT IN "
        "('processed', 'duplicate', 'invalid_payload')",
    ) == [(0,)]
    with Ledger(postgres_url) as check:
        rows = {
            row.external_identifier: (row.state, row.received_amount_minor)
            for row in check.reconcile()
        }
    assert rows == {eid: (e.state, e.received_amount_minor) for eid, e in plan.rows.items()}
