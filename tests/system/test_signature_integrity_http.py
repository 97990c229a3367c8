"""The reviewed sorted-fields attacks, over a real server on loopback, for both schemes.

A genuine signature moved onto a re-segmented or reshaped body is answered 401
``non_canonical_body``, kept as a rejection, and makes no delivery, no outcome and no signal;
the genuine body under it is still processed. A padded replay of a genuine delivery is a
``duplicate``, never a new delivery.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask

from payhooks.receiver import payment_succeeded
from payhooks.storage import Ledger
from payhooks.verify import generate_keypair, get_signer
from tests.support.app import AppFactory
from tests.support.live_server import LiveServer, eventually
from tests.support.notifications import PROVIDERS, notification_document

NOTIFY = "/payhooks/notifications"
SCHEMES = ["sorted-fields-hmac", "sorted-fields-rsa"]
Rows = Callable[..., list[dict[str, Any]]]


@pytest.fixture(params=SCHEMES)
def scheme(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def signed_server(
    scheme: str, make_app: AppFactory, serve: Callable[[Flask], LiveServer]
) -> Iterator[tuple[LiveServer, Callable[[bytes], dict[str, str]], list[str]]]:
    """A receiver of ``scheme`` on loopback, a signer for it, and the external identifiers
    its ``payment-succeeded`` signal was sent for."""
    pair = generate_keypair(scheme)
    hmac = scheme == "sorted-fields-hmac"
    app = make_app(
        PAYHOOKS_SIGNATURE_SCHEME=scheme,
        PAYHOOKS_SECRETS=[pair.verifying_key] if hmac else None,
        PAYHOOKS_PUBLIC_KEYS=None if hmac else [pair.verifying_key],
        PAYHOOKS_SIGNATURE_OPTIONS={"providers": list(PROVIDERS)} if hmac else {},
    )
    signer = get_signer(scheme, pair.signing_key)
    signalled: list[str] = []

    def received(sender: Flask, **kwargs: Any) -> None:
        signalled.append(kwargs["outcome"].external_identifier)

    with payment_succeeded.connected_to(received, sender=app):
        yield serve(app), signer.sign, signalled


def _post(server: LiveServer, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    reply = server.post(NOTIFY, body, {**headers, "content-type": "application/json"})
    return reply.status, reply.json()


def _resegmented(genuine: dict[str, Any]) -> dict[str, Any]:
    """The reviewed attack: order-1001 / 12.34 cut into order-100 / 12.3, the cut-off
    characters carried by empty-named members in wrappers placed by their names."""
    return {
        "ll_transaction_id": "ll-",
        "lm": {"": "1"},
        "merchant_transaction_id": "order-100",
        "n": {"": "1"},
        "payment_data": {
            **genuine["payment_data"],
            "payment_amount": "12.3",
            "payment_b": {"": "4"},
        },
    }


def _moved(genuine: dict[str, Any]) -> dict[str, Any]:
    """The provider members moved out of payment_data: a card notification read as a wallet."""
    moved = {**genuine, "payment_data": dict(genuine["payment_data"])}
    for name in ("stripe_payment_intent_id", "status"):
        moved[name] = moved["payment_data"].pop(name)
    return moved


def test_a_resegmented_body_under_a_genuine_signature_is_refused_and_makes_nothing(
    scheme: str,
    signed_server: tuple[LiveServer, Callable[[bytes], dict[str, str]], list[str]],
    ledger: Ledger,
    db_rows: Rows,
) -> None:
    server, sign, signalled = signed_server
    ledger.expect_transaction("order-100", 1230, "CNY")
    ledger.expect_transaction("order-1001", 1234, "CNY")
    genuine = notification_document(payment_amount="12.34")
    genuine["merchant_transaction_id"] = "order-1001"
    body = json.dumps(genuine).encode()
    headers = sign(body)
    forged = json.dumps(_resegmented(genuine)).encode()

    status, answer = _post(server, forged, headers)

    expected = "non_canonical_body" if scheme == "sorted-fields-hmac" else "invalid_signature"
    assert (status, answer["error"]["code"]) == (401, expected)
    assert db_rows("SELECT COUNT(*) AS n FROM deliveries") == [{"n": 0}]
    assert db_rows("SELECT COUNT(*) AS n FROM outcomes") == [{"n": 0}]
    assert db_rows("SELECT reason FROM rejected_deliveries") == [{"reason": expected}]
    assert ledger.state("order-100") == "pending"
    assert signalled == []
    # The genuine body under the same signature still gets through.
    assert _post(server, body, headers)[0] == 200
    assert eventually(lambda: signalled == ["order-1001"])  # its receivers run after the answer
    assert signalled == ["order-1001"]


def test_provider_members_moved_out_of_payment_data_are_refused_over_http(
    signed_server: tuple[LiveServer, Callable[[bytes], dict[str, str]], list[str]],
    ledger: Ledger,
    db_rows: Rows,
) -> None:
    server, sign, signalled = signed_server
    ledger.expect_transaction("order-1", 2500, "CNY")
    genuine = notification_document("card", status="requires_payment_method")
    headers = sign(json.dumps(genuine).encode())

    status, answer = _post(server, json.dumps(_moved(genuine)).encode(), headers)

    assert (status, answer["error"]["code"]) == (401, "non_canonical_body")
    assert db_rows("SELECT COUNT(*) AS n FROM deliveries") == [{"n": 0}]
    assert db_rows("SELECT reason FROM rejected_deliveries") == [{"reason": "non_canonical_body"}]
    assert ledger.state("order-1") == "pending"
    assert signalled == []


@pytest.mark.parametrize(
    "pad",
    [
        pytest.param(lambda body: body[:-1] + b" " * 500 + b"}", id="whitespace"),
        pytest.param(lambda body: json.dumps(json.loads(body), indent=7).encode(), id="layout"),
    ],
)
def test_a_padded_replay_is_a_duplicate_not_a_new_delivery(
    signed_server: tuple[LiveServer, Callable[[bytes], dict[str, str]], list[str]],
    ledger: Ledger,
    db_rows: Rows,
    pad: Callable[[bytes], bytes],
) -> None:
    server, sign, signalled = signed_server
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = json.dumps(notification_document("orchestrator")).encode()
    headers = sign(body)

    first = _post(server, body, headers)
    replay = _post(server, pad(body), headers)

    assert (first[0], first[1]["status"]) == (200, "processed")
    assert (replay[0], replay[1]["status"]) == (200, "duplicate")
    assert replay[1]["delivery_id"] == first[1]["delivery_id"]
    assert db_rows("SELECT attempts FROM deliveries") == [{"attempts": 2}]
    assert signalled == ["order-1"]


def test_a_null_padded_replay_is_refused_not_stored(
    signed_server: tuple[LiveServer, Callable[[bytes], dict[str, str]], list[str]],
    db_rows: Rows,
) -> None:
    server, sign, _ = signed_server
    body = json.dumps(notification_document()).encode()
    headers = sign(body)
    assert _post(server, body, headers)[0] == 200

    status, answer = _post(server, body[:-1] + b', "pad": null}', headers)

    assert (status, answer["error"]["code"]) == (401, "non_canonical_body")
    assert db_rows("SELECT COUNT(*) AS n FROM deliveries") == [{"n": 1}]
