"""One sender per outcome, answer first, nothing lost: the merchant's receivers under real
processes.

The app runs under gunicorn; its ``payment_succeeded`` receiver appends each call's
``outcome_id`` to ``calls.txt`` (one ``O_APPEND`` write per line, so workers never mix lines)
and ships an order once per ``outcome_id``.

- Twin deliveries: each notification sent twice at once (the same ``webhook-id``), to 4 workers
  on SQLite and to two receiver hosts on one PostgreSQL database: each outcome's receivers run
  exactly once when nothing crashes.
- A slow receiver: the service is answered while the receiver is still at work (it waits for
  the test to release it), so a receiver slower than the sender's timeout provokes no retry.
- A worker SIGKILLed by the app's own receivers, before or after shipping: the signals are
  claimed, so they wait for the lease to pass, then the next delivery sends them (at least
  once; the receiver's ``outcome_id`` check ships once).
"""

from __future__ import annotations

import http.client
import json
import sqlite3
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from payhooks.storage import Ledger
from tests.support.app import TEST_SECRET, BodyFactory, SignFunction
from tests.support.gunicorn_server import GunicornServer

pytestmark = pytest.mark.system

#: The merchant's app. ``die-before`` kills the worker in notification_received, which runs
#: first, before payment_succeeded's receiver; ``die-after`` after the shipping receiver ran,
#: before the signals are marked sent; ``slow`` makes the shipping receiver wait (up to 120 s)
#: until the test writes ``release``. ``LEASE_SECONDS`` is the signals' lease.
_APP = """
import os
import signal
import time

from flask import Flask

from payhooks.receiver import PayHooks, signals

HERE = os.path.dirname(os.path.abspath(__file__))


def _armed(marker):
    path = os.path.join(HERE, marker)
    if os.path.exists(path):
        try:
            os.remove(path)
        except FileNotFoundError:
            return False
        return True
    return False


def _append(name, line):
    descriptor = os.open(os.path.join(HERE, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


def create_app():
    app = Flask(__name__)
    app.config["PAYHOOKS_SECRETS"] = [{secret!r}]
    app.config["PAYHOOKS_DATABASE"] = os.environ["PAYHOOKS_DATABASE"]
    app.config["PAYHOOKS_SIGNALS_LEASE_SECONDS"] = int(os.environ["LEASE_SECONDS"])
    PayHooks(app)

    @signals.notification_received.connect_via(app)
    def received(sender, **extra):
        if _armed("die-before"):
            os.kill(os.getpid(), signal.SIGKILL)

    @signals.payment_succeeded.connect_via(app)
    def ship(sender, *, outcome, outcome_id, **extra):
        _append("calls.txt", f"{{outcome_id}}\\n")
        if os.path.exists(os.path.join(HERE, "slow")):
            deadline = time.monotonic() + 120
            while not os.path.exists(os.path.join(HERE, "release")):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.05)
            _append("slow-done.txt", "done\\n")
        if _armed("die-after"):
            os.kill(os.getpid(), signal.SIGKILL)

    return app
"""


def _post(
    port: int, body: bytes, headers: dict[str, str], timeout: float = 60
) -> tuple[int, Any] | None:
    """One delivery; None when the connection broke (the worker died under it)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/payhooks/notifications", body=body, headers=headers)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    except (OSError, http.client.HTTPException):  # a broken connection, or the timeout
        return None
    finally:
        conn.close()


def _calls(folder: Path) -> Counter[str]:
    path = folder / "calls.txt"
    return Counter(path.read_text().split()) if path.exists() else Counter()


#: The lease when no worker is killed: far longer than any sending on a loaded machine, so a
#: second sending could only come from two senders at once, which is what the twins look for.
NO_KILL_LEASE = 300
#: The lease when a worker is killed: short, so the tests wait little for it to pass.
KILL_LEASE = 1


def _server(
    folder: Path, database: str, workers: int, lease: int = NO_KILL_LEASE
) -> GunicornServer:
    return GunicornServer(
        "shop:create_app()",
        env={
            "PYTHONPATH": str(folder),
            "PAYHOOKS_DATABASE": database,
            "LEASE_SECONDS": str(lease),
        },
        cwd=folder,
        workers=workers,
    )


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    (tmp_path / "shop.py").write_text(_APP.format(secret=TEST_SECRET))
    return tmp_path


ORDERS = 150


def _twins(
    ports: list[int], shop: Path, database: str, make_body: BodyFactory, sign: SignFunction
) -> None:
    with Ledger(database) as ledger:
        for n in range(ORDERS):
            ledger.expect_transaction(f"order-{n}", 2500, "CNY")
    deliveries = []
    for n in range(ORDERS):
        body = make_body("wallet", external_identifier=f"order-{n}", transaction_id=f"ll-{n}")
        deliveries.append((body, sign(body, msg_id=f"msg_twin_{n}")))

    def both(item: tuple[bytes, dict[str, str]]) -> list[Any]:
        body, headers = item
        with ThreadPoolExecutor(2) as pair:
            copies = [pair.submit(_post, ports[n % len(ports)], body, headers) for n in range(2)]
            return [copy.result() for copy in copies]

    with ThreadPoolExecutor(8) as pool:
        answers = [answer for pair in pool.map(both, deliveries) for answer in pair]
    assert all(answer is not None and answer[0] == 200 for answer in answers), answers
    deadline = time.monotonic() + 120
    while sum(_calls(shop).values()) < ORDERS and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # a second sending, if there were one, would land now
    calls = _calls(shop)
    assert len(calls) == ORDERS
    assert [n for n in calls.values() if n != 1] == []
    with Ledger(database) as ledger:
        assert ledger.signals.owed() == []


def test_twin_deliveries_under_four_workers_run_each_outcomes_receivers_once(
    shop: Path, make_body: BodyFactory, sign: SignFunction
) -> None:
    database = str(shop / "payhooks.db")
    Ledger(database).close()
    with _server(shop, database, workers=4) as server:
        _twins([server.port], shop, database, make_body, sign)


def test_twin_deliveries_to_two_hosts_on_postgresql_run_each_outcomes_receivers_once(
    shop: Path, postgres_url: str, make_body: BodyFactory, sign: SignFunction
) -> None:
    with ExitStack() as stack:
        hosts = [stack.enter_context(_server(shop, postgres_url, workers=2)) for _ in range(2)]
        _twins([host.port for host in hosts], shop, postgres_url, make_body, sign)


def test_a_slow_receiver_runs_after_the_service_was_answered(
    shop: Path, make_body: BodyFactory, sign: SignFunction
) -> None:
    database = str(shop / "payhooks.db")
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
    (shop / "slow").write_text("3 s")
    body = make_body("wallet", external_identifier="order-1")
    with _server(shop, database, workers=1) as server:
        answer = _post(server.port, body, sign(body))
        assert answer is not None, "the sender timed out waiting for the receivers"
        assert (answer[0], answer[1]["reconciliation"]) == (200, "paid")
        assert not (shop / "slow-done.txt").exists()  # answered while the receiver still ran
        (shop / "release").write_text("go")
        deadline = time.monotonic() + 60
        while not (shop / "slow-done.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    assert (shop / "slow-done.txt").exists()
    assert sum(_calls(shop).values()) == 1


@pytest.mark.parametrize("point", ["die-before", "die-after"])
def test_a_worker_killed_after_answering_leaves_its_signals_to_the_next_delivery(
    shop: Path, point: str, make_body: BodyFactory, sign: SignFunction
) -> None:
    database = str(shop / "payhooks.db")
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        ledger.expect_transaction("order-2", 2500, "CNY")
    (shop / point).write_text("armed")
    first = make_body("wallet", external_identifier="order-1", transaction_id="ll-1")
    second = make_body("wallet", external_identifier="order-2", transaction_id="ll-2")
    with _server(shop, database, workers=1, lease=KILL_LEASE) as server:
        answer = _post(server.port, first, sign(first))
        assert answer is not None
        assert (answer[0], answer[1]["status"]) == (200, "processed")  # answered, then killed
        deadline = time.monotonic() + 60
        while (shop / point).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not (shop / point).exists(), "the kill never happened"
        time.sleep(1.2)  # the dead worker's lease passes
        again = None
        while again is None and time.monotonic() < deadline + 60:
            again = _post(server.port, second, sign(second))  # the master restarts the worker
        assert again is not None
        assert again[0] == 200
        while len(_calls(shop)) < 2 and time.monotonic() < deadline + 60:
            time.sleep(0.1)
    calls = _calls(shop)
    assert len(calls) == 2  # both orders' receivers ran
    # Killed before the shipping receiver ran: it runs once, sent by the next delivery. Killed
    # after it ran: it runs again (at least once); the outcome_id is the same both times.
    assert sorted(calls.values()) == ([1, 1] if point == "die-before" else [1, 2])
    conn = sqlite3.connect(database)
    try:
        unsent = conn.execute("SELECT COUNT(*) FROM owed_signals WHERE sent_at IS NULL").fetchone()
    finally:
        conn.close()
    assert unsent == (0,)
