"""The Standard Webhooks schemes: ``standard-webhooks`` (v1, HMAC-SHA256) and
``standard-webhooks-ed25519`` (v1a, Ed25519).

Both sign ``{webhook-id}.{webhook-timestamp}.{raw body}`` and send space-separated
``version,base64`` entries in ``webhook-signature``, so a sender can sign with several keys
during a rotation. The body is never parsed: the bytes are verified exactly as received.

How a delivery is judged, in this order (the codes are the contract):

1. ``webhook-id``, ``webhook-timestamp`` or ``webhook-signature`` absent or empty:
   ``missing_signature``.
2. ``webhook-timestamp`` not a whole number of unix seconds (ASCII digits, at most 11), a
   ``webhook-signature`` in which no entry has the ``version,value`` form, one longer than
   :data:`MAX_SIGNATURE_HEADER_LENGTH` characters, or one with more than
   :data:`MAX_SIGNATURE_ENTRIES` distinct entries of this scheme's version, or a ``webhook-id``
   that is not encodable text: ``malformed_signature``. Each entry costs a verification per
   key, so what an unauthenticated request can make us do is bounded before any of it is
   done; repeated entries are tried once.
3. No entry of this scheme's version matches any configured key: ``invalid_signature``. Entries
   of other versions are ignored, so a header holding only ``v1a`` entries is
   ``invalid_signature`` for the HMAC scheme (a signature for another scheme). An entry of this
   version whose value is not strict base64 or has the wrong length is a signature that does
   not match, so also ``invalid_signature``, not malformed: the header was read, the signature
   is wrong. (The reference implementations in Go and JavaScript treat it the same way.)
4. Only then the time: more than the tolerance from now, either way:
   ``timestamp_out_of_tolerance``. Checking it after the signature means this code always
   describes an authentic delivery, which is what an operator needs to know.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, TypeVar

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from payhooks.verify.base import (
    KeyDecoder,
    Signer,
    VerifiedDelivery,
    Verifier,
    decoded_keys,
    single_key,
    validate_webhook_id,
)
from payhooks.verify.errors import InvalidSignatureError, MalformedSignatureError
from payhooks.verify.headers import lookup_headers, required
from payhooks.verify.keys import decode_ed25519_private, decode_ed25519_public, decode_whsec
from payhooks.verify.timestamps import (
    DEFAULT_TOLERANCE_SECONDS,
    Clock,
    check_tolerance,
    signing_time,
)

__all__ = [
    "StandardWebhooksEd25519Signer",
    "StandardWebhooksEd25519Verifier",
    "StandardWebhooksSigner",
    "StandardWebhooksVerifier",
]

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
_HEADERS = (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)
_MAX_TIMESTAMP_DIGITS = 11
_Key = TypeVar("_Key")
#: The longest ``webhook-signature`` header read: room for a score of entries, far more than
#: a sender rotating its keys sends.
MAX_SIGNATURE_HEADER_LENGTH = 2048
#: The most distinct entries of the scheme's version that are tried. A sender signs with one
#: key, two while it rotates; a header with more is refused unread, not tried entry by entry.
MAX_SIGNATURE_ENTRIES = 4


def _seconds(timestamp_text: str) -> int:
    if not (
        timestamp_text.isascii()
        and timestamp_text.isdigit()
        and len(timestamp_text) <= _MAX_TIMESTAMP_DIGITS
    ):
        raise MalformedSignatureError(
            f"the {TIMESTAMP_HEADER} header is not a whole number of unix seconds",
            header=TIMESTAMP_HEADER,
        )
    return int(timestamp_text)


def _signatures(signature_header: str, version: str, size: int) -> list[bytes]:
    """The decoded ``version`` entries of the header, each once (the module's rules 2 and 3)."""
    if len(signature_header) > MAX_SIGNATURE_HEADER_LENGTH:
        raise MalformedSignatureError(
            f"the {SIGNATURE_HEADER} header is longer than {MAX_SIGNATURE_HEADER_LENGTH} "
            "characters",
            header=SIGNATURE_HEADER,
        )
    signatures: list[bytes] = []
    readable = False
    for entry in signature_header.split(" "):
        entry_version, comma, value = entry.partition(",")
        if not (comma and entry_version and value):
            continue
        readable = True
        if entry_version != version:
            continue
        try:
            signature = binascii.a2b_base64(value, strict_mode=True)
        except (binascii.Error, ValueError):
            continue
        if len(signature) == size and signature not in signatures:
            if len(signatures) == MAX_SIGNATURE_ENTRIES:
                raise MalformedSignatureError(
                    f"the {SIGNATURE_HEADER} header holds more than {MAX_SIGNATURE_ENTRIES} "
                    f"{version} signatures",
                    header=SIGNATURE_HEADER,
                )
            signatures.append(signature)
    if not readable:
        raise MalformedSignatureError(
            f"the {SIGNATURE_HEADER} header holds no 'version,signature' entry",
            header=SIGNATURE_HEADER,
        )
    return signatures


def _signed_content(msg_id: str, timestamp_text: str, body: bytes) -> bytes:
    """What is signed: ``{webhook-id}.{webhook-timestamp}.`` and the body's bytes."""
    try:
        prefix = f"{msg_id}.{timestamp_text}.".encode()
    except UnicodeEncodeError as err:
        raise MalformedSignatureError(
            f"the {ID_HEADER} header is not encodable text", header=ID_HEADER
        ) from err
    return prefix + body


class _StandardWebhooksVerifier(Verifier, Generic[_Key]):
    """The header handling both versions share; subclasses supply the signature check."""

    header_names = _HEADERS
    #: The entry version this scheme signs and reads; other versions are ignored.
    _version: ClassVar[str]
    #: The length of one decoded signature of that version.
    _signature_size: ClassVar[int]
    _decode_key: ClassVar[KeyDecoder[Any]]

    def __init__(
        self,
        keys: str | Sequence[str],
        *,
        tolerance_seconds: float | None = DEFAULT_TOLERANCE_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        self._keys: tuple[_Key, ...] = decoded_keys(keys, type(self)._decode_key)
        super().__init__(
            key_count=len(self._keys), tolerance_seconds=tolerance_seconds, clock=clock
        )

    def verify(self, headers: Mapping[str, str], body: bytes) -> VerifiedDelivery:
        msg_id, timestamp_text, signature_header = lookup_headers(headers, _HEADERS)
        msg_id = required(msg_id, ID_HEADER)
        timestamp_text = required(timestamp_text, TIMESTAMP_HEADER)
        signature_header = required(signature_header, SIGNATURE_HEADER)
        seconds = _seconds(timestamp_text)
        signatures = _signatures(signature_header, self._version, self._signature_size)
        content = _signed_content(msg_id, timestamp_text, body)
        if not (signatures and self._matches(content, signatures)):
            raise InvalidSignatureError(
                f"no signature in the {SIGNATURE_HEADER} header matches a configured key",
                header=SIGNATURE_HEADER,
            )
        if self._tolerance is not None:
            check_tolerance(
                seconds,
                now=self._clock(),
                tolerance_seconds=self._tolerance,
                header=TIMESTAMP_HEADER,
            )
        return VerifiedDelivery(self.scheme, msg_id, datetime.fromtimestamp(seconds, UTC))

    @abstractmethod
    def _matches(self, content: bytes, signatures: Sequence[bytes]) -> bool:
        """Whether any configured key made any of ``signatures`` over ``content``."""


class StandardWebhooksVerifier(_StandardWebhooksVerifier[bytes]):
    """``standard-webhooks``: ``v1`` entries, HMAC-SHA256 with ``whsec_`` secrets."""

    scheme = "standard-webhooks"
    _version = "v1"
    _signature_size = 32
    _decode_key = staticmethod(decode_whsec)

    def _matches(self, content: bytes, signatures: Sequence[bytes]) -> bool:
        for key in self._keys:
            expected = hmac.digest(key, content, "sha256")
            for signature in signatures:
                if hmac.compare_digest(expected, signature):
                    return True
        return False


class StandardWebhooksEd25519Verifier(_StandardWebhooksVerifier[Ed25519PublicKey]):
    """``standard-webhooks-ed25519``: ``v1a`` entries, Ed25519 with ``whpk_`` public keys."""

    scheme = "standard-webhooks-ed25519"
    _version = "v1a"
    _signature_size = 64
    _decode_key = staticmethod(decode_ed25519_public)

    def _matches(self, content: bytes, signatures: Sequence[bytes]) -> bool:
        for key in self._keys:
            for signature in signatures:
                try:
                    key.verify(signature, content)
                except InvalidSignature:
                    continue
                return True
        return False


def _message_id(webhook_id: str | None) -> str:
    if webhook_id is None:
        return "msg_" + secrets.token_urlsafe(18)
    return validate_webhook_id(webhook_id)


class _StandardWebhooksSigner(Signer):
    """The headers both versions send; subclasses supply one signature entry."""

    def sign(
        self,
        body: bytes,
        *,
        webhook_id: str | None = None,
        timestamp: float | datetime | None = None,
    ) -> dict[str, str]:
        msg_id = _message_id(webhook_id)
        seconds = signing_time(timestamp)
        entry = self._entry(_signed_content(msg_id, str(seconds), body))
        return {ID_HEADER: msg_id, TIMESTAMP_HEADER: str(seconds), SIGNATURE_HEADER: entry}

    @abstractmethod
    def _entry(self, content: bytes) -> str:
        """One ``version,base64`` entry of ``webhook-signature`` for ``content``."""


class StandardWebhooksSigner(_StandardWebhooksSigner):
    """Signs ``v1`` entries with a ``whsec_`` secret, as the ``standardwebhooks`` package does."""

    scheme = "standard-webhooks"

    def __init__(self, key: str) -> None:
        self._key = decode_whsec(single_key(key), argument="key")

    def _entry(self, content: bytes) -> str:
        mac = hmac.digest(self._key, content, "sha256")
        return "v1," + base64.b64encode(mac).decode("ascii")


class StandardWebhooksEd25519Signer(_StandardWebhooksSigner):
    """Signs ``v1a`` entries with a ``whsk_`` Ed25519 signing key."""

    scheme = "standard-webhooks-ed25519"

    def __init__(self, key: str) -> None:
        self._key = decode_ed25519_private(single_key(key), argument="key")

    def _entry(self, content: bytes) -> str:
        return "v1a," + base64.b64encode(self._key.sign(content)).decode("ascii")
