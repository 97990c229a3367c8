"""key_fingerprint: a key named without being shown, the same however it is written."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from cryptography.hazmat.primitives import serialization

from payhooks.verify import SCHEMES, generate_keypair, key_fingerprint

RAW = b"a key of thirty-two bytes, random"
WHSEC = "whsec_" + base64.b64encode(RAW).decode()


def test_a_whsec_fingerprint_is_the_start_of_the_sha256_of_its_key_bytes() -> None:
    assert key_fingerprint("standard-webhooks", WHSEC) == hashlib.sha256(RAW).hexdigest()[:16]


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_every_scheme_s_verifying_key_has_a_fingerprint_of_16_hex_that_tells_keys_apart(
    scheme: str,
) -> None:
    first, second = generate_keypair(scheme), generate_keypair(scheme)

    printed = key_fingerprint(scheme, first.verifying_key)

    assert re.fullmatch(r"[0-9a-f]{16}", printed)
    assert printed == key_fingerprint(scheme, f"  {first.verifying_key}\n")
    assert printed != key_fingerprint(scheme, second.verifying_key)
    assert printed not in first.verifying_key


@pytest.mark.parametrize(
    ("scheme", "one", "other"),
    [
        ("standard-webhooks", WHSEC, WHSEC.rstrip("=")),
        ("hmac-sha256", "x" * 43, "x" * 43),
    ],
)
def test_the_same_key_written_two_ways_has_one_fingerprint(
    scheme: str, one: str, other: str
) -> None:
    assert key_fingerprint(scheme, one) == key_fingerprint(scheme, other)


def test_an_rsa_key_in_pem_and_in_der_has_one_fingerprint() -> None:
    der_text = generate_keypair("sorted-fields-rsa").verifying_key
    key = serialization.load_der_public_key(base64.b64decode(der_text))
    pem = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()

    assert key_fingerprint("sorted-fields-rsa", pem) == key_fingerprint(
        "sorted-fields-rsa", der_text
    )


@pytest.mark.parametrize(
    ("scheme", "key", "complaint"),
    [
        ("standard-webhooks", "whsec_not!base64", "PAYHOOKS_SECRETS[2]"),
        ("standard-webhooks-ed25519", "whpk_c2hvcnQ=", "PAYHOOKS_SECRETS[2]"),
        ("no-such-scheme", WHSEC, "scheme"),
    ],
)
def test_a_key_that_does_not_decode_is_refused_naming_its_place_never_its_text(
    scheme: str, key: str, complaint: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(complaint)) as exc_info:
        key_fingerprint(scheme, key, argument="PAYHOOKS_SECRETS[2]")

    assert key.removeprefix("whsec_").removeprefix("whpk_") not in str(exc_info.value)
