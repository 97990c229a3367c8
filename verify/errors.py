"""Why a delivery failed verification: one base class, four kinds, each with a stable code.

The receiver turns these into its 401 answers and the CLI into one sentence, so the ``code`` of
each class is a contract. Messages and attributes name headers and times, never key material:
an error may be logged, shown to a client or stored with a rejected delivery.

The tree is shallow on purpose (like itsdangerous' ``BadData`` family): a caller that only
wants "did it verify" catches :class:`SignatureError`, one that wants to explain the failure
looks at ``code``.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

__all__ = [
    "InvalidSignatureError",
    "MalformedSignatureError",
    "MissingSignatureError",
    "SignatureError",
    "TimestampOutOfToleranceError",
]


class SignatureError(Exception):
    """A delivery could not be shown to come from the holder of a configured key.

    The base class is never raised itself; its code is the generic ``invalid_signature`` so
    that a handler which only knows the base still answers with a code from the contract.
    """

    #: Stable machine-readable reason, one of the codes in docs/errors.md.
    code: ClassVar[str] = "invalid_signature"

    def __init__(self, message: str, *, header: str | None = None) -> None:
        super().__init__(message)
        #: One human sentence; safe to show: it never holds key material.
        self.message = message
        #: The (lower-case) header the failure concerns, when there is one.
        self.header = header

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, header={self.header!r})"


class MissingSignatureError(SignatureError):
    """A header the scheme needs is absent or empty."""

    code: ClassVar[str] = "missing_signature"


class MalformedSignatureError(SignatureError):
    """A header is present but its structure cannot be read.

    Examples: a ``webhook-timestamp`` that is not a whole number of seconds, a
    ``webhook-signature`` holding no ``version,value`` entry at all. A well-formed header
    whose signature value is wrong (including one that is truncated or not base64) is an
    :class:`InvalidSignatureError` instead: the structure was read, the signature did not match.
    """

    code: ClassVar[str] = "malformed_signature"


class InvalidSignatureError(SignatureError):
    """No configured key matches any signature the delivery carries.

    Also raised when a sorted-fields body cannot be canonicalized (not JSON, too large, too
    deeply nested, duplicate keys): without the canonical string no signature can hold.
    """

    code: ClassVar[str] = "invalid_signature"


class TimestampOutOfToleranceError(SignatureError):
    """The signature holds, but the delivery's time is too far from now, in either direction.

    Checked after the signature, so this code always means "authentic but stale (or early)":
    a replayed delivery, or clocks that disagree.
    """

    code: ClassVar[str] = "timestamp_out_of_tolerance"

    def __init__(
        self,
        message: str,
        *,
        header: str,
        timestamp: datetime,
        now: datetime,
        tolerance_seconds: float,
    ) -> None:
        super().__init__(message, header=header)
        #: The time the delivery claims, timezone-aware (UTC).
        self.timestamp = timestamp
        #: The verifier's clock when it checked, timezone-aware (UTC).
        self.now = now
        #: The tolerance that was exceeded, in seconds.
        self.tolerance_seconds = tolerance_seconds
