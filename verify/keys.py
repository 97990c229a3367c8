"""Decoding configured key text into key objects, and making new keys.

Every decoder takes the text and the argument name to blame (``keys[1]``, ``key``), and raises
``ValueError`` naming that argument and the expected form, never echoing the key. Decoding
happens once, when a verifier or signer is built.

Forms:

- ``whsec_<base64>``: a Standard Webhooks HMAC secret (the prefix may be left off, as the
  ``standardwebhooks`` package allows; unpadded base64 is accepted).
- ``whpk_<base64 of 32 bytes>`` / ``whsk_<base64 of the 32-byte seed>``: Ed25519 keys in the
  Standard Webhooks form.
- RSA: PEM (``-----BEGIN PUBLIC KEY-----``, PKCS#1 ``RSA PUBLIC KEY`` too), or bare base64 DER
  as the service hands its key out (SubjectPublicKeyInfo; PKCS#8 for private keys).
- A shared secret for the other HMAC schemes: its UTF-8 bytes.
"""

from __future__ import annotations

import base64
import binascii
import secrets

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

__all__ = [
    "MIN_RSA_KEY_BITS",
    "decode_ed25519_private",
    "decode_ed25519_public",
    "decode_rsa_private",
    "decode_rsa_public",
    "decode_shared_secret",
    "decode_whsec",
    "encode_ed25519_private",
    "encode_ed25519_public",
    "encode_rsa_private",
    "encode_rsa_public",
    "new_ed25519_private",
    "new_rsa_private",
    "new_shared_secret",
    "new_whsec",
]

_WHSEC = "whsec_"
_WHPK = "whpk_"
_WHSK = "whsk_"

#: RSA keys shorter than this are refused. 1024 bits is weak, but payment SDKs of the service's
#: generation still hand such keys out, and refusing the sender's only key helps no one;
#: :func:`new_rsa_private` makes 2048-bit keys.
MIN_RSA_KEY_BITS = 1024


def _b64decode(text: str) -> bytes:
    """Strict base64 (standard alphabet, whitespace ignored, padding optional)."""
    compact = "".join(text.split())
    compact += "=" * (-len(compact) % 4)
    return binascii.a2b_base64(compact.encode("ascii"), strict_mode=True)


def decode_whsec(text: str, *, argument: str) -> bytes:
    """The HMAC key bytes of a ``whsec_`` secret."""
    body = text.removeprefix(_WHSEC)
    try:
        key = _b64decode(body)
    except (binascii.Error, UnicodeEncodeError) as err:
        raise ValueError(f"{argument}: not a whsec_ secret (base64 after the prefix)") from err
    if not key:
        raise ValueError(f"{argument}: the secret is empty")
    return key


def decode_shared_secret(text: str, *, argument: str) -> bytes:
    """The HMAC key bytes of a plain shared secret: its UTF-8 encoding."""
    try:
        key = text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{argument}: the secret is not encodable as UTF-8") from err
    if not key:
        raise ValueError(f"{argument}: the secret is empty")
    return key


def _decode_prefixed_32(text: str, prefix: str, *, argument: str, what: str) -> bytes:
    if not text.startswith(prefix):
        raise ValueError(f"{argument}: not {what} (expected the {prefix} prefix)")
    try:
        raw = _b64decode(text[len(prefix) :])
    except (binascii.Error, UnicodeEncodeError) as err:
        raise ValueError(f"{argument}: not {what} (base64 after the prefix)") from err
    if len(raw) != 32:
        raise ValueError(f"{argument}: not {what} (32 bytes after base64 decoding)")
    return raw


def decode_ed25519_public(text: str, *, argument: str) -> ed25519.Ed25519PublicKey:
    """An Ed25519 public key from its ``whpk_`` form."""
    raw = _decode_prefixed_32(text, _WHPK, argument=argument, what="a whpk_ public key")
    try:
        return ed25519.Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as err:
        raise ValueError(f"{argument}: not a valid Ed25519 public key") from err


def decode_ed25519_private(text: str, *, argument: str) -> ed25519.Ed25519PrivateKey:
    """An Ed25519 signing key from its ``whsk_`` form (the 32-byte seed)."""
    raw = _decode_prefixed_32(text, _WHSK, argument=argument, what="a whsk_ signing key")
    return ed25519.Ed25519PrivateKey.from_private_bytes(raw)


def encode_ed25519_public(key: ed25519.Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _WHPK + base64.b64encode(raw).decode("ascii")


def encode_ed25519_private(key: ed25519.Ed25519PrivateKey) -> str:
    raw = key.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    return _WHSK + base64.b64encode(raw).decode("ascii")


def _pem_or_der(text: str, *, argument: str, what: str) -> tuple[bool, bytes]:
    """Tell PEM from bare base64 DER: returns (is_pem, bytes to load)."""
    stripped = text.strip()
    if stripped.startswith("-----BEGIN"):
        return True, stripped.encode("ascii", "replace")
    try:
        return False, _b64decode(stripped)
    except (binascii.Error, UnicodeEncodeError) as err:
        raise ValueError(f"{argument}: not {what} (PEM, or base64 DER)") from err


def _check_rsa_size(bits: int, *, argument: str) -> None:
    if bits < MIN_RSA_KEY_BITS:
        raise ValueError(f"{argument}: an RSA key of {bits} bits is too short")


def decode_rsa_public(text: str, *, argument: str) -> rsa.RSAPublicKey:
    """An RSA public key from PEM or bare base64 DER SubjectPublicKeyInfo."""
    what = "an RSA public key"
    is_pem, data = _pem_or_der(text, argument=argument, what=what)
    try:
        if is_pem:
            key = serialization.load_pem_public_key(data)
        else:
            key = serialization.load_der_public_key(data)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{argument}: not {what} (PEM, or base64 DER)") from err
    if not isinstance(key, rsa.RSAPublicKey):
        raise ValueError(f"{argument}: not {what} (another key type)")
    _check_rsa_size(key.key_size, argument=argument)
    return key


def decode_rsa_private(text: str, *, argument: str) -> rsa.RSAPrivateKey:
    """An unencrypted RSA private key from PEM or bare base64 DER PKCS#8."""
    what = "an unencrypted RSA private key"
    is_pem, data = _pem_or_der(text, argument=argument, what=what)
    try:
        if is_pem:
            key = serialization.load_pem_private_key(data, password=None)
        else:
            key = serialization.load_der_private_key(data, password=None)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{argument}: not {what} (PEM, or base64 DER)") from err
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError(f"{argument}: not {what} (another key type)")
    _check_rsa_size(key.key_size, argument=argument)
    return key


def encode_rsa_public(key: rsa.RSAPublicKey) -> str:
    """Bare base64 DER SubjectPublicKeyInfo: one token, as the service hands keys out, and
    safe in a whitespace-separated environment variable (PEM is not)."""
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode("ascii")


def encode_rsa_private(key: rsa.RSAPrivateKey) -> str:
    """Bare base64 DER PKCS#8, unencrypted: one token for ``--secret`` arguments."""
    der = key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return base64.b64encode(der).decode("ascii")


def new_whsec() -> str:
    """A fresh Standard Webhooks secret: 32 random bytes."""
    return _WHSEC + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def new_shared_secret() -> str:
    """A fresh shared secret: 32 random bytes as URL-safe text (no whitespace, no quoting)."""
    return secrets.token_urlsafe(32)


def new_ed25519_private() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def new_rsa_private() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)
