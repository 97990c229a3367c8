"""The standalone console's app: the console on a named ledger, a login route, and a session.

No receiver: the app mounts :class:`~payhooks.receiver.Console` with the ledger named, so it
needs no signing keys and nothing can post a notification to it. ``{prefix}/login?token=...``
trades the one-time token for a session cookie (``HttpOnly``, ``SameSite=Strict``, signed with
a key made for this run, so a restart logs everybody out) and redirects to the delivery log,
so the token leaves the address bar and the browser's history holds a used one. The console's
``authorize`` hook reads the role from that session; without one, every page is the 403 page.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from flask import Flask, Request, Response, redirect, request, session, url_for
from werkzeug.wrappers import Response as BaseResponse

from payhooks.receiver.settings import ReceiverSettings
from payhooks.receiver.standalone.login_token import TOKEN_LIFETIME, LoginToken
from payhooks.receiver.web.console import Console, ConsoleGrant, ConsoleRole
from payhooks.receiver.web.console.answers import error_page

__all__ = ["CONSOLE_PREFIX", "WHO_KEY", "create_console_app"]

#: Where the standalone console's pages are.
CONSOLE_PREFIX = "/console"
#: The session's keys: the role granted at login, and the person's name (for an audit log).
ROLE_KEY = "payhooks_console_role"
WHO_KEY = "payhooks_console_who"


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _session_grant(request: Request) -> ConsoleGrant | None:
    """The console's ``authorize`` hook: the role and the name the login put in the session
    (so the audit log names the person), or None."""
    role, who = session.get(ROLE_KEY), session.get(WHO_KEY)
    if not isinstance(role, str) or not isinstance(who, str):
        return None
    return ConsoleGrant(ConsoleRole(role), who)


def create_console_app(
    database: str | os.PathLike[str],
    *,
    role: ConsoleRole,
    who: str,
    read_only: bool,
    busy_timeout_ms: int = 5000,
    clock: Callable[[], datetime] = _utc_now,
    token_lifetime: timedelta = TOKEN_LIFETIME,
    settings: ReceiverSettings | None = None,
) -> tuple[Flask, LoginToken]:
    """The app, and the token its login link carries.

    :param role: what the person who logs in may do.
    :param who: their name, kept in the session beside the role: the audit log's ``who``.
    :param read_only: open the ledger read-only (:class:`~payhooks.storage.Ledger`).
    :param settings: the scheme and keys to check a delivery's signature evidence with
        (:class:`~payhooks.receiver.Console`'s ``settings``); None: not checked here.
    :raises ValueError: a ``who`` that :class:`~payhooks.receiver.ConsoleGrant` refuses.
    """
    ConsoleGrant(role, who)  # a name the audit log cannot take fails here, not at each page
    app = Flask("payhooks_console")
    app.config.update(
        SECRET_KEY=secrets.token_bytes(32),
        SESSION_COOKIE_NAME="payhooks_console",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        SESSION_COOKIE_PATH=CONSOLE_PREFIX,
    )
    token = LoginToken(clock, token_lifetime)
    Console(
        app,
        authorize=_session_grant,
        url_prefix=CONSOLE_PREFIX,
        clock=clock,
        database=database,
        read_only=read_only,
        busy_timeout_ms=busy_timeout_ms,
        settings=settings,
    )

    def login() -> Response | BaseResponse:
        """Trade the token for a session, once; anything else is the 403 page."""
        if not token.redeem(request.args.get("token", "")):
            return error_page(
                403,
                "console_forbidden",
                "This login link is not valid: it was used already, has expired or is wrong.",
            )
        session.clear()
        session[ROLE_KEY] = role.value
        session[WHO_KEY] = who
        return redirect(url_for("payhooks_console.deliveries"), code=303)

    app.add_url_rule(f"{CONSOLE_PREFIX}/login", "payhooks_console_login", login, methods=["GET"])
    return app, token
