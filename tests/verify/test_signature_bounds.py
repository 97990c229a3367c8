"""What an unauthenticated request can make a verifier do is bounded, for every scheme: an
overlong signature header is refused unread, signature entries are capped and tried once
each, and a sorted-fields body with too many members is refused before it is parsed."""

from __future__ import annotations

import base64
import json
from functools import cache

import pytest

from payhooks.verify import (
    SCHEMES,
    InvalidSignatureError,
    KeyPair,
    MalformedSignatureError,
    generate_keypair,
    get_signer,
    get_verifier,
)
from payhooks.verify.standard_webhooks import MAX_SIGNATURE_ENTRIES
from tests.support.notifications import NOTIFICATION

#: The header each scheme reads its signature from.
SIGNATURE_HEADERS = {
    "standard-webhooks": "webhook-signature",
    "standard-webhooks-ed25519": "webhook-signature",
    "sorted-fields-rsa": "signature",
    "sorted-fields-hmac": "signature",
    "hmac-sha256": "X-Signature",
}


@cache
def keys_for(scheme: str) -> KeyPair:
    return generate_keypair(scheme)


def signed(scheme: str, body: bytes = NOTIFICATION) -> dict[str, str]:
    return get_signer(scheme, keys_for(scheme).signing_key).sign(body)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_an_overlong_signature_header_is_malformed_whatever_it_holds(scheme: str) -> None:
    headers = signed(scheme)
    name = SIGNATURE_HEADERS[scheme]
    # The genuine value, then padding: still the genuine signature first.
    headers[name] = headers[name] + " " + "v1a," + "A" * 3000

    with pytest.raises(MalformedSignatureError) as exc_info:
        get_verifier(scheme, keys_for(scheme).verifying_key).verify(headers, NOTIFICATION)
    assert exc_info.value.header == name.lower()


@pytest.mark.parametrize(
    ("scheme", "version"), [("standard-webhooks-ed25519", "v1a"), ("standard-webhooks", "v1")]
)
def test_more_distinct_entries_than_the_cap_are_malformed_before_any_is_tried(
    scheme: str, version: str
) -> None:
    headers = signed(scheme)
    size = 64 if version == "v1a" else 32
    others = [
        f"{version}," + base64.b64encode(bytes([n]) * size).decode()
        for n in range(MAX_SIGNATURE_ENTRIES)
    ]
    headers["webhook-signature"] = " ".join([*others, headers["webhook-signature"]])

    with pytest.raises(MalformedSignatureError, match="more than"):
        get_verifier(scheme, keys_for(scheme).verifying_key).verify(headers, NOTIFICATION)


@pytest.mark.parametrize("scheme", ["standard-webhooks-ed25519", "standard-webhooks"])
def test_a_repeated_entry_counts_once(scheme: str) -> None:
    headers = signed(scheme)
    entry = headers["webhook-signature"]
    headers["webhook-signature"] = " ".join([entry] * (MAX_SIGNATURE_ENTRIES * 3))

    assert get_verifier(scheme, keys_for(scheme).verifying_key).is_valid(headers, NOTIFICATION)


@pytest.mark.parametrize("scheme", ["sorted-fields-hmac", "sorted-fields-rsa"])
def test_a_body_with_more_members_than_the_cap_is_refused_before_it_is_parsed(scheme: str) -> None:
    body = json.dumps({f"m{n}": 1.5e-300 for n in range(300)}).encode()
    # Signatures of the right length, so that only the body can be what is refused.
    rsa_size = base64.b64encode(bytes(256)).decode()
    headers = {"signature": "00" * 32 if scheme.endswith("hmac") else rsa_size}

    with pytest.raises(InvalidSignatureError, match="more than 256 members"):
        get_verifier(scheme, keys_for(scheme).verifying_key).verify(headers, body)


def test_the_member_cap_is_an_option() -> None:
    scheme = "sorted-fields-hmac"
    verifier = get_verifier(scheme, keys_for(scheme).verifying_key, max_members=5)
    with pytest.raises(InvalidSignatureError, match="more than 5 members"):
        verifier.verify(signed(scheme), NOTIFICATION)
