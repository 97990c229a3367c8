"""The scheme registry: names to verifiers, signers and key makers.

The receiver and the CLI only ever name a scheme (``PAYHOOKS_SIGNATURE_SCHEME``,
``--scheme``); everything they need comes through these three functions. Options are checked
against each scheme's list here, so a typo (``hash_algoritm``) fails at construction with a
``ValueError`` naming it instead of being silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from payhooks.verify.base import KeyPair, Signer, Verifier
from payhooks.verify.keys import (
    encode_ed25519_private,
    encode_ed25519_public,
    encode_rsa_private,
    encode_rsa_public,
    new_ed25519_private,
    new_rsa_private,
    new_shared_secret,
    new_whsec,
)
from payhooks.verify.raw_hmac import HmacSha256Signer, HmacSha256Verifier
from payhooks.verify.sorted_fields_schemes import (
    SortedFieldsHmacSigner,
    SortedFieldsHmacVerifier,
    SortedFieldsRsaSigner,
    SortedFieldsRsaVerifier,
)
from payhooks.verify.standard_webhooks import (
    StandardWebhooksEd25519Signer,
    StandardWebhooksEd25519Verifier,
    StandardWebhooksSigner,
    StandardWebhooksVerifier,
)
from payhooks.verify.timestamps import DEFAULT_TOLERANCE_SECONDS, Clock

__all__ = [
    "DEFAULT_SCHEME",
    "SCHEMES",
    "KeyKind",
    "SchemeInfo",
    "generate_keypair",
    "get_signer",
    "get_verifier",
]

KeyKind = Literal["secret", "public_key"]


@dataclass(frozen=True, slots=True)
class SchemeInfo:
    """What a configuration needs to know about a scheme."""

    name: str
    #: ``"secret"``: shared HMAC secrets (``PAYHOOKS_SECRETS``); ``"public_key"``: the
    #: sender's public keys (``PAYHOOKS_PUBLIC_KEYS``).
    key_kind: KeyKind
    #: True for the sorted-fields schemes, which must parse the JSON body to build the string
    #: they verify, and so take ``max_body_bytes`` and ``max_depth``: a receiver that caps
    #: bodies at another size passes its cap on.
    parses_body: bool = False


@dataclass(frozen=True, slots=True)
class _Scheme:
    info: SchemeInfo
    verifier: Callable[..., Verifier]
    signer: Callable[..., Signer]
    verifier_options: frozenset[str]
    signer_options: frozenset[str]
    keypair: Callable[[], KeyPair]


def _whsec_pair() -> KeyPair:
    secret = new_whsec()
    return KeyPair(secret, secret)


def _shared_pair() -> KeyPair:
    secret = new_shared_secret()
    return KeyPair(secret, secret)


def _ed25519_pair() -> KeyPair:
    key = new_ed25519_private()
    return KeyPair(encode_ed25519_private(key), encode_ed25519_public(key.public_key()))


def _rsa_pair() -> KeyPair:
    key = new_rsa_private()
    return KeyPair(encode_rsa_private(key), encode_rsa_public(key.public_key()))


_BODY_LIMITS = frozenset({"max_body_bytes", "max_depth", "max_members"})

_REGISTRY: dict[str, _Scheme] = {
    scheme.info.name: scheme
    for scheme in (
        _Scheme(
            SchemeInfo("standard-webhooks", "secret"),
            StandardWebhooksVerifier,
            StandardWebhooksSigner,
            frozenset(),
            frozenset(),
            _whsec_pair,
        ),
        _Scheme(
            SchemeInfo("standard-webhooks-ed25519", "public_key"),
            StandardWebhooksEd25519Verifier,
            StandardWebhooksEd25519Signer,
            frozenset(),
            frozenset(),
            _ed25519_pair,
        ),
        _Scheme(
            SchemeInfo("sorted-fields-rsa", "public_key", parses_body=True),
            SortedFieldsRsaVerifier,
            SortedFieldsRsaSigner,
            _BODY_LIMITS | {"hash_algorithm", "check_timestamp", "time_zone"},
            _BODY_LIMITS | {"hash_algorithm"},
            _rsa_pair,
        ),
        _Scheme(
            SchemeInfo("sorted-fields-hmac", "secret", parses_body=True),
            SortedFieldsHmacVerifier,
            SortedFieldsHmacSigner,
            _BODY_LIMITS | {"providers"},
            _BODY_LIMITS,
            _shared_pair,
        ),
        _Scheme(
            SchemeInfo("hmac-sha256", "secret"),
            HmacSha256Verifier,
            HmacSha256Signer,
            frozenset({"header_name", "encoding"}),
            frozenset({"header_name", "encoding"}),
            _shared_pair,
        ),
    )
}

#: Every scheme by name. Read-only.
SCHEMES: Mapping[str, SchemeInfo] = MappingProxyType(
    {name: scheme.info for name, scheme in _REGISTRY.items()}
)

#: The scheme the replay tool and the demo use, and the receiver's default.
DEFAULT_SCHEME = "standard-webhooks"


def _lookup(scheme: str) -> _Scheme:
    try:
        return _REGISTRY[scheme]
    except (KeyError, TypeError):
        raise ValueError(
            f"scheme: unknown signature scheme {scheme!r}; known: {', '.join(_REGISTRY)}"
        ) from None


def _check_options(options: Mapping[str, object], allowed: frozenset[str], scheme: str) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        accepted = ", ".join(sorted(allowed)) or "none"
        raise ValueError(
            f"{unknown[0]}: not an option of the {scheme} scheme (its options: {accepted})"
        )


def get_verifier(
    scheme: str,
    keys: str | Sequence[str],
    *,
    tolerance_seconds: float | None = DEFAULT_TOLERANCE_SECONDS,
    clock: Clock | None = None,
    **options: Any,
) -> Verifier:
    """A verifier for ``scheme`` that accepts a delivery signed by any of ``keys``.

    :param keys: one key, or several while rotating (any key may match any signature entry).
    :param tolerance_seconds: how far a delivery's time may be from now, either way; None
        skips the check (offline checks of old captures only).
    :param clock: returns unix seconds; the wall clock by default.
    :param options: scheme options: ``sorted-fields-rsa``: ``hash_algorithm`` (``"sha1"``,
        ``"sha256"``), ``check_timestamp`` (False), ``time_zone`` ("UTC"); ``hmac-sha256``:
        ``header_name`` ("X-Signature"), ``encoding`` (``"hex"``, ``"base64"``); the
        sorted-fields schemes: ``max_body_bytes`` (65536), ``max_depth`` (32),
        ``max_members`` (256); ``sorted-fields-hmac``: ``providers`` (none: the provider
        names whose card and orchestrator notifications are read, see
        :mod:`payhooks.verify.notification_shape`).
    :raises ValueError: unknown scheme or option, no key, a malformed key or option value;
        the message names the argument and never holds key material.
    """
    entry = _lookup(scheme)
    _check_options(options, entry.verifier_options, scheme)
    return entry.verifier(keys, tolerance_seconds=tolerance_seconds, clock=clock, **options)


def get_signer(scheme: str, key: str, **options: Any) -> Signer:
    """A signer for ``scheme`` with its signing ``key`` (what a sender holds).

    Options: ``sorted-fields-rsa``: ``hash_algorithm``; ``hmac-sha256``: ``header_name``,
    ``encoding``; the sorted-fields schemes: ``max_body_bytes``, ``max_depth``,
    ``max_members``.

    :raises ValueError: as :func:`get_verifier`.
    """
    entry = _lookup(scheme)
    _check_options(options, entry.signer_options, scheme)
    return entry.signer(key, **options)


def generate_keypair(scheme: str) -> KeyPair:
    """Fresh keys for ``scheme``, each one whitespace-free token (safe in environment
    variables): ``whsec_`` secrets, ``whsk_``/``whpk_`` Ed25519 keys, RSA 2048 as base64 DER
    (PKCS#8 / SubjectPublicKeyInfo), or random URL-safe shared secrets.
    """
    return _lookup(scheme).keypair()
