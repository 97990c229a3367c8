"""A delivery's signature evidence: recomputed from the stored bytes and the app's keys as
they are when the page is shown, keys named by fingerprint only."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.console.evidence import app_settings, signature_evidence
from payhooks.storage import Ledger
from payhooks.verify import key_fingerprint
from tests.console.conftest import NOTIFY, VIEWER, Deliver
from tests.support.app import TEST_SECRET, BodyFactory, SignFunction

NEW_SECRET = "whsec_" + base64.b64encode(b"the key that came after rotation").decode()
OLD = key_fingerprint("standard-webhooks", TEST_SECRET)
NEW = key_fingerprint("standard-webhooks", NEW_SECRET)


def _evidence(client: FlaskClient, delivery_id: int) -> str:
    answer = client.get(f"/console/deliveries/{delivery_id}", headers=VIEWER)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    text = answer.get_data(as_text=True)
    section = re.search(r"<h2>Signature</h2>.*?</dl>", text, re.DOTALL)
    assert section is not None, text
    assert TEST_SECRET.removeprefix("whsec_") not in text
    assert NEW_SECRET.removeprefix("whsec_") not in text
    return section.group(0)


@pytest.mark.parametrize(
    ("secrets", "verified_by"),
    [([TEST_SECRET], OLD), ([NEW_SECRET, TEST_SECRET], OLD)],
    ids=["its-key", "old-key-while-rotating"],
)
def test_the_key_that_verifies_the_stored_body_now_is_named_by_its_fingerprint(
    console_app: Flask, console: FlaskClient, deliver: Deliver, secrets: list[str], verified_by: str
) -> None:
    delivery_id = deliver(external_identifier="order-1")
    console_app.config["PAYHOOKS_SECRETS"] = secrets

    shown = _evidence(console, delivery_id)

    assert 'data-evidence="verified"' in shown
    assert "<dt>Scheme</dt><dd><code>standard-webhooks</code></dd>" in shown
    assert f'<code data-key="{verified_by}">{verified_by}</code>' in shown
    assert (
        ", ".join(f"<code>{key_fingerprint('standard-webhooks', s)}</code>" for s in secrets)
        in shown
    )


def test_after_the_signing_key_is_rotated_out_no_key_matches(
    console_app: Flask, console: FlaskClient, deliver: Deliver
) -> None:
    delivery_id = deliver(external_identifier="order-1")
    console_app.config["PAYHOOKS_SECRETS"] = [NEW_SECRET]

    shown = _evidence(console, delivery_id)

    assert 'data-problem="no_key_matches"' in shown
    assert "rotated out" in shown
    assert f"<code>{NEW}</code>" in shown
    assert OLD not in shown


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"content-type": "application/json"}, "no_signature_header"),
        (
            {"webhook-id": "msg_1", "webhook-timestamp": "1700000000", "webhook-signature": "v1"},
            "unknown_scheme",
        ),
        (
            {
                "webhook-id": "msg_1",
                "webhook-timestamp": "1700000000",
                "webhook-signature": "v1," + base64.b64encode(b"\0" * 32).decode(),
            },
            "no_key_matches",
        ),
    ],
)
def test_a_stored_delivery_whose_headers_cannot_verify_says_why(
    console: FlaskClient, ledger: Ledger, headers: dict[str, str], problem: str
) -> None:
    delivery = ledger.receiver.record_delivery(
        dedupe_key="msg_stored", body=b'{"a": 1}', headers=headers
    )

    shown = _evidence(console, delivery.id)

    assert f'data-problem="{problem}"' in shown
    assert "unknown: no key verified" in shown


def test_the_signed_time_is_compared_with_the_received_time(
    console: FlaskClient, make_body: BodyFactory, sign: SignFunction, ledger: Ledger
) -> None:
    body = make_body(external_identifier="order-1")
    signed_at = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=90)
    answer = console.post(NOTIFY, data=body, headers=sign(body, timestamp=signed_at))
    assert answer.status_code == 200
    details = ledger.receiver.delivery(answer.get_json()["delivery_id"])
    assert details is not None
    delay = int((details.received_at - signed_at).total_seconds())

    shown = _evidence(console, details.id)

    assert f"{signed_at:%Y-%m-%d %H:%M:%S} UTC: received {delay} s later" in shown
    assert "within the app's tolerance of 300 s" in shown


def test_a_console_without_the_receiver_s_keys_says_not_checked_here() -> None:
    received = datetime(2026, 11, 21, 12, tzinfo=UTC)
    settings = app_settings({"PAYHOOKS_DATABASE": "ledger.db"})

    evidence = signature_evidence(settings, {"webhook-id": "msg_1"}, b"{}", received)

    assert settings is None
    assert (evidence.checked, evidence.key, evidence.keys) == (False, None, ())
