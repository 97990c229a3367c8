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
   :data:`MAX_SIGNATURE_ENTRIES` distinct entries of this scheme's version:
   ``malformed_signature``. Each entry costs a verification per key (an Ed25519 one is about
   as dear as a whole delivery), so what an unauthenticated request can make us do is
   bounded before any of it is done; repeated entries are tried once.
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
from typing import ClassVar

from cryptography.exceptions import InvalidSignature

from payhooks.verify.base import (
    Signer,
    VerifiedDelivery,
    Verifier,
    decoded_keys,
    single_key,
    validate_webhook_id,
)
from payhooks.verify.errors import (
    InvalidSignatureError,
    MalformedSignatureError,
    MissingSignatureError,
)
from payhooks.verify.headers import lookup_headers
from payhooks.verify.keyed_hash import HmacSha256
from payhooks.verify.keys import decode_ed25519_private, decode_ed25519_public, decode_whsec
from payhooks.verify.timestamps import (
    DEFAULT_TOLERANCE_SECONDS,
    Clock,
    signing_time,
    tolerance_error,
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
#: The longest ``webhook-signature`` header read: room for a score of entries, far more than
#: a sender rotating its keys sends.
MAX_SIGNATURE_HEADER_LENGTH = 2048
#: The most distinct entries of the scheme's version that are tried. A sender signs with one
#: key, two while it rotates; a header with more is refused unread, not tried entry by entry.
MAX_SIGNATURE_ENTRIES = 4

# Module globals: one lookup fewer per call than ``binascii.a2b_base64`` on the hot path.
_a2b_base64 = binascii.a2b_base64
_compare_digest = hmac.compare_digest
_fromtimestamp = datetime.fromtimestamp
#: Builds the result without the named tuple's Python-level ``__new__`` (what its ``_make``
#: does): a tenth of the cost of a verification beside a bare ``hmac.digest``.
_delivery = tuple.__new__


def _headers_ignoring_case(headers: Mapping[str, str]) -> tuple[str, str, str]:
    """The three headers looked up case-insensitively; ``missing_signature`` for an absent one.

    The slow path: only taken when a direct lookup of the lower-case names missed, which for a
    plain dict may only be a matter of case ("Webhook-Id").
    """
    msg_id, timestamp_text, signature_header = lookup_headers(headers, _HEADERS)
    if msg_id is None:
        raise _missing(ID_HEADER)
    if timestamp_text is None:
        raise _missing(TIMESTAMP_HEADER)
    if signature_header is None:
        raise _missing(SIGNATURE_HEADER)
    return msg_id, timestamp_text, signature_header


def _missing(name: str) -> MissingSignatureError:
    return MissingSignatureError(f"the {name} header is missing", header=name)


def _signatures(signature_header: str, version: str, size: int) -> list[bytes]:
    """The decoded ``version`` entries of the header.

    Entries of other versions are skipped; an entry of this version that is not strict base64
    of ``size`` bytes is dropped, since it cannot match, and a repeated one is kept once.
    Malformed when no entry has the ``version,value`` form at all, when the header is over
    :data:`MAX_SIGNATURE_HEADER_LENGTH` characters, or when it holds more than
    :data:`MAX_SIGNATURE_ENTRIES` distinct entries of ``version``.
    """
    if len(signature_header) > MAX_SIGNATURE_HEADER_LENGTH:
        raise MalformedSignatureError(
            f"the {SIGNATURE_HEADER} header is longer than {MAX_SIGNATURE_HEADER_LENGTH} "
            "characters",
            header=SIGNATURE_HEADER,
        )
    if " " not in signature_header:
        # The usual case, one entry: no splitting, no list of entries.
        entry_version, comma, value = signature_header.partition(",")
        if comma and entry_version and value:
            if entry_version != version:
                return []
            try:
                raw = binascii.a2b_base64(value, strict_mode=True)
            except (binascii.Error, ValueError):
                return []
            return [raw] if len(raw) == size else []
    signatures: list[bytes] = []
    parsed = False
    for entry in signature_header.split():
        entry_version, comma, value = entry.partition(",")
        if not (comma and entry_version and value):
            continue
        parsed = True
        if entry_version != version:
            continue
        try:
            raw = binascii.a2b_base64(value, strict_mode=True)
        except (binascii.Error, ValueError):
            continue
        if len(raw) == size and raw not in signatures:
            if len(signatures) == MAX_SIGNATURE_ENTRIES:
                raise MalformedSignatureError(
                    f"the {SIGNATURE_HEADER} header holds more than {MAX_SIGNATURE_ENTRIES} "
                    f"{version} signatures",
                    header=SIGNATURE_HEADER,
                )
            signatures.append(raw)
    if not parsed:
        raise MalformedSignatureError(
            f"the {SIGNATURE_HEADER} header holds no 'version,signature' entry",
            header=SIGNATURE_HEADER,
        )
    return signatures


def _signed_content(msg_id: str, timestamp_text: str, body: bytes) -> bytes:
    """What a sender signs (the verifier builds the same bytes in line)."""
    try:
        prefix = f"{msg_id}.{timestamp_text}.".encode()
    except UnicodeEncodeError as err:
        raise _unencodable_id() from err
    return prefix + body


def _unencodable_id() -> MalformedSignatureError:
    return MalformedSignatureError(
        f"the {ID_HEADER} header is not encodable text", header=ID_HEADER
    )


def _no_match() -> InvalidSignatureError:
    return InvalidSignatureError(
        f"no signature in the {SIGNATURE_HEADER} header matches a configured key",
        header=SIGNATURE_HEADER,
    )


class _StandardWebhooksVerifier(Verifier):
    """The header handling both versions share; subclasses supply the signature check."""

    header_names = _HEADERS
    #: The entry version this scheme signs and reads; other versions are ignored.
    _version: ClassVar[str]
    #: The length of one decoded signature of that version.
    _signature_size: ClassVar[int]

    def verify(self, headers: Mapping[str, str], body: bytes) -> VerifiedDelivery:
        # The hot path of every delivery, kept flat: each helper call here costs a few percent
        # of a verification (bench.verify measures it against a bare hmac.digest), so the
        # usual case (the three headers under their lower-case names, one entry of this
        # scheme's version) is handled in line and everything else in the helpers.
        get = headers.get
        msg_id = get(ID_HEADER)
        timestamp_text = get(TIMESTAMP_HEADER)
        signature_header = get(SIGNATURE_HEADER)
        if not (msg_id and timestamp_text and signature_header):
            msg_id, timestamp_text, signature_header = _headers_ignoring_case(headers)
        if not (
            timestamp_text.isdigit()
            and timestamp_text.isascii()
            and len(timestamp_text) <= _MAX_TIMESTAMP_DIGITS
        ):
            raise MalformedSignatureError(
                f"the {TIMESTAMP_HEADER} header is not a whole number of unix seconds",
                header=TIMESTAMP_HEADER,
            )
        seconds = int(timestamp_text)
        entry_version, _, value = signature_header.partition(",")
        signatures: Sequence[bytes]
        if (
            entry_version == self._version
            and value
            and " " not in value
            and len(signature_header) <= MAX_SIGNATURE_HEADER_LENGTH
        ):
            # One entry, of this version: exactly what _signatures makes of it, without the call.
            try:
                signature = _a2b_base64(value, strict_mode=True)
            except (binascii.Error, ValueError):
                signature = b""
            signatures = (signature,) if len(signature) == self._signature_size else ()
        else:
            signatures = _signatures(signature_header, self._version, self._signature_size)
        try:
            content = f"{msg_id}.{timestamp_text}.".encode() + body
        except UnicodeEncodeError as err:
            raise _unencodable_id() from err
        if not (signatures and self._matches(content, signatures)):
            raise _no_match()
        tolerance = self._tolerance
        if tolerance is not None:
            now = self._clock()
            if not -tolerance <= now - seconds <= tolerance:
                raise tolerance_error(
                    seconds, now=now, tolerance_seconds=tolerance, header=TIMESTAMP_HEADER
                )
        return _delivery(VerifiedDelivery, (self.scheme, msg_id, _fromtimestamp(seconds, UTC)))

    @abstractmethod
    def _matches(self, content: bytes, signatures: Sequence[bytes]) -> bool:
        """Whether any configured key made any of ``signatures`` over ``content``."""


class StandardWebhooksVerifier(_StandardWebhooksVerifier):
    """``standard-webhooks``: ``v1`` entries, HMAC-SHA256 with ``whsec_`` secrets."""

    scheme = "standard-webhooks"
    _version = "v1"
    _signature_size = 32

    def __init__(
        self,
        keys: str | Sequence[str],
        *,
        tolerance_seconds: float | None = DEFAULT_TOLERANCE_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        # Decoded, and the HMAC key schedule computed, once here: the hot path only hashes.
        self._keys = tuple(HmacSha256(key) for key in decoded_keys(keys, decode_whsec))
        super().__init__(
            key_count=len(self._keys), tolerance_seconds=tolerance_seconds, clock=clock
        )

    def _matches(self, content: bytes, signatures: Sequence[bytes]) -> bool:
        for key in self._keys:
            mac = key.digest(content)
            for signature in signatures:
                if _compare_digest(mac, signature):
                    return True
        return False


class StandardWebhooksEd25519Verifier(_StandardWebhooksVerifier):
    """``standard-webhooks-ed25519``: ``v1a`` entries, Ed25519 with ``whpk_`` public keys."""

    scheme = "standard-webhooks-ed25519"
    _version = "v1a"
    _signature_size = 64

    def __init__(
        self,
        keys: str | Sequence[str],
        *,
        tolerance_seconds: float | None = DEFAULT_TOLERANCE_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        self._keys = decoded_keys(keys, decode_ed25519_public)
        super().__init__(
            key_count=len(self._keys), tolerance_seconds=tolerance_seconds, clock=clock
        )

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
