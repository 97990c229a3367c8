"""What every scheme offers: a verifier, a signer, their results and their shared plumbing.

Each scheme module subclasses :class:`Verifier` and :class:`Signer`. Keys are decoded once, at
construction, so that a bad key fails early (``ValueError`` naming the argument). Nothing here
keeps or prints a key's text: reprs show the scheme and how many keys there are, nothing more.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, NamedTuple, Protocol, TypeVar

from payhooks.verify.errors import SignatureError
from payhooks.verify.timestamps import Clock, resolve_clock, resolve_tolerance

__all__ = [
    "KeyPair",
    "SignedStringDelivery",
    "Signer",
    "VerifiedDelivery",
    "Verifier",
    "decoded_keys",
    "key_list",
    "single_key",
    "validate_webhook_id",
]


class VerifiedDelivery(NamedTuple):
    """What a successful verification proves about a delivery: an immutable three-member
    tuple that unpacks and compares as one."""

    #: The scheme that verified it.
    scheme: str
    #: The sender's message id (``webhook-id``) for the Standard Webhooks schemes, else None.
    #: The receiver deduplicates on it.
    webhook_id: str | None
    #: The time the delivery claims (aware, UTC), when the scheme carries one.
    timestamp: datetime | None

    @property
    def signed_digest(self) -> str | None:
        """The SHA-256 (hex) of what was signed, for the schemes that sign something other
        than the bytes (the sorted-fields string); else None. Bodies laid out differently
        give one string, so the receiver deduplicates on this, not on the bytes."""
        return None


class SignedStringDelivery(VerifiedDelivery):
    """What a sorted-fields verification proves: a :class:`VerifiedDelivery` (the same
    three-member tuple, equal to one) that also knows the digest of the signed string.

    A subclass rather than a fourth member, so that code which unpacks or compares the
    three members keeps working.
    """

    _digest: str

    def __new__(
        cls, scheme: str, webhook_id: str | None, timestamp: datetime | None, signed_digest: str
    ) -> SignedStringDelivery:
        delivery = super().__new__(cls, scheme, webhook_id, timestamp)
        delivery._digest = signed_digest
        return delivery

    @property
    def signed_digest(self) -> str | None:
        """The SHA-256 (hex) of the signed string."""
        return getattr(self, "_digest", None)


@dataclass(frozen=True, slots=True, repr=False)
class KeyPair:
    """Keys made by :func:`payhooks.verify.generate_keypair`: give ``signing_key`` to the sender and
    configure ``verifying_key`` in the receiver. For the HMAC schemes the two are the same
    shared secret. Both are hidden from ``repr`` so a logged pair leaks nothing.
    """

    signing_key: str
    verifying_key: str

    def __repr__(self) -> str:
        return "KeyPair(signing_key=<hidden>, verifying_key=<hidden>)"


def key_list(keys: str | Sequence[str], *, argument: str = "keys") -> list[str]:
    """Normalize ``keys`` (one string or a sequence of them) to a non-empty list.

    A bare string is one key, not a sequence of characters. Blank entries are refused rather
    than skipped: an empty key in the configuration is a mistake worth hearing about.
    """
    items: list[object] = [keys] if isinstance(keys, str) else list(keys)
    if not items:
        raise ValueError(f"{argument}: at least one key is required")
    result: list[str] = []
    for index, item in enumerate(items):
        name = argument if isinstance(keys, str) else f"{argument}[{index}]"
        if not isinstance(item, str):
            raise ValueError(f"{name}: must be a string")
        if not item.strip():
            raise ValueError(f"{name}: must not be empty")
        result.append(item.strip())
    return result


_Key_co = TypeVar("_Key_co", covariant=True)


class KeyDecoder(Protocol[_Key_co]):
    """One of :mod:`payhooks.verify.keys`' decoders: a key's text in, the key out, errors naming
    ``argument``."""

    def __call__(self, text: str, *, argument: str) -> _Key_co: ...


def decoded_keys(keys: str | Sequence[str], decode: KeyDecoder[_Key_co]) -> tuple[_Key_co, ...]:
    """``keys`` normalized by :func:`key_list` and each decoded, an error naming the key's
    place (``keys[1]``): verifiers decode their keys once, when built, so that checking a
    delivery only uses them."""
    return tuple(
        decode(text, argument=f"keys[{index}]") for index, text in enumerate(key_list(keys))
    )


def single_key(key: str, *, argument: str = "key") -> str:
    """Validate the one key a signer takes."""
    if not isinstance(key, str):
        raise ValueError(f"{argument}: must be one key, as a string")
    (text,) = key_list(key, argument=argument)
    return text


_WEBHOOK_ID = re.compile(r"[\x21-\x7e]{1,255}")


def validate_webhook_id(webhook_id: str) -> str:
    """Refuse a message id that could not travel in an HTTP header as one token."""
    if not isinstance(webhook_id, str) or not _WEBHOOK_ID.fullmatch(webhook_id):
        raise ValueError("webhook_id: must be 1 to 255 printable ASCII characters, no spaces")
    return webhook_id


class Verifier(ABC):
    """Checks deliveries of one scheme against one or more keys (rotation).

    Construct through :func:`payhooks.verify.get_verifier`. ``verify`` raises a
    :class:`~payhooks.verify.SignatureError`; ``is_valid`` answers a bool.
    """

    #: The scheme's registered name.
    scheme: ClassVar[str]
    #: The (lower-case) headers the scheme reads; the receiver stores them with a delivery.
    header_names: tuple[str, ...]

    def __init__(self, *, key_count: int, tolerance_seconds: float | None, clock: Clock | None):
        self._key_count = key_count
        self._tolerance = resolve_tolerance(tolerance_seconds)
        self._clock = resolve_clock(clock)

    @property
    def tolerance_seconds(self) -> float | None:
        """How far from now a delivery's time may be; None when the check is off."""
        return self._tolerance

    @abstractmethod
    def verify(self, headers: Mapping[str, str], body: bytes) -> VerifiedDelivery:
        """Verify ``body`` (the raw bytes as received) against ``headers``.

        :raises SignatureError: one of its subclasses, by the reason.
        """

    def is_valid(self, headers: Mapping[str, str], body: bytes) -> bool:
        """Whether :meth:`verify` would succeed."""
        try:
            self.verify(headers, body)
        except SignatureError:
            return False
        return True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} scheme={self.scheme!r} keys={self._key_count}>"


class Signer(ABC):
    """Signs bodies the way a sender of one scheme does (replay tool, tests, demos).

    Construct through :func:`payhooks.verify.get_signer`.
    """

    #: The scheme's registered name.
    scheme: ClassVar[str]

    @abstractmethod
    def sign(
        self,
        body: bytes,
        *,
        webhook_id: str | None = None,
        timestamp: float | datetime | None = None,
    ) -> dict[str, str]:
        """Return the headers to send with ``body``.

        :param webhook_id: the message id, for schemes that carry one (default: a fresh
            ``msg_...``); ignored by the others.
        :param timestamp: unix seconds or an aware datetime (default: now), for schemes that
            carry a time; ignored by the others.
        """

    def __repr__(self) -> str:
        return f"<{type(self).__name__} scheme={self.scheme!r}>"
