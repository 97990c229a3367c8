"""Metrics under gunicorn with four workers: whichever worker answers the scrape, the counts
add up to what was sent to all of them (prometheus_client's multiprocess mode, with
``PROMETHEUS_MULTIPROC_DIR``), and the ledger's gauges are the ledger's.

Real processes and real HTTP on loopback: the shop's app mounts :class:`Metrics` as
docs/operations.md says, and the notifications are signed by an independent sender.
"""

from __future__ import annotations

import http.client
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from payhooks.storage import Ledger
from tests.support.app import TEST_SECRET, BodyFactory, SignFunction
from tests.support.gunicorn_server import GunicornServer

pytestmark = pytest.mark.system

_APP = """
import os

from flask import Flask

from payhooks.receiver import Metrics, PayHooks


def create_app():
    app = Flask(__name__)
    app.config["PAYHOOKS_SECRETS"] = [{secret!r}]
    app.config["PAYHOOKS_DATABASE"] = os.environ["PAYHOOKS_DATABASE"]
    PayHooks(app)
    Metrics(app, url="/metrics", authorize=lambda request: True)
    return app
"""

PROCESSED = 40
DUPLICATES = 10
UNSIGNED = 12
NOT_JSON = 6


def _request(port: int, method: str, path: str, body: bytes = b"", headers=None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body or None, headers=headers or {})
        reply = conn.getresponse()
        return reply.status, reply.read().decode()
    finally:
        conn.close()


def _totals(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_four_workers_scraped_add_up_to_what_was_sent(
    tmp_path: Path, make_body: BodyFactory, sign: SignFunction
) -> None:
    (tmp_path / "shop.py").write_text(_APP.format(secret=TEST_SECRET))
    database = str(tmp_path / "payhooks.db")
    counts = tmp_path / "prometheus"
    counts.mkdir()
    with Ledger(database) as ledger:
        for n in range(PROCESSED):
            ledger.expect_transaction(f"order-{n}", 2500, "CNY")
    requests: list[tuple[bytes, dict[str, str]]] = []
    for n in range(PROCESSED):
        body = make_body(external_identifier=f"order-{n}", transaction_id=f"ll-{n}")
        requests.append((body, sign(body, msg_id=f"msg_{n}")))
    requests += requests[:DUPLICATES]  # the same message again: a redelivery
    requests += [(requests[n][0], {"content-type": "application/json"}) for n in range(UNSIGNED)]
    requests += [(b"{", sign(b"{")) for _ in range(NOT_JSON)]

    env = {
        "PYTHONPATH": str(tmp_path),
        "PAYHOOKS_DATABASE": database,
        "PROMETHEUS_MULTIPROC_DIR": str(counts),
    }
    with GunicornServer("shop:create_app()", env=env, cwd=tmp_path, workers=4) as server:
        with ThreadPoolExecutor(8) as pool:
            statuses = list(
                pool.map(
                    lambda job: _request(server.port, "POST", "/payhooks/notifications", *job)[0],
                    requests,
                )
            )
        scrapes = [_request(server.port, "GET", "/metrics") for _ in range(6)]

    assert statuses.count(200) == PROCESSED + DUPLICATES
    assert statuses.count(401) == UNSIGNED
    assert statuses.count(400) == NOT_JSON
    # Multiprocess mode is on: each worker keeps its counts in a file of its own.
    assert len(list(counts.glob("counter_*.db"))) >= 2
    for status, text in scrapes:
        assert status == 200
        found = _totals(text)
        assert (
            found[("payhooks_deliveries_total", (("code", "processed"), ("http_status", "200")))]
            == PROCESSED
        )
        assert (
            found[("payhooks_deliveries_total", (("code", "duplicate"), ("http_status", "200")))]
            == DUPLICATES
        )
        assert (
            found[
                ("payhooks_deliveries_total", (("code", "malformed_json"), ("http_status", "400")))
            ]
            == NOT_JSON
        )
        assert found[("payhooks_rejections_total", (("code", "missing_signature"),))] == UNSIGNED
        assert found[("payhooks_request_duration_seconds_count", ())] == len(requests)
        assert found[("payhooks_ledger_readable", ())] == 1
        assert found[("payhooks_last_accepted_delivery_timestamp_seconds", ())] > 0
