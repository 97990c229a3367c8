"""Notifications per second through the whole receiver: cap, verify, store, parse, record,
reconcile, answer.

Two figures: in process (Flask's test client, so the pipeline and SQLite alone), and over
loopback HTTP to werkzeug's threaded server with several senders at once (what a
``payhooks replay --concurrency`` run sees). Each delivery is a distinct signed wallet
notification for an expected payment, so every one is a full write, not a duplicate.

Run by hand or in CI's bench step: ``python -m bench.receive [--count N] [--concurrency C]``.
It prints figures and never fails on them: timings belong to the machine, not the test suite.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from flask import Flask
from werkzeug.serving import make_server

from receiver import PayHooks
from storage import Ledger
from verify import generate_keypair, get_signer

NOTIFY = "/payhooks/notifications"


def _body(number: int) -> bytes:
    return json.dumps(
        {
            "ll_transaction_id": f"ll-{number}",
            "merchant_transaction_id": f"order-{number}",
            "payment_data": {
                "payment_status": "PS",
                "payment_amount": "25.00",
                "payment_currency_code": "CNY",
                "payment_time": "20261121120000",
            },
        }
    ).encode()


def _setup(directory: Path, count: int) -> tuple[Flask, Callable[[bytes], dict[str, str]]]:
    keys = generate_keypair("standard-webhooks")
    database = directory / "bench.db"
    with Ledger(database) as ledger:
        for number in range(count):
            ledger.expect_transaction(f"order-{number}", 2500, "CNY")
    app = Flask("bench", instance_path=str(directory))
    app.config.update(PAYHOOKS_DATABASE=str(database), PAYHOOKS_SECRETS=[keys.verifying_key])
    PayHooks(app)
    return app, get_signer("standard-webhooks", keys.signing_key).sign


def _in_process(count: int) -> tuple[float, list[float]]:
    with tempfile.TemporaryDirectory() as directory:
        app, sign = _setup(Path(directory), count)
        client = app.test_client()
        requests = [(body, sign(body)) for body in map(_body, range(count))]
        latencies: list[float] = []
        start = time.perf_counter()
        for body, headers in requests:
            began = time.perf_counter()
            response = client.post(NOTIFY, data=body, headers=headers)
            latencies.append(time.perf_counter() - began)
            assert response.status_code == 200, response.get_data(as_text=True)
        return count / (time.perf_counter() - start), latencies


def _over_loopback(count: int, concurrency: int) -> tuple[float, list[float]]:
    with tempfile.TemporaryDirectory() as directory:
        app, sign = _setup(Path(directory), count)
        server = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        requests = [(body, sign(body)) for body in map(_body, range(count))]

        def send(request: tuple[bytes, dict[str, str]]) -> float:
            body, headers = request
            began = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
            try:
                conn.request("POST", NOTIFY, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                assert response.status == 200, response.status
            finally:
                conn.close()
            return time.perf_counter() - began

        try:
            start = time.perf_counter()
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                latencies = list(pool.map(send, requests))
            rate = count / (time.perf_counter() - start)
        finally:
            server.shutdown()
            thread.join()
            server.server_close()
        return rate, latencies


def _report(name: str, rate: float, latencies: list[float]) -> None:
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    print(
        f"{name:<34} {rate:8.0f} deliveries/s   "
        f"p50 {statistics.median(ordered) * 1000:6.2f} ms   p95 {p95 * 1000:6.2f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    _report("in process (test client)", *_in_process(args.count))
    _report(
        f"loopback HTTP, {args.concurrency} senders",
        *_over_loopback(args.count, args.concurrency),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
