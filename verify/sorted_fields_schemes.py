"""The schemes of the service's own SDK: ``sorted-fields-rsa`` and ``sorted-fields-hmac``.

Both sign the sorted-fields string (:mod:`payhooks.verify.sorted_fields`) rather than the raw bytes,
so they must parse the body; the parse is size-capped and depth-limited, and only builds the
string. The signature travels alone in ``signature``.

How a delivery is judged (same order and codes as the Standard Webhooks schemes):

1. ``signature`` absent or empty: ``missing_signature``. With ``check_timestamp`` on, the
   same for ``timestamp``.
2. With ``check_timestamp`` on, a ``timestamp`` that is not a real ``YYYYMMDDHHMMSS`` time,
   or a local time that does not exist in its zone (the hour skipped when daylight saving
   starts): ``malformed_signature``.
3. A ``signature`` header longer than any signature of the scheme could be:
   ``malformed_signature``, before the body is read.
4. A signature value that does not decode (not strict base64 for RSA, not hex for HMAC, wrong
   length), a body that cannot be canonicalized, or no key that matches: ``invalid_signature``.
   The signature header has no structure beyond its value, so a bad value is a wrong
   signature, never "malformed".
5. The signature holds, but the body is not the one notification its signed string reads back
   as (:mod:`payhooks.verify.notification_shape`): ``non_canonical_body``. Many bodies give one
   string, so a signature vouches for a body only when the string determines it.
6. With ``check_timestamp`` on, a time more than the tolerance from now:
   ``timestamp_out_of_tolerance``. The header is not covered by the signature, which is why
   the check is off by default; it is read in the zone the ``timezone`` header names, else in
   the configured ``time_zone`` (default UTC), by
   :func:`payhooks.verify.timezones.zone_from_header`, the same reading the receiver dates
   ``payment_time`` with. A local time in the hour that repeats when daylight saving ends
   means two instants; it passes when either is within the tolerance.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from payhooks.verify.base import (
    SignedStringDelivery,
    Signer,
    VerifiedDelivery,
    Verifier,
    decoded_keys,
    single_key,
)
from payhooks.verify.errors import (
    InvalidSignatureError,
    MalformedSignatureError,
    NonCanonicalBodyError,
)
from payhooks.verify.headers import lookup_headers, required
from payhooks.verify.keys import decode_rsa_private, decode_rsa_public, decode_shared_secret
from payhooks.verify.notification_shape import (
    check_providers,
    read_back,
    same_document,
    shape_problem,
)
from payhooks.verify.sorted_fields import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MEMBERS,
    SortedFieldsForm,
    parse_body,
    signed_string,
)
from payhooks.verify.timestamps import (
    DEFAULT_TOLERANCE_SECONDS,
    Clock,
    compact_time_readings,
    signing_time,
    tolerance_error,
)
from payhooks.verify.timezones import zone_from_header

__all__ = [
    "SortedFieldsHmacSigner",
    "SortedFieldsHmacVerifier",
    "SortedFieldsRsaSigner",
    "SortedFieldsRsaVerifier",
]

SIGNATURE_HEADER = "signature"
TIMESTAMP_HEADER = "timestamp"
TIMEZONE_HEADER = "timezone"

#: The longest ``signature`` header read: a base64 RSA-8192 signature is 1,368 characters and
#: a hex HMAC 64. Anything longer is refused before the body is parsed.
MAX_SIGNATURE_HEADER_LENGTH = 2048

HashAlgorithm = Literal["sha1", "sha256"]
_HASHES: dict[str, type[hashes.HashAlgorithm]] = {"sha1": hashes.SHA1, "sha256": hashes.SHA256}


def _hash(name: object) -> hashes.HashAlgorithm:
    if not isinstance(name, str) or name not in _HASHES:
        raise ValueError("hash_algorithm: must be 'sha1' or 'sha256'")
    return _HASHES[name]()


def _positive_int(value: object, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{argument}: must be a positive whole number")
    return value


class _Canonicalizer:
    """The bounded parse both schemes (and their signers) run over a body, and the check that
    a verified body is the one its string means."""

    def __init__(
        self,
        form: SortedFieldsForm,
        max_body_bytes: object,
        max_depth: object,
        max_members: object = DEFAULT_MAX_MEMBERS,
        providers: tuple[str, ...] = (),
    ):
        self._form: SortedFieldsForm = form
        self._max_body_bytes = _positive_int(max_body_bytes, "max_body_bytes")
        self._max_depth = _positive_int(max_depth, "max_depth")
        self._max_members = _positive_int(max_members, "max_members")
        self._providers = providers

    def _parse(self, body: bytes) -> tuple[dict[str, Any], str]:
        document = parse_body(
            body,
            max_body_bytes=self._max_body_bytes,
            max_depth=self._max_depth,
            max_members=self._max_members,
        )
        return document, signed_string(document, self._form)

    def __call__(self, body: bytes) -> bytes:
        """The string to sign, UTF-8 encoded; ``ValueError`` when there is none."""
        return self._parse(body)[1].encode("utf-8")

    def for_verification(self, body: bytes) -> tuple[dict[str, Any], bytes]:
        """The parsed document and the signed content, or ``invalid_signature``."""
        try:
            document, text = self._parse(body)
        except ValueError as err:
            raise InvalidSignatureError(
                f"the body cannot be canonicalized, so no signature can hold: {err}"
            ) from err
        return document, text.encode("utf-8")

    def vouched_for(self, document: dict[str, Any], content: bytes) -> str:
        """After the signature matched: the digest to deduplicate on, once the body is shown
        to be the one notification ``content`` reads back as.

        :raises NonCanonicalBodyError: it is not.
        """
        reading = read_back(content.decode("utf-8"), self._form, self._providers)
        if reading is None or not same_document(document, reading):
            raise NonCanonicalBodyError(
                "the signature holds for the signed string, but the body is not the one "
                f"notification that string means: {shape_problem(document, self._form)}"
            )
        return hashlib.sha256(content).hexdigest()


def _signature_text(text: str) -> str:
    """The ``signature`` header's value, stripped, or ``malformed_signature`` when it is
    longer than any signature could be (checked before the body is parsed)."""
    if len(text) > MAX_SIGNATURE_HEADER_LENGTH:
        raise MalformedSignatureError(
            f"the {SIGNATURE_HEADER} header is longer than {MAX_SIGNATURE_HEADER_LENGTH} "
            "characters, longer than any signature",
            header=SIGNATURE_HEADER,
        )
    return text.strip()


def _no_match() -> InvalidSignatureError:
    return InvalidSignatureError(
        f"the {SIGNATURE_HEADER} header does not match any configured key",
        header=SIGNATURE_HEADER,
    )


class SortedFieldsRsaVerifier(Verifier):
    """``sorted-fields-rsa``: base64 RSASSA-PKCS1-v1_5 over ``k=v&k=v`` with the service's
    public key (PEM or bare base64 DER)."""

    scheme = "sorted-fields-rsa"
    header_names = (SIGNATURE_HEADER, TIMESTAMP_HEADER, TIMEZONE_HEADER)

    def __init__(
        self,
        keys: str | Sequence[str],
        *,
        tolerance_seconds: float | None = DEFAULT_TOLERANCE_SECONDS,
        clock: Clock | None = None,
        hash_algorithm: HashAlgorithm = "sha1",
        check_timestamp: bool = False,
        time_zone: str = "UTC",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_members: int = DEFAULT_MAX_MEMBERS,
    ) -> None:
        self._keys = decoded_keys(keys, decode_rsa_public)
        self._hash = _hash(hash_algorithm)
        if not isinstance(check_timestamp, bool):
            raise ValueError("check_timestamp: must be True or False")
        self._check_timestamp = check_timestamp
        zone = zone_from_header(time_zone)
        if zone is None:
            raise ValueError("time_zone: must name a time zone, such as 'UTC' or 'Asia/Shanghai'")
        self._zone: tzinfo = zone
        self._canonical = _Canonicalizer("rsa", max_body_bytes, max_depth, max_members)
        super().__init__(
            key_count=len(self._keys), tolerance_seconds=tolerance_seconds, clock=clock
        )

    def verify(self, headers: Mapping[str, str], body: bytes) -> VerifiedDelivery:
        signature_text, timestamp_text, zone_text = lookup_headers(headers, self.header_names)
        signature_text = _signature_text(required(signature_text, SIGNATURE_HEADER))
        readings = self._timestamp(timestamp_text, zone_text)
        try:
            signature = binascii.a2b_base64(signature_text, strict_mode=True)
        except (binascii.Error, ValueError) as err:
            raise _no_match() from err
        if not any(len(signature) == (key.key_size + 7) // 8 for key in self._keys):
            raise _no_match()  # no key makes a signature of that length: no work to do
        document, content = self._canonical.for_verification(body)
        if not self._matches(signature, content):
            raise _no_match()
        digest = self._canonical.vouched_for(document, content)
        timestamp = readings[0] if readings else None
        if self._check_timestamp and readings and self._tolerance is not None:
            timestamp = self._within_tolerance(readings, self._tolerance)
        return SignedStringDelivery(self.scheme, None, timestamp, digest)

    def _within_tolerance(self, readings: tuple[datetime, ...], tolerance: float) -> datetime:
        """The reading within the tolerance of now (either, for a repeated local hour);
        ``timestamp_out_of_tolerance`` for the closest when none is."""
        now = self._clock()
        closest = min(readings, key=lambda reading: abs(now - reading.timestamp()))
        if abs(now - closest.timestamp()) <= tolerance:
            return closest
        raise tolerance_error(
            closest.timestamp(), now=now, tolerance_seconds=tolerance, header=TIMESTAMP_HEADER
        )

    def _timestamp(self, text: str | None, zone_text: str | None) -> tuple[datetime, ...]:
        """The instants the delivery's time can mean; absent, unreadable or nonexistent is an
        error only when it is checked (else no instant)."""
        zone = zone_from_header(zone_text) or self._zone
        readings = compact_time_readings(text, zone)
        if self._check_timestamp:
            required(text, TIMESTAMP_HEADER)
            if readings is None:
                raise MalformedSignatureError(
                    f"the {TIMESTAMP_HEADER} header is not a YYYYMMDDHHMMSS time",
                    header=TIMESTAMP_HEADER,
                )
            if not readings:
                raise MalformedSignatureError(
                    f"the {TIMESTAMP_HEADER} header names a local time that does not exist in "
                    f"its zone ({zone}): the hour skipped when daylight saving starts",
                    header=TIMESTAMP_HEADER,
                )
        return readings or ()

    def _matches(self, signature: bytes, content: bytes) -> bool:
        for key in self._keys:
            try:
                key.verify(signature, content, padding.PKCS1v15(), self._hash)
            except InvalidSignature:
                continue
            return True
        return False


class SortedFieldsHmacVerifier(Verifier):
    """``sorted-fields-hmac``: hex HMAC-SHA256 (either case) over ``kvkv`` with a UTF-8
    shared secret.

    :param providers: the provider names (``stripe``, ``adyen``) whose card and orchestrator
        notifications are read: the ``kvkv`` string cannot show where a value ends and a
        provider's member name begins, so without them only the wallet form is accepted.
    """

    scheme = "sorted-fields-hmac"
    header_names = (SIGNATURE_HEADER,)

    def __init__(
        self,
        keys: str | Sequence[str],
        *,
        tolerance_seconds: float | None = DEFAULT_TOLERANCE_SECONDS,
        clock: Clock | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_members: int = DEFAULT_MAX_MEMBERS,
        providers: Sequence[str] = (),
    ) -> None:
        self._keys = decoded_keys(keys, decode_shared_secret)
        self._canonical = _Canonicalizer(
            "hmac", max_body_bytes, max_depth, max_members, check_providers(providers)
        )
        # The scheme carries no time; the tolerance is accepted for a uniform interface.
        super().__init__(
            key_count=len(self._keys), tolerance_seconds=tolerance_seconds, clock=clock
        )

    def verify(self, headers: Mapping[str, str], body: bytes) -> VerifiedDelivery:
        (signature_text,) = lookup_headers(headers, self.header_names)
        try:
            signature = binascii.a2b_hex(
                _signature_text(required(signature_text, SIGNATURE_HEADER))
            )
        except (binascii.Error, ValueError) as err:
            raise _no_match() from err
        if len(signature) != 32:
            raise _no_match()
        document, content = self._canonical.for_verification(body)
        for key in self._keys:
            if hmac.compare_digest(hmac.digest(key, content, "sha256"), signature):
                digest = self._canonical.vouched_for(document, content)
                return SignedStringDelivery(self.scheme, None, None, digest)
        raise _no_match()


class SortedFieldsRsaSigner(Signer):
    """Signs as the service's SDK does, with its RSA private key (PEM or base64 DER PKCS#8).

    Sends ``signature``, and ``timestamp``/``timezone`` (UTC) so a receiver that checks the
    time can.
    """

    scheme = "sorted-fields-rsa"

    def __init__(
        self,
        key: str,
        *,
        hash_algorithm: HashAlgorithm = "sha1",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_members: int = DEFAULT_MAX_MEMBERS,
    ) -> None:
        self._key = decode_rsa_private(single_key(key), argument="key")
        self._hash = _hash(hash_algorithm)
        self._canonical = _Canonicalizer("rsa", max_body_bytes, max_depth, max_members)

    def sign(
        self,
        body: bytes,
        *,
        webhook_id: str | None = None,
        timestamp: float | datetime | None = None,
    ) -> dict[str, str]:
        signature = self._key.sign(self._canonical(body), padding.PKCS1v15(), self._hash)
        when = datetime.fromtimestamp(signing_time(timestamp), UTC)
        return {
            SIGNATURE_HEADER: base64.b64encode(signature).decode("ascii"),
            TIMESTAMP_HEADER: when.strftime("%Y%m%d%H%M%S"),
            TIMEZONE_HEADER: "UTC",
        }


class SortedFieldsHmacSigner(Signer):
    """Signs ``kvkv`` with a shared secret; lower-case hex."""

    scheme = "sorted-fields-hmac"

    def __init__(
        self,
        key: str,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_members: int = DEFAULT_MAX_MEMBERS,
    ) -> None:
        self._key = decode_shared_secret(single_key(key), argument="key")
        self._canonical = _Canonicalizer("hmac", max_body_bytes, max_depth, max_members)

    def sign(
        self,
        body: bytes,
        *,
        webhook_id: str | None = None,
        timestamp: float | datetime | None = None,
    ) -> dict[str, str]:
        return {SIGNATURE_HEADER: hmac.digest(self._key, self._canonical(body), "sha256").hex()}
