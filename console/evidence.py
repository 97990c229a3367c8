"""A delivery's signature evidence: recomputed, when its page is shown, from the stored bytes
and the app's keys as they are now.

What it answers: under which scheme the stored headers were read, which configured key
verifies the raw body now (named by :func:`payhooks.verify.key_fingerprint`, never shown), or
why none does, and how far the signed time was from the moment the delivery arrived. The
check runs the app's own verifier (raw bytes, constant-time comparisons) with the time check
off: the delivery is old by the time anyone looks. The keys are the app's config as it is at
each page, or the settings the console was given (``Console(settings=...)``: ``payhooks
console`` gives its environment's, through :func:`~payhooks.receiver.settings.load_settings` as
every command reads them). A console with no keys says so instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from payhooks.receiver.settings import ReceiverSettings, load_settings
from payhooks.verify import (
    InvalidSignatureError,
    MalformedSignatureError,
    MissingSignatureError,
    SignatureError,
    VerifiedDelivery,
    key_fingerprint,
)

__all__ = ["SignatureEvidence", "app_settings", "evidence_settings", "signature_evidence"]

#: Why no key verifies, by the kind of failure, as one sentence each.
_WHY: Final[Mapping[type[SignatureError], tuple[str, str]]] = {
    MissingSignatureError: (
        "no_signature_header",
        "The stored headers carry no signature for the app's scheme.",
    ),
    MalformedSignatureError: (
        "unknown_scheme",
        "The stored signature cannot be read under the app's scheme: it was made under "
        "another scheme, or is malformed.",
    ),
    InvalidSignatureError: (
        "no_key_matches",
        "None of the app's keys verifies the stored body now: the key that signed it may "
        "have been rotated out.",
    ),
}


@dataclass(frozen=True, slots=True)
class SignatureEvidence:
    """What the stored bytes prove now. ``checked`` is False when this console has no keys."""

    checked: bool
    #: The app's scheme, the one the stored headers were read under (None: not checked).
    scheme: str | None = None
    #: The fingerprint of the key that verifies the body now, or None.
    key: str | None = None
    #: The fingerprints of every key the app is configured with, in its order.
    keys: tuple[str, ...] = ()
    #: Why no key verifies: a stable code and one sentence; None when one does.
    problem: str | None = None
    message: str | None = None
    #: The time the signature carries, when the scheme has one and a key verified it.
    signed_at: datetime | None = None
    received_at: datetime | None = None
    #: The app's tolerance, to compare the signed time's distance with.
    tolerance_seconds: int | None = None

    @property
    def verified(self) -> bool:
        return self.key is not None

    @property
    def delay(self) -> timedelta | None:
        """How long after its signed time the delivery arrived (negative: signed "later")."""
        if self.signed_at is None or self.received_at is None:
            return None
        return self.received_at - self.signed_at

    @property
    def within_tolerance(self) -> bool | None:
        delay = self.delay
        if delay is None or self.tolerance_seconds is None:
            return None
        return abs(delay.total_seconds()) <= self.tolerance_seconds


def app_settings(config: Mapping[str, Any]) -> ReceiverSettings | None:
    """The app's checked settings, keys included; None when it has no keys to check with (a
    standalone console) or its configuration cannot be read now."""
    try:
        settings = load_settings(config, require_keys=False)
    except ValueError:
        return None
    return settings if settings.keys else None


def evidence_settings(
    own: ReceiverSettings | None, config: Mapping[str, Any]
) -> ReceiverSettings | None:
    """What a delivery's evidence is checked with: the console's own settings when they hold
    keys (a console mounted on its own has no receiver's config to read), else the app's
    ``config`` as it is now (:func:`app_settings`)."""
    if own is not None and own.keys:
        return own
    return app_settings(config)


def signature_evidence(
    settings: ReceiverSettings | None,
    headers: Mapping[str, str],
    body: bytes,
    received_at: datetime,
) -> SignatureEvidence:
    """Check ``body`` against ``headers`` with each of the app's keys, one at a time, so the
    one that verifies can be named."""
    if settings is None or not settings.keys:
        return SignatureEvidence(checked=False, received_at=received_at)
    fingerprints = _fingerprints(settings.scheme, settings.keys)
    first_failure: SignatureError | None = None
    for key, fingerprint in zip(settings.keys, fingerprints, strict=True):
        try:
            verified: VerifiedDelivery = settings.verifier_with(
                (key,), tolerance_seconds=None
            ).verify(headers, body)
        except SignatureError as err:
            first_failure = first_failure or err
            if not isinstance(err, InvalidSignatureError):
                break  # the headers themselves fail: another key cannot change that
            continue
        return SignatureEvidence(
            checked=True,
            scheme=settings.scheme,
            key=fingerprint,
            keys=fingerprints,
            signed_at=verified.timestamp,
            received_at=received_at,
            tolerance_seconds=settings.tolerance_seconds,
        )
    problem, message = _why(first_failure)
    return SignatureEvidence(
        checked=True,
        scheme=settings.scheme,
        keys=fingerprints,
        problem=problem,
        message=message,
        received_at=received_at,
        tolerance_seconds=settings.tolerance_seconds,
    )


def _fingerprints(scheme: str, keys: Sequence[str]) -> tuple[str, ...]:
    return tuple(
        key_fingerprint(scheme, key, argument=f"keys[{index}]") for index, key in enumerate(keys)
    )


def _why(failure: SignatureError | None) -> tuple[str, str]:
    for kind, reason in _WHY.items():
        if isinstance(failure, kind):
            return reason
    code = "invalid_signature" if failure is None else failure.code
    return code, f"The stored delivery does not verify now ({code})."
