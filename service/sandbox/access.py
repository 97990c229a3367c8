"""Who may call the sandbox: the Bearer token, its scope, and the merchant account header."""

from __future__ import annotations

import hmac

from payhooks.service.sandbox.records import SandboxError
from payhooks.service.sandbox.settings import SandboxSettings
from payhooks.service.sandbox.tokens import TokenError, read_token

__all__ = ["authorize", "authorize_control"]


def authorize(
    settings: SandboxSettings,
    endpoint: str,
    *,
    authorization: str | None,
    merchant_account: str | None,
) -> str:
    """Check the ``Authorization`` header's Bearer token, its scope for ``endpoint``
    (``"POST /v4/subscriptions"``), and the ``x-merchant-account-id`` header; the merchant
    account the request acts for.

    The header is required on creation (interface section 5); on the lists, where the
    interface does not say, the token's ``sub`` or the first account stands in.

    :raises SandboxError: 401 ``unauthorized``/``invalid_token``/``token_expired``, 403
        ``insufficient_scope``/``unknown_merchant_account``, 400 ``missing_header``.
    """
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise SandboxError(401, "unauthorized", "A Bearer access token is required.")
    try:
        access = read_token(token.strip(), settings.token_secret)
    except TokenError as err:
        raise SandboxError(401, err.code, err.message) from err
    needed = settings.scopes.get(endpoint)
    if needed is not None and needed not in access.scopes:
        raise SandboxError(403, "insufficient_scope", f"{endpoint} needs the scope {needed!r}.")
    merchant = merchant_account
    if merchant is None:
        if endpoint.startswith("POST"):
            raise SandboxError(
                400,
                "missing_header",
                "The x-merchant-account-id header is required.",
                field="x-merchant-account-id",
            )
        merchant = access.subject or settings.merchant_account_ids[0]
    if merchant not in settings.merchant_account_ids or (
        access.subject is not None and access.subject != merchant
    ):
        raise SandboxError(
            403,
            "unknown_merchant_account",
            "The token may not act for this merchant account.",
            field="x-merchant-account-id",
        )
    return merchant


def authorize_control(settings: SandboxSettings, *, authorization: str | None) -> None:
    """Check the control API's ``Authorization: Bearer <control token>`` when the sandbox has
    a control token (none: the control API is open, on loopback only).

    The header is compared as bytes in constant time: whatever a client sends (any length,
    latin-1 text) is a 401, never an error of the sandbox's own.

    :raises SandboxError: 401 ``unauthorized`` (no Bearer token) or
        ``invalid_control_token``.
    """
    expected = settings.control_token
    if expected is None:
        return
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise SandboxError(
            401, "unauthorized", "The control API needs the sandbox's control token as Bearer."
        )
    given = token.strip().encode("utf-8", "surrogateescape")
    if not hmac.compare_digest(given, expected.encode("ascii")):
        raise SandboxError(401, "invalid_control_token", "That is not the sandbox's control token.")
