"""The sandbox's access tokens: JWTs signed with HS256, with a ``scope`` claim.

The interface says the Bearer token is a JWT and that subscription creation needs the scope
``subscriptions.write``; how tokens are issued, their lifetime and claims are not shown. The
sandbox assumes the OAuth 2 convention: ``scope`` is a space-separated string, ``exp`` (unix
seconds) is checked when present, ``sub`` names the merchant account the token is for (any
configured account when absent). HS256 needs only the standard library, so no JWT package.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from payhooks.service.errors import ServiceError

__all__ = ["MAX_TOKEN_LENGTH", "AccessToken", "TokenError", "issue_token", "read_token"]

#: The longest access token read: the sandbox's own are a few hundred characters.
MAX_TOKEN_LENGTH = 8192


class TokenError(ServiceError):
    """An access token the sandbox does not accept."""

    code = "invalid_token"


@dataclass(frozen=True, slots=True)
class AccessToken:
    """What a verified token grants."""

    scopes: frozenset[str]
    #: The merchant account it is for; None: any of the sandbox's.
    subject: str | None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def issue_token(
    secret: str,
    scopes: Iterable[str],
    *,
    subject: str | None = None,
    lifetime: float | None = 3600,
    clock: Callable[[], float] = time.time,
) -> str:
    """A JWT for the sandbox with ``scopes``, valid ``lifetime`` seconds (None: no expiry)."""
    claims: dict[str, Any] = {"scope": " ".join(sorted(scopes)), "iat": int(clock())}
    if subject is not None:
        claims["sub"] = subject
    if lifetime is not None:
        claims["exp"] = int(clock() + lifetime)
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256)
    return f"{header}.{payload}.{_b64(signature.digest())}"


def read_token(token: str, secret: str, *, clock: Callable[[], float] = time.time) -> AccessToken:
    """Verify ``token`` and return what it grants.

    :raises TokenError: malformed, another algorithm, a bad signature, or expired.
    """
    if len(token) > MAX_TOKEN_LENGTH:
        raise TokenError(f"The access token is longer than {MAX_TOKEN_LENGTH} characters.")
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("The access token is not a JWT (three dot-separated parts).")
    try:
        header = json.loads(_unb64(parts[0]))
        claims = json.loads(_unb64(parts[1]))
        signature = _unb64(parts[2])
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise TokenError("The access token's parts are not base64url JSON.") from err
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        raise TokenError("The access token is not signed with HS256.")
    expected = hmac.new(secret.encode(), f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256)
    if not hmac.compare_digest(expected.digest(), signature):
        raise TokenError("The access token's signature is not the sandbox's.")
    if not isinstance(claims, dict):
        raise TokenError("The access token's claims are not an object.")
    expires = claims.get("exp")
    if expires is not None and (not isinstance(expires, int | float) or expires <= clock()):
        raise TokenError("The access token has expired.", code="token_expired")
    scope = claims.get("scope", "")
    subject = claims.get("sub")
    if not isinstance(scope, str) or not (subject is None or isinstance(subject, str)):
        raise TokenError("The access token's scope or sub claim is not a string.")
    return AccessToken(frozenset(scope.split()), subject)
