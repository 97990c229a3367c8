"""The standalone console's app: the console on a named ledger, a login route, and a session.

No receiver: the app mounts :class:`~payhooks.console.Console` with the ledger named, so it
needs no signing keys and nothing can post a notification to it. ``{prefix}/login?token=...``
trades the one-time token for a session cookie (``HttpOnly``, ``SameSite=Strict``) and
redirects to the delivery log, so the token leaves the address bar and the browser's history
holds a used one. The console's ``authorize`` hook reads the role from that session; without
one, every page is the 403 page.

The session is the run's own. Cookies ignore ports, so every other server on 127.0.0.1 (a
developer's app, another tool's page) would be sent a cookie scoped to the host alone, and
could replay it. Each run therefore serves under a random path prefix (``/c/`` and 128 random
bits) that nothing else on the host serves, with the cookie's ``Path`` set to it, so the
browser sends the cookie to this console's pages only; the cookie's name is the run's own too,
and it is signed with a key made for the run, so a cookie kept from an earlier run (or a
restart) is refused.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from flask import Flask, Request, Response, redirect, request, session, url_for
from werkzeug.wrappers import Response as BaseResponse

from payhooks.console import Console, ConsoleGrant, ConsoleRole
from payhooks.console.answers import error_page
from payhooks.console.limits import DEFAULT_TIME_LIMIT_MS
from payhooks.console.standalone.login_token import TOKEN_LIFETIME, LoginToken
from payhooks.receiver.settings import ReceiverSettings

__all__ = ["COOKIE_PREFIX", "PATH_PREFIX", "WHO_KEY", "ConsoleRun", "create_console_app"]

#: Where each run's pages are: under this, then the run's random path segment.
PATH_PREFIX = "/c/"
#: Each run's session cookie is named this, then random hex digits.
COOKIE_PREFIX = "payhooks_console_"
#: The session's keys: the role granted at login, and the person's name (for an audit log).
ROLE_KEY = "payhooks_console_role"
WHO_KEY = "payhooks_console_who"


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _session_grant(request: Request) -> ConsoleGrant | None:
    """The console's ``authorize`` hook: the role and the name the login put in the session
    (so the audit log names the person), or None. It reads bodies whatever the role: whoever
    runs ``payhooks console`` can read the ledger's file, bodies and all, without it."""
    role, who = session.get(ROLE_KEY), session.get(WHO_KEY)
    if not isinstance(role, str) or not isinstance(who, str):
        return None
    return ConsoleGrant(ConsoleRole(role), who, bodies=True)


@dataclass(frozen=True)
class ConsoleRun:
    """One run of the standalone console: its app, its login token, and where it serves.

    The prefix and the cookie's name are secrets of the run as much as the token: a page
    that knew the prefix could be served under it on another port and be sent the cookie.
    """

    app: Flask
    token: LoginToken
    #: The path every page is under, ``/c/<22 random characters>``; the cookie's ``Path``.
    prefix: str = field(repr=False)
    #: The session cookie's name, ``payhooks_console_<16 hex digits>``.
    cookie_name: str

    @property
    def login_path(self) -> str:
        """The login link's path and query, without the scheme and host: it carries the token."""
        return f"{self.prefix}/login?token={self.token.value}"


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
    exports: str | os.PathLike[str] | None = None,
    time_limit_ms: int = DEFAULT_TIME_LIMIT_MS,
) -> ConsoleRun:
    """The app, the token its login link carries, and the run's own prefix and cookie name.

    :param role: what the person who logs in may do.
    :param who: their name, kept in the session beside the role: the audit log's ``who``.
    :param read_only: open the ledger read-only (:class:`~payhooks.storage.Ledger`).
    :param settings: the scheme and keys to check a delivery's signature evidence with
        (:class:`~payhooks.console.Console`'s ``settings``); None: not checked here.
    :param exports: the folder the run's exports are written to; by default one in the run's
        own temporary folder, removed with the app (``payhooks console`` passes a temporary
        folder it removes when it stops).
    :param time_limit_ms: how long one page's reads may take together
        (:class:`~payhooks.console.Console`'s ``time_limit_ms``).
    :raises ValueError: a ``who`` that :class:`~payhooks.console.ConsoleGrant` refuses.
    """
    ConsoleGrant(role, who)  # a name the audit log cannot take fails here, not at each page
    prefix = PATH_PREFIX + secrets.token_urlsafe(16)  # 128 bits: no other server serves it
    cookie_name = COOKIE_PREFIX + secrets.token_hex(8)
    # The run's own folder for what the console keeps on disk (its turns, by default its
    # exports), never
    # the folder the command was started in; removed with the app.
    instance = tempfile.mkdtemp(prefix="payhooks-console-")
    app = Flask("payhooks_console", instance_path=instance)
    weakref.finalize(app, shutil.rmtree, instance, ignore_errors=True)
    app.config.update(
        SECRET_KEY=secrets.token_bytes(32),  # the run's: an earlier run's cookie fails its check
        SESSION_COOKIE_NAME=cookie_name,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        SESSION_COOKIE_PATH=prefix,  # sent to this run's pages only, whatever the port
    )
    token = LoginToken(clock, token_lifetime)
    Console(
        app,
        authorize=_session_grant,
        url_prefix=prefix,
        clock=clock,
        database=database,
        read_only=read_only,
        busy_timeout_ms=busy_timeout_ms,
        settings=settings,
        exports=exports,
        time_limit_ms=time_limit_ms,
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

    app.add_url_rule(f"{prefix}/login", "payhooks_console_login", login, methods=["GET"])
    return ConsoleRun(app, token, prefix, cookie_name)
