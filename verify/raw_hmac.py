"""``hmac-sha256``: the plain scheme many senders use, HMAC-SHA256 of the raw body.

One header (``X-Signature`` unless configured) holding the MAC in hex (either case) or
base64. No id and no time, so no replay protection: prefer a Standard Webhooks scheme where
the sender allows it. The body is never parsed.

A missing header is ``missing_signature``; a value longer than any encoding of a MAC
(:data:`MAX_SIGNATURE_HEADER_LENGTH`) is ``malformed_signature``, refused unread; a value that
does not decode in the configured encoding, has the wrong length, or matches no key is
``invalid_signature`` (a single value has no other structure to be malformed).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal

from payhooks.verify.base import Signer, VerifiedDelivery, Verifier, decoded_keys, single_key
from payhooks.verify.errors import InvalidSignatureError, MalformedSignatureError
from payhooks.verify.headers import lookup_headers, required
from payhooks.verify.keys import decode_shared_secret
from payhooks.verify.timestamps import DEFAULT_TOLERANCE_SECONDS, Clock

__all__ = [
    "DEFAULT_HEADER_NAME",
    "MAX_SIGNATURE_HEADER_LENGTH",
    "HmacSha256Signer",
    "HmacSha256Verifier",
]

#: The header that carries the MAC unless ``header_name`` says otherwise.
DEFAULT_HEADER_NAME = "X-Signature"

#: The longest signature header read (a hex MAC is 64 characters, base64 44).
MAX_SIGNATURE_HEADER_LENGTH = 2048

Encoding = Literal["hex", "base64"]

# RFC 9110 token characters: what a header name may hold.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}")


def _header_name(value: object) -> str:
    if not isinstance(value, str) or not _HEADER_NAME.fullmatch(value):
        raise ValueError("header_name: must be an HTTP header name, such as 'X-Signature'")
    return value


def _encoding(value: object) -> Encoding:
    if value == "hex":
        return "hex"
    if value == "base64":
        return "base64"
    raise ValueError("encoding: must be 'hex' or 'base64'")


class HmacSha256Verifier(Verifier):
    """Checks the HMAC-SHA256 of the raw body against one or more shared secrets (UTF-8)."""

    scheme = "hmac-sha256"

    def __init__(
        self,
        keys: str | Sequence[str],
        *,
        tolerance_seconds: float | None = DEFAULT_TOLERANCE_SECONDS,
        clock: Clock | None = None,
        header_name: str = DEFAULT_HEADER_NAME,
        encoding: Encoding = "hex",
    ) -> None:
        self._keys = decoded_keys(keys, decode_shared_secret)
        self._header = _header_name(header_name).lower()
        self.header_names = (self._header,)
        self._decode = binascii.a2b_hex if _encoding(encoding) == "hex" else _strict_base64
        # The scheme carries no time; the tolerance is accepted for a uniform interface.
        super().__init__(
            key_count=len(self._keys), tolerance_seconds=tolerance_seconds, clock=clock
        )

    def verify(self, headers: Mapping[str, str], body: bytes) -> VerifiedDelivery:
        (value,) = lookup_headers(headers, self.header_names)
        value = required(value, self._header)
        if len(value) > MAX_SIGNATURE_HEADER_LENGTH:
            raise MalformedSignatureError(
                f"the {self._header} header is longer than {MAX_SIGNATURE_HEADER_LENGTH} "
                "characters",
                header=self._header,
            )
        try:
            signature = self._decode(value.strip())
        except (binascii.Error, ValueError):
            signature = b""
        if len(signature) == 32:
            for key in self._keys:
                if hmac.compare_digest(hmac.digest(key, body, "sha256"), signature):
                    return VerifiedDelivery(self.scheme, None, None)
        raise InvalidSignatureError(
            f"the {self._header} header does not match any configured key", header=self._header
        )


def _strict_base64(value: str) -> bytes:
    return binascii.a2b_base64(value, strict_mode=True)


class HmacSha256Signer(Signer):
    """Signs the raw body with a shared secret; lower-case hex or base64."""

    scheme = "hmac-sha256"

    def __init__(
        self, key: str, *, header_name: str = DEFAULT_HEADER_NAME, encoding: Encoding = "hex"
    ) -> None:
        self._key = decode_shared_secret(single_key(key), argument="key")
        self._header = _header_name(header_name)
        self._encoding = _encoding(encoding)

    def sign(
        self,
        body: bytes,
        *,
        webhook_id: str | None = None,
        timestamp: float | datetime | None = None,
    ) -> dict[str, str]:
        mac = hmac.digest(self._key, body, "sha256")
        value = mac.hex() if self._encoding == "hex" else base64.b64encode(mac).decode("ascii")
        return {self._header: value}
