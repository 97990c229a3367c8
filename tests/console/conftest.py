"""Fixtures for the console's tests: an app with the receiver and a console whose hook reads
the role from a test header, a clock the tests can move, and a way to send real signed
notifications through the receiver."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from flask import Flask, Request
from flask.testing import FlaskClient

from payhooks.console import Console
from payhooks.storage import Ledger
from tests.support.app import AppFactory, BodyFactory, SignFunction
from tests.support.console_actions import Stuck, grant_hook

#: The header the test hook reads the role from.
ROLE_HEADER = "X-Test-Console-Role"
#: What a viewer sends.
VIEWER = {ROLE_HEADER: "viewer"}
NOTIFY = "/payhooks/notifications"

Deliver = Callable[..., int]


class Clock:
    """Now, as the console sees it: the real time, moved by ``ahead``."""

    def __init__(self) -> None:
        self.ahead = datetime.now(UTC) - datetime.now(UTC)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.ahead


def header_role(request: Request) -> str | None:
    """The test's authorize hook: the role the test header names, or None."""
    return request.headers.get(ROLE_HEADER)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def console_app(make_app: AppFactory, clock: Clock) -> Flask:
    """The receiver at ``/payhooks`` and the console at ``/console``."""
    app = make_app()
    Console(app, authorize=header_role, url_prefix="/console", clock=clock)
    return app


@pytest.fixture
def console(console_app: Flask) -> FlaskClient:
    """A client of the console app; send :data:`VIEWER` (or another role) as headers."""
    return console_app.test_client()


@pytest.fixture
def deliver(
    console: FlaskClient, make_body: BodyFactory, sign: SignFunction, ledger: Ledger
) -> Deliver:
    """Send a signed notification through the receiver; the stored delivery's id back.

    ``deliver(body=None, status=200, **body_fields)``: ``body`` as given, or
    ``make_body(**body_fields)``; the receiver's answer must have ``status``.
    """

    def send(body: bytes | None = None, status: int = 200, **fields: str) -> int:
        sent = make_body(**fields) if body is None else body
        answer = console.post(NOTIFY, data=sent, headers=sign(sent))
        assert answer.status_code == status, answer.get_data(as_text=True)
        newest = ledger.receiver.delivery_log(limit=1).rows[0]
        assert newest.body_size == len(sent)
        return newest.id

    return send


@pytest.fixture
def acting_app(make_app: AppFactory) -> Flask:
    """The receiver and a console whose hook names the person
    (:mod:`tests.support.console_actions`)."""
    app = make_app()
    Console(app, authorize=grant_hook, url_prefix="/console")
    return app


@pytest.fixture
def client(acting_app: Flask) -> FlaskClient:
    """A client of :func:`acting_app`."""
    return acting_app.test_client()


@pytest.fixture
def stuck(ledger: Ledger, make_body: BodyFactory) -> Stuck:
    """``stuck(body=None)``: a delivery of ``order-1`` (registered for 25.00 CNY) that a bug
    left without its outcome, as ``payhooks reprocess`` finds it; its id."""
    counter = iter(range(1, 1000))

    def store(body: bytes | None = None) -> int:
        number = next(counter)
        if number == 1:
            ledger.expect_transaction("order-1", 2500, "CNY")
        stored = ledger.receiver.record_delivery(
            dedupe_key=f"k-{number}",
            body=body or make_body(transaction_id=f"ll-{number}"),
            headers={},
        )
        ledger.receiver.mark_delivery(stored.id, "processing_error", error="a bug, since fixed")
        return stored.id

    return store


def forge(client: FlaskClient, body: bytes, ledger: Ledger) -> int:
    """Send ``body`` with a signature that does not hold; the refused request's id."""
    answer = client.post(
        NOTIFY,
        data=body,
        headers={
            "webhook-id": "msg_forged",
            "webhook-timestamp": str(int(datetime.now(UTC).timestamp())),
            "webhook-signature": "v1," + base64.b64encode(b"\0" * 32).decode(),
        },
    )
    assert answer.status_code == 401, answer.text
    return ledger.receiver.rejected_log(limit=1).rows[0].id
