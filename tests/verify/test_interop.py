"""``standard-webhooks`` against the published reference, the ``standardwebhooks`` package, in
both directions: what it signs payhooks verifies, what payhooks signs it verifies.

The package checks timestamps against the wall clock and cannot be given another, so these
tests sign with the real current time; payhooks' verifiers use the wall clock too.
"""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from payhooks.verify import (
    InvalidSignatureError,
    TimestampOutOfToleranceError,
    generate_keypair,
    get_signer,
    get_verifier,
)

BODY = '{"merchant_transaction_id":"order-1","payment_data":{"payment_amount":"25.00"}}'


def now() -> datetime:
    return datetime.fromtimestamp(int(time.time()), UTC)


def package_headers(package: Webhook, msg_id: str, body: str, when: datetime) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": package.sign(msg_id, when, body),
    }


@pytest.fixture
def secret() -> str:
    return generate_keypair("standard-webhooks").signing_key


def test_signed_by_the_package_verified_by_payhooks(secret: str) -> None:
    when = now()
    headers = package_headers(Webhook(secret), "msg_ref1", BODY, when)
    verified = get_verifier("standard-webhooks", secret).verify(headers, BODY.encode())
    assert verified.webhook_id == "msg_ref1"
    assert verified.timestamp == when


def test_signed_by_payhooks_verified_by_the_package(secret: str) -> None:
    headers = get_signer("standard-webhooks", secret).sign(BODY.encode())
    assert Webhook(secret).verify(BODY.encode(), headers) == {
        "merchant_transaction_id": "order-1",
        "payment_data": {"payment_amount": "25.00"},
    }


def test_package_rejects_what_payhooks_signed_with_another_secret(secret: str) -> None:
    other = generate_keypair("standard-webhooks").signing_key
    headers = get_signer("standard-webhooks", other).sign(BODY.encode())
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.encode(), headers)


def test_several_package_signatures_in_one_header_verify(secret: str) -> None:
    old_secret = generate_keypair("standard-webhooks").signing_key
    when = now()
    signatures = " ".join(Webhook(key).sign("msg_ref2", when, BODY) for key in (old_secret, secret))
    headers = {**package_headers(Webhook(secret), "msg_ref2", BODY, when)}
    headers["webhook-signature"] = signatures
    assert get_verifier("standard-webhooks", secret).is_valid(headers, BODY.encode())
    assert get_verifier("standard-webhooks", old_secret).is_valid(headers, BODY.encode())


def test_payhooks_header_with_several_entries_is_accepted_by_the_package(secret: str) -> None:
    old_secret = generate_keypair("standard-webhooks").signing_key
    signer, old_signer = (
        get_signer("standard-webhooks", secret),
        get_signer("standard-webhooks", old_secret),
    )
    when = int(time.time())
    new = signer.sign(BODY.encode(), webhook_id="msg_ref3", timestamp=when)
    old = old_signer.sign(BODY.encode(), webhook_id="msg_ref3", timestamp=when)
    headers = {**new, "webhook-signature": f"{old['webhook-signature']} {new['webhook-signature']}"}
    assert Webhook(secret).verify(BODY.encode(), headers, json_parse=False) is None
    assert Webhook(old_secret).verify(BODY.encode(), headers, json_parse=False) is None


def test_rotated_secret_verifies_deliveries_signed_by_the_package_with_either(
    secret: str,
) -> None:
    old_secret = generate_keypair("standard-webhooks").signing_key
    verifier = get_verifier("standard-webhooks", [old_secret, secret])
    for key in (old_secret, secret):
        headers = package_headers(Webhook(key), "msg_ref4", BODY, now())
        assert verifier.is_valid(headers, BODY.encode())
    stranger = generate_keypair("standard-webhooks").signing_key
    with pytest.raises(InvalidSignatureError):
        verifier.verify(package_headers(Webhook(stranger), "msg_ref4", BODY, now()), BODY.encode())


def test_package_signature_over_another_body_is_rejected(secret: str) -> None:
    headers = package_headers(Webhook(secret), "msg_ref5", BODY, now())
    with pytest.raises(InvalidSignatureError):
        get_verifier("standard-webhooks", secret).verify(headers, BODY.replace("25", "26").encode())


def test_package_signature_from_long_ago_is_out_of_tolerance(secret: str) -> None:
    when = datetime.fromtimestamp(int(time.time()) - 3600, UTC)
    headers = package_headers(Webhook(secret), "msg_ref6", BODY, when)
    with pytest.raises(TimestampOutOfToleranceError):
        get_verifier("standard-webhooks", secret).verify(headers, BODY.encode())


@settings(max_examples=40, deadline=None)
@given(
    body=st.text(max_size=200),
    msg_id=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=30),
    key=st.binary(min_size=24, max_size=100),
)
def test_both_directions_agree_for_any_text_id_and_secret(
    body: str, msg_id: str, key: bytes
) -> None:
    secret = "whsec_" + base64.b64encode(key).decode()
    package = Webhook(secret)
    when = now()
    assert get_verifier("standard-webhooks", secret).is_valid(
        package_headers(package, msg_id, body, when), body.encode()
    )
    headers = get_signer("standard-webhooks", secret).sign(body.encode(), webhook_id=msg_id)
    assert package.verify(body.encode(), headers, json_parse=False) is None
