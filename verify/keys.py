"""Decoding configured key text into key objects, and making new keys.

Every decoder takes the text and the argument name to blame (``keys[1]``, ``key``), and raises
``ValueError`` naming that argument and the expected form, never echoing the key. Decoding
happens once, when a verifier or signer is built.

Forms:

- ``whsec_<base64>``: a Standard Webhooks HMAC secret (the prefix may be left off, as the
  ``standardwebhooks`` package allows; unpadded base64 is accepted). At least
  :data:`MIN_WHSEC_BYTES` bytes: the specification asks 24 to 64 random bytes, and
  ``payhooks keygen`` makes 32. Longer is accepted (HMAC hashes a long key first; it is no
  weaker).
- ``whpk_<base64>``: an Ed25519 public key, the 32 raw bytes (payhooks' form) or the 44-byte
  SubjectPublicKeyInfo DER some implementations write. ``whsk_<base64>``: an Ed25519 signing
  key, the 32-byte seed (payhooks' form), the 64-byte seed-and-public-key (the Svix server's
  form; the public half must match the seed), or the 48-byte PKCS#8 DER. Anything else is
  refused with a message that says which forms are read and how to convert.
- RSA: PEM (``-----BEGIN PUBLIC KEY-----``, PKCS#1 ``RSA PUBLIC KEY`` too), or bare base64 DER
  as the service hands its key out (SubjectPublicKeyInfo; PKCS#8 for private keys).
- A shared secret for the other HMAC schemes: its UTF-8 bytes, at least
  :data:`MIN_SHARED_SECRET_BYTES` of them. The service hands these secrets out and the
  merchant cannot make them longer, so the floor is lower than for ``whsec_`` secrets: it
  refuses what cannot be a secret (a placeholder, a typo, a short password that a captured
  delivery lets anyone guess offline), not every secret weaker than payhooks' own.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

__all__ = [
    "MIN_RSA_KEY_BITS",
    "MIN_SHARED_SECRET_BYTES",
    "MIN_WHSEC_BYTES",
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
#: The shortest ``whsec_`` secret accepted, in bytes: the Standard Webhooks specification's
#: lower bound (it asks 24 to 64; ``payhooks keygen`` makes 32).
MIN_WHSEC_BYTES = 24
#: The shortest shared secret (``sorted-fields-hmac``, ``hmac-sha256``) accepted, in UTF-8
#: bytes. One captured delivery lets anyone test guesses offline at billions a second, so a
#: secret must be out of reach of that: 16 random characters are (about 95 bits), a word is
#: not. The service's own secrets we know of are 32 characters.
MIN_SHARED_SECRET_BYTES = 16


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
    if len(key) < MIN_WHSEC_BYTES:
        raise ValueError(
            f"{argument}: the secret is {_bytes(len(key))} long, too short to be a secret: "
            f"a whsec_ secret must hold at least {MIN_WHSEC_BYTES} random bytes (Standard "
            "Webhooks asks 24 to 64; 'payhooks keygen' makes 32)"
        )
    return key


def _bytes(count: int) -> str:
    return f"{count} byte" if count == 1 else f"{count} bytes"


def decode_shared_secret(text: str, *, argument: str) -> bytes:
    """The HMAC key bytes of a plain shared secret: its UTF-8 encoding."""
    try:
        key = text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{argument}: the secret is not encodable as UTF-8") from err
    if not key:
        raise ValueError(f"{argument}: the secret is empty")
    if len(key) < MIN_SHARED_SECRET_BYTES:
        raise ValueError(
            f"{argument}: the secret is {_bytes(len(key))} long, too short to be a secret: a "
            f"shared secret must be at least {MIN_SHARED_SECRET_BYTES} bytes, so that a "
            "captured delivery does not let anyone guess it ('payhooks keygen' makes 43 "
            "characters; ask the service for a longer secret)"
        )
    return key


def _prefixed(text: str, prefix: str, *, argument: str, what: str) -> bytes:
    if not text.startswith(prefix):
        raise ValueError(f"{argument}: not {what} (expected the {prefix} prefix)")
    try:
        return _b64decode(text[len(prefix) :])
    except (binascii.Error, UnicodeEncodeError) as err:
        raise ValueError(f"{argument}: not {what} (base64 after the prefix)") from err


_PUBLIC_FORMS = (
    "expected whpk_ and the base64 of the 32-byte raw public key (or of its 44-byte "
    "SubjectPublicKeyInfo DER); from a PEM public key, 'openssl pkey -pubin -outform DER' "
    "gives the DER"
)
_PRIVATE_FORMS = (
    "expected whsk_ and the base64 of the 32-byte seed, of the 64-byte seed and public key, "
    "or of the 48-byte PKCS#8 DER; from a PEM private key, 'openssl pkey -outform DER' gives "
    "the DER"
)


def decode_ed25519_public(text: str, *, argument: str) -> ed25519.Ed25519PublicKey:
    """An Ed25519 public key from its ``whpk_`` form: 32 raw bytes, or SPKI DER."""
    what = "a whpk_ public key"
    raw = _prefixed(text, _WHPK, argument=argument, what=what)
    try:
        if len(raw) == 32:
            return ed25519.Ed25519PublicKey.from_public_bytes(raw)
        key = serialization.load_der_public_key(raw)
    except (ValueError, TypeError, UnsupportedAlgorithm) as err:
        raise ValueError(f"{argument}: not a valid Ed25519 public key; {_PUBLIC_FORMS}") from err
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise ValueError(f"{argument}: not an Ed25519 public key; {_PUBLIC_FORMS}")
    return key


def decode_ed25519_private(text: str, *, argument: str) -> ed25519.Ed25519PrivateKey:
    """An Ed25519 signing key from its ``whsk_`` form: the 32-byte seed, the 64-byte seed and
    public key (whose public half must match), or PKCS#8 DER."""
    what = "a whsk_ signing key"
    raw = _prefixed(text, _WHSK, argument=argument, what=what)
    if len(raw) in (32, 64):
        key = ed25519.Ed25519PrivateKey.from_private_bytes(raw[:32])
        if len(raw) == 64 and not hmac.compare_digest(
            raw[32:],
            key.public_key().public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw
            ),
        ):
            raise ValueError(
                f"{argument}: not a valid whsk_ signing key (its last 32 bytes are not the "
                "public key of its first 32)"
            )
        return key
    try:
        loaded = serialization.load_der_private_key(raw, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as err:
        raise ValueError(f"{argument}: not {what} ({len(raw)} bytes); {_PRIVATE_FORMS}") from err
    if not isinstance(loaded, ed25519.Ed25519PrivateKey):
        raise ValueError(f"{argument}: not an Ed25519 signing key; {_PRIVATE_FORMS}")
    return loaded


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
