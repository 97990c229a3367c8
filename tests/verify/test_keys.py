"""Key decoding: every form a key comes in, and refusals that never echo the key."""

from __future__ import annotations

import base64
import secrets
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from payhooks.verify import get_signer, get_verifier
from payhooks.verify.keys import (
    decode_ed25519_private,
    decode_ed25519_public,
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
    assert (
        decode_shared_secret("clé-secrète-partagée", argument="k")
        == "clé-secrète-partagée".encode()
    )


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


# -- secrets too short to be secrets ------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 16, 23])
def test_a_whsec_secret_under_24_bytes_is_refused_naming_the_key_and_the_reason(size: int) -> None:
    text = "whsec_" + base64.b64encode(secrets.token_bytes(size)).decode()
    with pytest.raises(ValueError, match=r"^keys\[1\]: the secret is \d+ bytes? long") as exc_info:
        decode_whsec(text, argument="keys[1]")
    assert "at least 24" in str(exc_info.value)
    assert text.removeprefix("whsec_") not in str(exc_info.value)


def test_the_reviewed_one_byte_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="1 byte long"):
        get_verifier("standard-webhooks", "whsec_AA==")


@pytest.mark.parametrize("scheme", ["sorted-fields-hmac", "hmac-sha256"])
def test_a_shared_secret_under_16_bytes_is_refused_and_16_is_enough(scheme: str) -> None:
    with pytest.raises(ValueError, match=r"^keys\[0\]: the secret is 15 bytes long") as exc_info:
        get_verifier(scheme, "s3cret-passw0rd")
    assert "s3cret" not in str(exc_info.value)
    assert get_verifier(scheme, "s3cret-passw0rd!")  # 16 bytes


# -- the published Ed25519 key forms ---------------------------------------------------------


def _raw_public(key: ed25519.Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _raw_seed(key: ed25519.Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize("form", ["seed", "seed-and-public", "pkcs8-der"])
def test_every_published_whsk_form_signs_as_the_seed_does(form: str) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    raw = {
        "seed": _raw_seed(key),
        "seed-and-public": _raw_seed(key) + _raw_public(key),
        "pkcs8-der": key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    }[form]
    decoded = decode_ed25519_private("whsk_" + _b64(raw), argument="key")
    assert _raw_seed(decoded) == _raw_seed(key)


def test_a_whsk_whose_public_half_is_not_its_seeds_is_refused() -> None:
    key, other = ed25519.Ed25519PrivateKey.generate(), ed25519.Ed25519PrivateKey.generate()
    with pytest.raises(ValueError, match="last 32 bytes are not the public key"):
        decode_ed25519_private("whsk_" + _b64(_raw_seed(key) + _raw_public(other)), argument="key")


@pytest.mark.parametrize("form", ["raw", "spki-der"])
def test_every_published_whpk_form_verifies(form: str) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    raw = (
        _raw_public(key)
        if form == "raw"
        else key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    signer = get_signer("standard-webhooks-ed25519", "whsk_" + _b64(_raw_seed(key)))
    headers = signer.sign(b"{}")
    assert get_verifier("standard-webhooks-ed25519", "whpk_" + _b64(raw)).is_valid(headers, b"{}")


@pytest.mark.parametrize(
    ("prefix", "size", "decode"),
    [("whpk_", 31, decode_ed25519_public), ("whsk_", 40, decode_ed25519_private)],
)
def test_an_ed25519_key_of_another_length_says_which_forms_are_read_and_how_to_convert(
    prefix: str, size: int, decode: Any
) -> None:
    with pytest.raises(ValueError, match=r"expected .*32-byte.*openssl pkey") as exc_info:
        decode(prefix + _b64(bytes(range(size))), argument="keys[0]")
    assert str(exc_info.value).startswith("keys[0]: ")
