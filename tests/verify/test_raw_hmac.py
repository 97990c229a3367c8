"""``hmac-sha256`` beyond the shared contract: encodings, the configurable header, and a body
that is never parsed."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payhooks.verify import InvalidSignatureError, MissingSignatureError, get_signer, get_verifier

SECRET = "shared-secret-ümlaut"
BODY = b"not JSON at all \x00\xff"
MAC = hmac.new(SECRET.encode(), BODY, hashlib.sha256).digest()


@pytest.mark.parametrize(
    ("encoding", "value"),
    [
        ("hex", MAC.hex()),
        ("hex", MAC.hex().upper()),
        ("base64", base64.b64encode(MAC).decode()),
    ],
    ids=["hex", "upper-hex", "base64"],
)
def test_mac_of_the_raw_body_verifies_in_the_configured_encoding(encoding: str, value: str) -> None:
    verifier = get_verifier("hmac-sha256", SECRET, encoding=encoding)
    assert verifier.verify({"X-Signature": value}, BODY) == ("hmac-sha256", None, None)


@pytest.mark.parametrize(
    ("encoding", "value"),
    [("hex", base64.b64encode(MAC).decode()), ("base64", MAC.hex())],
    ids=["base64-to-a-hex-verifier", "hex-to-a-base64-verifier"],
)
def test_mac_in_the_other_encoding_is_invalid(encoding: str, value: str) -> None:
    with pytest.raises(InvalidSignatureError):
        get_verifier("hmac-sha256", SECRET, encoding=encoding).verify({"x-signature": value}, BODY)


def test_header_name_is_configurable_and_looked_up_in_any_case() -> None:
    verifier = get_verifier("hmac-sha256", SECRET, header_name="X-Hub-Signature-256")
    assert verifier.header_names == ("x-hub-signature-256",)
    assert verifier.is_valid({"x-hub-signature-256": MAC.hex()}, BODY)
    with pytest.raises(MissingSignatureError) as exc_info:
        verifier.verify({"X-Signature": MAC.hex()}, BODY)
    assert exc_info.value.header == "x-hub-signature-256"


@pytest.mark.parametrize("encoding", ["hex", "base64"])
def test_signer_writes_the_configured_header_and_encoding(encoding: str) -> None:
    signer = get_signer("hmac-sha256", SECRET, header_name="X-Mac", encoding=encoding)
    expected = MAC.hex() if encoding == "hex" else base64.b64encode(MAC).decode()
    assert signer.sign(BODY) == {"X-Mac": expected}


@pytest.mark.parametrize(
    ("option", "value"),
    [("header_name", "X Signature"), ("header_name", ""), ("encoding", "base32")],
)
def test_bad_option_values_are_refused_by_name(option: str, value: str) -> None:
    options: dict[str, Any] = {option: value}
    with pytest.raises(ValueError, match=option):
        get_verifier("hmac-sha256", SECRET, **options)
    with pytest.raises(ValueError, match=option):
        get_signer("hmac-sha256", SECRET, **options)


# Shared secrets as configured: no surrounding whitespace (it is stripped), at least 16 bytes.
_SECRETS = st.text(
    st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp", "Zs")), min_size=16, max_size=200
)


@settings(max_examples=300)
@given(secret=_SECRETS, bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=4))
def test_the_mac_is_the_standard_librarys_hmac_sha256_for_any_secret(
    secret: str, bodies: list[bytes]
) -> None:
    verifier = get_verifier("hmac-sha256", secret)
    for body in bodies:  # one verifier, reused: nothing of a check carries over to the next
        mac = hmac.digest(secret.encode(), body, "sha256")
        assert verifier.is_valid({"x-signature": mac.hex()}, body)
        assert not verifier.is_valid({"x-signature": (bytes([mac[0] ^ 1]) + mac[1:]).hex()}, body)


@pytest.mark.parametrize("size", [63, 64, 65, 128])
def test_secrets_at_the_hash_block_size_boundary_verify(size: int) -> None:
    secret = "k" * size
    mac = hmac.digest(secret.encode(), b"m", "sha256")
    assert get_verifier("hmac-sha256", secret).is_valid({"x-signature": mac.hex()}, b"m")
