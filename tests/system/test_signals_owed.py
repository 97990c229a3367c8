"""Signals are owed until sent: a worker killed between the commit and the mark, then the
service's retry, and the merchant's receiver still ships the order exactly once.

Real processes: the app runs under gunicorn (one sync worker, which the master replaces when
it dies), and the worker is SIGKILLed by the app's own receivers at the point under test,
once (a marker file arms the kill and is removed first). The sender retries the same delivery
(the same ``webhook-id``) as the service does after a broken connection.
"""

from __future__ import annotations

import http.client
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from payhooks.storage import Ledger
from tests.support.app import TEST_SECRET, BodyFactory, SignFunction
from tests.support.gunicorn_server import GunicornServer

#: The merchant's app: ships on payment_succeeded, once per outcome_id, and logs every call.
#: ``die-before`` kills the worker in notification_received, which runs first: after the
#: commit, before payment_succeeded's receiver. ``die-after`` kills it after the shipping
#: receiver ran, before the signals are marked sent.
_APP = """
import os
import signal

from flask import Flask

from payhooks.receiver import PayHooks, signals

HERE = os.path.dirname(os.path.abspath(__file__))


def _die_if(marker):
    path = os.path.join(HERE, marker)
    if os.path.exists(path):
        os.remove(path)
        os.kill(os.getpid(), signal.SIGKILL)


def create_app():
    app = Flask(__name__)
    app.config["PAYHOOKS_SECRETS"] = [{secret!r}]
    app.config["PAYHOOKS_DATABASE"] = os.path.join(HERE, "payhooks.db")
    PayHooks(app)

    @signals.notification_received.connect_via(app)
    def received(sender, **extra):
        _die_if("die-before")

    @signals.payment_succeeded.connect_via(app)
    def ship(sender, *, outcome, outcome_id, **extra):
        with open(os.path.join(HERE, "calls.txt"), "a") as calls:
            calls.write(f"{{outcome_id}}\\n")
        shipped_path = os.path.join(HERE, "shipped.txt")
        shipped = open(shipped_path).read().split() if os.path.exists(shipped_path) else []
        if str(outcome_id) not in shipped:
            with open(shipped_path, "a") as shipments:
                shipments.write(f"{{outcome_id}}\\n")
        _die_if("die-after")

    return app
"""


def _post(port: int, body: bytes, headers: dict[str, str]) -> tuple[int, Any] | None:
    """One delivery; None when the connection broke (the worker died under it)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/payhooks/notifications", body=body, headers=headers)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    except (ConnectionError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def _deliver_until_answered(port: int, body: bytes, headers: dict[str, str]) -> list[Any]:
    """Send, and send the same delivery again after a broken connection, as the service does."""
    answers: list[Any] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = _post(port, body, headers)
        answers.append(answer)
        if answer is not None and answer[0] < 500:
            return answers
        time.sleep(0.2)
    pytest.fail(f"the delivery was never answered: {answers}")


@pytest.mark.parametrize("point", ["die-before", "die-after"])
def test_a_worker_killed_between_commit_and_mark_still_ships_the_order_exactly_once(
    tmp_path: Path, point: str, make_body: BodyFactory, sign: SignFunction
) -> None:
    (tmp_path / "shop.py").write_text(_APP.format(secret=TEST_SECRET))
    (tmp_path / point).write_text("armed")
    body = make_body("wallet", external_identifier="order-1", amount="25.00")
    headers = sign(body, msg_id="msg_owed_1")
    env = {"PYTHONPATH": str(tmp_path)}

    with Ledger(tmp_path / "payhooks.db") as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
    with GunicornServer("shop:create_app()", env=env, cwd=tmp_path, workers=1) as server:
        answers = _deliver_until_answered(server.port, body, headers)

    assert not (tmp_path / point).exists(), "the kill never happened"
    assert answers[0] is None, "the first try should have died with its worker"
    status, answer = answers[-1]
    assert (status, answer["status"], answer["reconciliation"]) == (200, "duplicate", "paid")
    shipped = (tmp_path / "shipped.txt").read_text().split()
    calls = (tmp_path / "calls.txt").read_text().split()
    assert len(shipped) == 1
    # Killed before the shipping receiver ran: it runs once, on the retry. Killed after it
    # ran: it runs again on the retry (at least once) and its outcome_id check ships once.
    assert calls == shipped * (1 if point == "die-before" else 2)
    conn = sqlite3.connect(tmp_path / "payhooks.db")
    try:
        unsent = conn.execute("SELECT COUNT(*) FROM owed_signals WHERE sent_at IS NULL").fetchone()
        owed = conn.execute(
            "SELECT signal, outcome_id FROM owed_signals ORDER BY outcome_id, position"
        ).fetchall()
    finally:
        conn.close()
    assert unsent == (0,)
    assert owed == [
        ("notification-received", int(shipped[0])),
        ("payment-succeeded", int(shipped[0])),
    ]
