"""One payment's whole story, lived through the real paths, for the story tests (no tests here).

:func:`live_the_story` registers ``order-1``, tries twice to create it at the service, then
posts signed notifications to the app as the service would: one that pays it (whose
``payment-succeeded`` receiver raises), the same delivery again, another delivery of the same
outcome, one that contradicts it, and one whose body is refused but names the payment. The
customer comes back through the signed return URL, and a sync lists the transaction as
refunded. What each step should leave is in :data:`STORY`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from payhooks.receiver import return_url, signals
from payhooks.storage import Ledger, ListedTransaction, PaymentState
from tests.support.app import BodyFactory, SignFunction

__all__ = ["NOTIFY", "RECEIVER_ERROR", "STORY", "live_the_story"]

NOTIFY = "/payhooks/notifications"

#: The kinds of the story's events, oldest first.
STORY = (
    "registration",
    "creation_attempt",
    "creation_attempt",
    "delivery",  # processed, then the same bytes again: one delivery, two attempts
    "outcome",
    "signal",  # notification-received
    "signal",  # payment-succeeded, whose receiver raised
    "delivery",  # duplicate
    "delivery",  # conflicting_outcome
    "delivery",  # invalid_payload
    "return",
    "sync_sighting",
)

#: What the ``payment-succeeded`` receiver raises.
RECEIVER_ERROR = "the warehouse is closed"


class WarehouseClosed(Exception):
    pass


def _refuse_to_ship(sender: Flask, **extra: Any) -> None:
    raise WarehouseClosed(RECEIVER_ERROR)


def _post(client: FlaskClient, body: bytes, headers: dict[str, str], answer: int) -> None:
    response = client.post(NOTIFY, data=body, headers=headers)
    assert response.status_code == answer, response.get_json()


def live_the_story(
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    *,
    identifier: str = "order-1",
) -> None:
    """Live ``identifier``'s story (see the module docstring); ``ledger`` is on the app's
    database, with the system clock the app uses."""
    ledger.expect_transaction(
        identifier, 2500, "CNY", description="Two teas", metadata={"table": 7}
    )
    first = ledger.service.begin_creation(identifier, "transaction", "idem-1")
    assert first is not None
    ledger.service.finish_creation(
        first, "uncertain", http_status=503, error_code="service_unavailable", error="try later"
    )
    second = ledger.service.begin_creation(identifier, "transaction", "idem-1", after=first)
    assert second is not None
    ledger.service.finish_creation(second, "created", service_id="ll-1", http_status=201)

    paid = make_body("wallet", external_identifier=identifier, transaction_id="ll-1")
    with signals.payment_succeeded.connected_to(_refuse_to_ship, sender=app):
        _post(client, paid, sign(paid, msg_id="msg-paid"), 200)
    _post(client, paid, sign(paid, msg_id="msg-paid"), 200)  # the same delivery again
    _post(client, paid, sign(paid, msg_id="msg-again"), 200)
    more = make_body(
        "wallet", external_identifier=identifier, transaction_id="ll-1", amount="30.00"
    )
    _post(client, more, sign(more, msg_id="msg-more"), 200)
    bad = make_body("wallet", external_identifier=identifier, transaction_id="ll-2", amount="lots")
    _post(client, bad, sign(bad, msg_id="msg-bad"), 422)

    with app.test_request_context():
        back = return_url(identifier, _external=False)
    assert client.get(back + "&resultCode=Authorised").status_code == 200

    run = ledger.service.begin_sync(max_age=timedelta(hours=1))
    listed = ListedTransaction("ll-1", identifier, "RS", PaymentState.REFUNDED, "CNY", 2500)
    ledger.service.record_service_page(run.id, [listed], None)
    ledger.service.end_sync(run.id)
