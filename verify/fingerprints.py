"""Naming a key without showing it: its fingerprint.

A person comparing two configurations, or reading which key verified a delivery, needs to tell
keys apart, never to read one. The fingerprint is the first 16 hex digits of the SHA-256 of the
key's decoded bytes (an HMAC key's bytes, an Ed25519 public key's 32 raw bytes, an RSA public
key's SubjectPublicKeyInfo DER), so the same key written two ways (with or without base64
padding, PEM or DER) has one fingerprint, and 64 bits leave no useful clue to a secret.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

from cryptography.hazmat.primitives import serialization

from payhooks.verify.keys import (
    decode_ed25519_public,
    decode_rsa_public,
    decode_shared_secret,
    decode_whsec,
)
from payhooks.verify.registry import SCHEMES

__all__ = ["FINGERPRINT_LENGTH", "key_fingerprint"]

#: Hex digits in a fingerprint.
FINGERPRINT_LENGTH: Final = 16


def _ed25519_bytes(text: str, *, argument: str) -> bytes:
    return decode_ed25519_public(text, argument=argument).public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


def _rsa_bytes(text: str, *, argument: str) -> bytes:
    return decode_rsa_public(text, argument=argument).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


#: How each scheme's verifying key decodes to the bytes that are hashed.
_KEY_BYTES: Final[dict[str, Callable[..., bytes]]] = {
    "standard-webhooks": decode_whsec,
    "standard-webhooks-ed25519": _ed25519_bytes,
    "sorted-fields-rsa": _rsa_bytes,
    "sorted-fields-hmac": decode_shared_secret,
    "hmac-sha256": decode_shared_secret,
}


def key_fingerprint(scheme: str, key: str, *, argument: str = "key") -> str:
    """The fingerprint of ``key``, a verifying key of ``scheme`` as the receiver is configured
    with it (a shared secret, or the sender's public key).

    :raises ValueError: an unknown scheme, or a key the scheme cannot use (naming
        ``argument``, never showing the key).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: {scheme!r} is not a known scheme")
    decoded = _KEY_BYTES[scheme](key.strip(), argument=argument)
    return hashlib.sha256(decoded).hexdigest()[:FINGERPRINT_LENGTH]
