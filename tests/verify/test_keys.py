"""Key decoding: every form a key comes in, and refusals that never echo the key."""

from __future__ import annotations

import base64
import secrets

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from payhooks.verify.keys import (
    decode_rsa_private,
    decode_rsa_public,
    decode_shared_secret,
    decode_whsec,
    encode_rsa_public,
    new_rsa_private,
)


def test_whsec_decodes_to_its_bytes() -> None:
    raw = secrets.token_bytes(24)
    text = "whsec_" + base64.b64encode(raw).decode()
    assert decode_whsec(text, argument="k") == raw


@pytest.mark.parametrize("text", ["whsec_c2VjcmV0IQ*", "whsec_", "whsec_é"])
def test_bad_whsec_is_refused_without_echo(text: str) -> None:
    with pytest.raises(ValueError, match=r"^keys\[3\]: ") as exc_info:
        decode_whsec(text, argument="keys[3]")
    assert text.removeprefix("whsec_") not in str(exc_info.value) or text == "whsec_"


def test_shared_secret_is_utf8() -> None:
    assert decode_shared_secret("clé", argument="k") == "clé".encode()


def test_generated_rsa_keys_are_2048_bits() -> None:
    assert new_rsa_private().key_size == 2048


def test_rsa_key_shorter_than_1024_bits_is_refused() -> None:
    modulus = (1 << 511) | secrets.randbits(511) | 1
    short = rsa.RSAPublicNumbers(65537, modulus).public_key()
    with pytest.raises(ValueError, match="512 bits is too short"):
        decode_rsa_public(encode_rsa_public(short), argument="keys[0]")


def test_encrypted_private_key_is_refused() -> None:
    pem = (
        new_rsa_private()
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pass"),
        )
        .decode()
    )
    with pytest.raises(ValueError, match="key: not an unencrypted RSA private key"):
        decode_rsa_private(pem, argument="key")
