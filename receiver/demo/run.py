"""``payhooks demo``: the whole flow in one command, with nothing to set up.

A receiver (:func:`payhooks.receiver.demo.create_app`, its ledger in a temporary folder) runs on a
free loopback port in a thread. Expected payments are registered, signed deliveries of the three
notification forms go to it over real HTTP (among them an amount that differs, a redelivery
with the same ``webhook-id`` and a forgery signed with the wrong secret), two customers come
back through their return URLs, and the reconciliation is printed. Then the server stops and the
folder is removed.

The bodies are built here in code rather than read from ``sample_payloads/``, which an
installed wheel does not have.
"""

from __future__ import annotations

import http.client
import io
import json
import secrets
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from flask import Flask
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from payhooks.receiver.cli.reports import Totals, write_report, write_totals
from payhooks.receiver.demo.app import create_app
from payhooks.receiver.demo.sandbox_flow import run_sandbox_act
from payhooks.receiver.state import STATE_KEY, receiver_state
from payhooks.receiver.testing import Connection, Payload, ReplayResult, send_signed
from payhooks.receiver.web.returns import return_url
from payhooks.storage import Ledger
from payhooks.verify import DEFAULT_SCHEME, Signer, generate_keypair, get_signer

__all__ = ["DemoResult", "run_demo", "serving"]

_HOST: Final = "127.0.0.1"


@dataclass
class DemoResult:
    """How the demo went: ``problems`` lists every step that did not answer as it should."""

    deliveries: int = 0
    returns: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class _Delivery:
    """One step of the script: what to send and what the receiver must answer."""

    form: str
    payload: Payload
    status: int
    outcome: str
    note: str = ""
    webhook_id: str | None = None
    forged: bool = False


def _payment_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y%m%d%H%M%S")


def _body(
    transaction_id: str,
    order: str,
    amount: str,
    when: datetime,
    provider_members: dict[str, str],
) -> Payload:
    document = {
        "ll_transaction_id": transaction_id,
        "merchant_transaction_id": order,
        "payment_data": {
            "payment_status": "PS",
            "payment_amount": amount,
            "payment_currency_code": "CNY",
            "payment_time": _payment_time(when),
            **provider_members,
        },
    }
    return Payload(f"{order}:{transaction_id}", json.dumps(document).encode())


def _card(transaction_id: str, order: str, amount: str, when: datetime) -> Payload:
    intent = {"stripe_payment_intent_id": f"pi_{transaction_id}", "status": "succeeded"}
    return _body(transaction_id, order, amount, when, intent)


def _script(now: datetime) -> list[_Delivery]:
    card = _card("ll_txn_0001", "order-1001", "25.00", now)
    orchestrator = _body(
        "ll_txn_0002",
        "order-1002",
        "199.00",
        now,
        {"adyen_psp_reference": "8815658961765250", "result_code": "Authorised"},
    )
    wallet = _body("ll_txn_0003", "order-1003", "110.00", now, {})
    forged = _card("ll_txn_9999", "order-1004", "50.00", now)
    first_id = f"msg_demo_{secrets.token_hex(8)}"
    return [
        _Delivery("card", card, 200, "processed", webhook_id=first_id),
        _Delivery("orchestrator", orchestrator, 200, "processed"),
        _Delivery("wallet", wallet, 200, "processed", "120.00 expected"),
        _Delivery(
            "card",
            _card("ll_txn_2001", "sub-2001", "10.00", now - timedelta(days=30)),
            200,
            "processed",
            "period 1",
        ),
        _Delivery(
            "card", _card("ll_txn_2002", "sub-2001", "10.00", now), 200, "processed", "period 2"
        ),
        _Delivery("card", card, 200, "duplicate", "same webhook-id again", webhook_id=first_id),
        _Delivery("card", forged, 401, "invalid_signature", "forged: wrong secret", forged=True),
    ]


def _register(ledger: Ledger) -> list[str]:
    ledger.expect_transaction("order-1001", 2500, "CNY", description="card: blue mug")
    ledger.expect_transaction("order-1002", 19900, "CNY", description="wallet via orchestrator")
    ledger.expect_transaction("order-1003", 12000, "CNY", description="direct wallet")
    ledger.expect_transaction("order-1004", 5000, "CNY", description="not paid yet")
    ledger.expect_subscription("sub-2001", 1000, "CNY", 1000, description="monthly plan")
    return ["order-1001", "order-1002", "order-1003", "order-1004", "sub-2001"]


class _QuietHandler(WSGIRequestHandler):
    """No access log: the demo prints its own account of every request."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return


@contextmanager
def serving(
    app: Flask, *, host: str = _HOST, port: int = 0, threaded: bool = False
) -> Iterator[BaseWSGIServer]:
    """Serve ``app`` with Werkzeug in a background thread until the block ends.

    Port 0 picks a free one: read it from the server's ``server_port``. The demo and the tests
    use it to put a real HTTP receiver in front of the replay tool; a load generator may want
    ``threaded=True`` (a thread per request, each with its own ledger connection).
    """
    server = make_server(host, port, app, threaded=threaded, request_handler=_QuietHandler)

    def serve() -> None:
        try:
            server.serve_forever(poll_interval=0.05)
        finally:
            # Unthreaded, the server thread opened the app's ledger: close it in that thread.
            if STATE_KEY in app.extensions:
                receiver_state(app).ledgers.close()

    thread = threading.Thread(target=serve, name="payhooks-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


def _answer(result: ReplayResult) -> dict[str, Any]:
    try:
        document = json.loads(result.response)
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def _get_json(port: int, path: str) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection(_HOST, port, timeout=10)
    try:
        conn.request("GET", path, headers={"Accept": "application/json"})
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    try:
        document = json.loads(data)
    except ValueError:
        document = {}
    return response.status, document if isinstance(document, dict) else {}


def _send_all(
    url: str, script: list[_Delivery], signer: Signer, forger: Signer, echo: Callable[[str], None]
) -> DemoResult:
    result = DemoResult()
    with Connection(url) as connection:
        for step in script:
            sent = send_signed(
                connection,
                step.payload,
                forger if step.forged else signer,
                webhook_id=step.webhook_id,
            )
            result.deliveries += 1
            order = step.payload.name.split(":")[0]
            state = _answer(sent).get("reconciliation")
            shown = f"{sent.label}" + (f"  ({state})" if state else "")
            note = f"  [{step.note}]" if step.note else ""
            echo(f"  {step.form:<13}{order:<11}-> {shown}{note}")
            if (sent.status, sent.outcome) != (step.status, step.outcome):
                result.problems.append(
                    f"{order} ({step.form}) got {sent.label}, not {step.status} {step.outcome}"
                )
    return result


def _returns(app: Flask, port: int, echo: Callable[[str], None], result: DemoResult) -> None:
    base = f"http://{_HOST}:{port}"
    visits = [("order-1002", "paid"), ("order-1004", "processing")]
    for order, wanted in visits:
        with app.test_request_context(base_url=base):
            url = urlsplit(return_url(order))
        status, document = _get_json(port, f"{url.path}?{url.query}&resultCode=Authorised")
        result.returns += 1
        state = document.get("state")
        confirmed = "confirmed by a notification" if document.get("confirmed") else "not confirmed"
        echo(f"  {order:<11}resultCode=Authorised -> {status} {state} ({confirmed})")
        if status != 200 or state != wanted:
            result.problems.append(f"the return of {order} reported {state!r}, not {wanted!r}")


def run_demo(echo: Callable[[str], None] = print) -> DemoResult:
    """Run the demo, writing its account line by line through ``echo``.

    :returns: what happened; :attr:`DemoResult.ok` is False when any step answered otherwise
        than the script expects.
    """
    secret = generate_keypair(DEFAULT_SCHEME).signing_key
    signer = get_signer(DEFAULT_SCHEME, secret)
    forger = get_signer(DEFAULT_SCHEME, generate_keypair(DEFAULT_SCHEME).signing_key)
    with tempfile.TemporaryDirectory(prefix="payhooks-demo-") as folder:
        database = Path(folder) / "payhooks.db"
        app = create_app(
            {
                "PAYHOOKS_DATABASE": str(database),
                "PAYHOOKS_SIGNATURE_SCHEME": DEFAULT_SCHEME,
                "PAYHOOKS_SECRETS": [secret],
                "SECRET_KEY": secrets.token_urlsafe(32),
            },
            environ={},
        )
        with Ledger(database) as ledger, serving(app) as server:
            port = server.server_port
            url = f"http://{_HOST}:{port}{app.config['PAYHOOKS_URL_PREFIX']}/notifications"
            echo(f"Receiver: {url} ({DEFAULT_SCHEME}, ledger in a temporary folder)")
            registered = _register(ledger)
            echo(f"Expected payments registered: {', '.join(registered)}")
            echo("")
            echo("Deliveries, signed and sent over HTTP:")
            result = _send_all(url, _script(datetime.now(UTC)), signer, forger, echo)
            echo("")
            echo("Customers returning (the query string never settles a payment):")
            _returns(app, port, echo, result)
            echo("")
            echo("Through the local sandbox of the service (the client, its hosted page):")
            lines, problems = run_sandbox_act(app, port, ledger, url, secret, _get_json)
            for line in lines:
                echo(line)
            result.problems.extend(problems)
            echo("")
            echo("Reconciliation:")
            report = io.StringIO()
            totals = Totals()
            write_report(ledger.reconcile(), report, "table", totals=totals)
            report.write("\n")
            write_totals(totals, report)
            for line in report.getvalue().splitlines():
                echo(f"  {line}" if line else "")
    echo("")
    echo(
        f"Done: {result.deliveries} deliveries and {result.returns} returns over HTTP; "
        "the receiver has stopped and its temporary ledger is gone."
    )
    return result
