"""Cross-site request forgery: what lets an action's POST through.

A synchronizer token: a random value kept in the app's Flask session (signed with its
``SECRET_KEY``), rendered as a hidden input in every action's form and compared, in constant
time, with what the form sends back. A page on another site cannot read it, so it cannot forge
the form. On top, a browser's own word on where the request came from: a ``Sec-Fetch-Site``
other than ``same-origin`` (or ``none``: the person's own navigation), or an ``Origin`` naming
another host, is refused before the token is looked at (``Origin: null``, which browsers send
from the console's ``no-referrer`` pages, decides nothing).

Without a ``SECRET_KEY`` there is no session to keep a token in: the pages still read, the
forms say why actions are off, and every action is refused with
``console_actions_unavailable``.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Final
from urllib.parse import urlsplit

from flask import current_app, request, session

__all__ = [
    "FORM_FIELD",
    "SESSION_KEY",
    "ActionRefused",
    "actions_available",
    "check_action_request",
    "csrf_token",
    "from_another_site",
    "refuse_cross_site",
]

#: Where the token lives in the app's session.
SESSION_KEY: Final = "payhooks_console_csrf"
#: The hidden input that carries it back.
FORM_FIELD: Final = "csrf_token"
_ALLOWED_FETCH_SITES: Final = frozenset({"same-origin", "none"})


class ActionRefused(Exception):
    """An action that may not run: its page's status, stable code and one sentence;
    ``cross_site`` when the browser said another site sent it (then it is nobody's action here:
    it is logged, never audited in the name of the person whose browser carried it)."""

    def __init__(self, status: int, code: str, message: str, *, cross_site: bool = False) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.cross_site = cross_site


def from_another_site() -> bool:
    """Whether the browser says another site sent this request (a link or a redirect there
    opening a console page, an action's form there): what nobody may do in a person's name."""
    return not _same_origin()


def refuse_cross_site() -> None:
    """Refuse a request another site sent, before anything else is asked of it (the role
    included: a viewer's browser carrying another site's POST is not the viewer acting).

    :raises ActionRefused: 400 ``console_csrf_failed``, marked ``cross_site``.
    """
    if not _same_origin():
        raise ActionRefused(
            400,
            "console_csrf_failed",
            "This action was sent from another site and is refused.",
            cross_site=True,
        )


def actions_available() -> bool:
    """Whether the app can keep a session (it has a ``SECRET_KEY``), which actions need."""
    return bool(current_app.secret_key)


def csrf_token() -> str:
    """This session's token, made on first use; empty when the app has no ``SECRET_KEY``."""
    if not actions_available():
        return ""
    token = session.get(SESSION_KEY)
    if not isinstance(token, str) or not token:
        token = secrets.token_urlsafe(32)
        session[SESSION_KEY] = token
    return token


def _same_origin() -> bool:
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site not in _ALLOWED_FETCH_SITES:
        return False
    origin = request.headers.get("Origin")
    # The console's own pages send ``no-referrer``, under which a browser sends ``Origin:
    # null`` with their forms: it says nothing, and Sec-Fetch-Site and the token decide. Only
    # the host is compared: behind a proxy that ends TLS the app may see http while the
    # browser says https; another site's host is what forgery needs and what this refuses.
    return origin in (None, "null") or urlsplit(origin).netloc == request.host


def check_action_request() -> None:
    """Let the current POST through, or refuse it.

    :raises ActionRefused: 503 ``console_actions_unavailable`` without a ``SECRET_KEY``; 400
        ``console_csrf_failed`` for a request from another site, or a token missing or not
        this session's.
    """
    if not actions_available():
        raise ActionRefused(
            503,
            "console_actions_unavailable",
            "Actions need the app's SECRET_KEY, which is not set; the pages still read.",
        )
    refuse_cross_site()
    expected = session.get(SESSION_KEY)
    sent = request.form.get(FORM_FIELD, "")
    if (
        not isinstance(expected, str)
        or not expected
        or not hmac.compare_digest(sent.encode(), expected.encode())
    ):
        raise ActionRefused(
            400,
            "console_csrf_failed",
            "The form's security token is missing or out of date; reload the page and try again.",
        )
