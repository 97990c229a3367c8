"""The customer's return from a redirect flow: signed return URLs and what the page reports.

The query string of a return comes from the customer's browser and can be forged, so a return
never settles anything. It is recorded, and the page reports the ledger's view, which always
wins: ``paid`` only when a verified notification said so.

Return URLs carry a ``token`` made with itsdangerous, keyed by the app's secret key and bound to
the ``external_identifier`` and to the route (return or cancel), so a token for one payment or
one route does not open another, and it expires after ``PAYHOOKS_RETURN_MAX_AGE`` seconds. A
missing, forged or expired token answers 404 ``not_found`` (a page for a browser, JSON for a
script: :mod:`payhooks.receiver.web.errors`); a valid token for a payment
the ledger does not know yet answers 200 ``processing`` (customers often return before the
notification arrives).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from flask import Flask, Response, current_app, make_response, render_template, request, url_for
from itsdangerous import BadData, URLSafeTimedSerializer
from werkzeug.exceptions import HTTPException
from werkzeug.routing import RoutingException

from payhooks.receiver.redirects import fill_redirect_template
from payhooks.receiver.state import receiver_state
from payhooks.receiver.web.errors import error_response
from payhooks.storage import ReconciliationState

__all__ = [
    "RETURN_SALT",
    "ReturnKind",
    "ReturnView",
    "customer_return",
    "customer_view",
    "redirect_target",
    "return_url",
    "token_is_valid",
]

ReturnKind = Literal["return", "cancel"]

#: Separates return tokens from anything else the app signs with its secret key.
RETURN_SALT = "payhooks-return"

#: Ledger states that mean a verified notification said the customer paid (and what happened
#: to the money since is the merchant's business, not the customer's return page).
_PAID_STATES = frozenset(
    {
        ReconciliationState.PAID,
        ReconciliationState.DUPLICATE_PAYMENT,
        ReconciliationState.REFUND_PENDING,
        ReconciliationState.PARTIALLY_REFUNDED,
        ReconciliationState.REFUNDED,
        ReconciliationState.CHARGED_BACK,
    }
)

#: What the orchestrator's ``resultCode`` claims, when the ledger knows nothing better.
_RESULT_CODE_STATES: Mapping[str, str] = {
    "Authorised": "processing",
    "Pending": "processing",
    "Received": "processing",
    "Refused": "failed",
    "Error": "failed",
    "Cancelled": "cancelled",
}


def _serializer(app: Flask) -> URLSafeTimedSerializer:
    secret_key = app.secret_key
    if not secret_key:
        raise ValueError(
            "return URLs are signed with the app's secret key: set SECRET_KEY in the app's config"
        )
    fallbacks = list(app.config.get("SECRET_KEY_FALLBACKS") or [])
    # itsdangerous signs with the last key and accepts any of them, so rotation works.
    return URLSafeTimedSerializer([*fallbacks, secret_key], salt=RETURN_SALT)


def _make_token(app: Flask, external_identifier: str, kind: ReturnKind) -> str:
    return _serializer(app).dumps({"id": external_identifier, "kind": kind})


def token_is_valid(
    app: Flask, token: str | None, external_identifier: str, kind: ReturnKind
) -> bool:
    """Whether ``token`` was made by :func:`return_url` for this payment and route, in time."""
    if not token or not app.secret_key:
        return False
    max_age = int(app.config["PAYHOOKS_RETURN_MAX_AGE"])
    try:
        payload = _serializer(app).loads(token, max_age=max_age)
    except BadData:
        return False
    return (
        isinstance(payload, dict)
        and payload.get("id") == external_identifier
        and payload.get("kind") == kind
    )


def return_url(external_identifier: str, cancel: bool = False, *, _external: bool = True) -> str:
    """The URL to give the service for the customer's return (or, with ``cancel``, cancel).

    Use it as the orchestrator's ``returnUrl``, the wallet's ``redirect_url`` and
    ``cancel_url``, or a subscription's ``redirect_url``. Call it inside a request or an app
    context; outside a request, an absolute URL needs Flask's ``SERVER_NAME``.

    :raises ValueError: when the app has no secret key to sign the token with, or for an
        identifier no URL can carry back to the route (one with a newline, or a ``.`` or
        ``..`` path segment that browsers remove): a URL that could only ever answer 404 is
        refused here, where the mistake can still be seen, not handed to the customer.
    """
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    kind: ReturnKind = "cancel" if cancel else "return"
    endpoint = "payhooks.cancel_page" if cancel else "payhooks.customer_return_page"
    _check_routable(app, endpoint, external_identifier)
    token = _make_token(app, external_identifier, kind)
    return url_for(
        endpoint, external_identifier=external_identifier, token=token, _external=_external
    )


def _check_routable(app: Flask, endpoint: str, external_identifier: str) -> None:
    """Build the path for ``external_identifier`` and route it back, as the server will.

    :raises ValueError: when the path does not come back to ``endpoint`` with the same
        identifier, or when a browser would change it before sending it.
    """
    if not isinstance(external_identifier, str) or not external_identifier:
        raise ValueError("external_identifier must be a non-empty string")
    problem = None
    if any(segment in (".", "..") for segment in external_identifier.split("/")):
        problem = "a '.' or '..' path segment, which browsers remove before sending the URL"
    else:
        adapter = app.url_map.bind("localhost")
        values = {"external_identifier": external_identifier}
        try:
            path = adapter.build(endpoint, values)
            routed = adapter.match(unquote(path, errors="strict"), method="GET")
        except (HTTPException, RoutingException, UnicodeError):
            routed = None
        if routed != (endpoint, values):
            problem = "a character the return route cannot match, such as a newline"
    if problem is not None:
        raise ValueError(
            f"external_identifier {external_identifier[:64]!r} cannot be put in a return URL: "
            f"it has {problem}"
        )


@dataclass(frozen=True, slots=True)
class ReturnView:
    """What the return page tells the customer.

    ``state`` is ``paid``, ``processing``, ``failed`` or ``cancelled``; ``confirmed`` is True
    only when it comes from a verified notification rather than the browser's word.
    """

    external_identifier: str
    state: str
    confirmed: bool
    result_code: str | None

    def as_json(self) -> dict[str, object]:
        return {
            "external_identifier": self.external_identifier,
            "state": self.state,
            "confirmed": self.confirmed,
            "result_code": self.result_code,
        }


def customer_view(
    external_identifier: str,
    kind: ReturnKind,
    result_code: str | None,
    ledger_state: ReconciliationState | None,
) -> ReturnView:
    """Decide what the page says: the ledger's view first, the customer's word only as a hint.

    A verified outcome (``paid`` and what follows it, ``failed``, ``cancelled``) is confirmed.
    Otherwise, including payments a person must look at (a mismatch), the customer's word can
    only make it ``failed`` or ``cancelled`` (nothing is lost by believing bad news), and
    anything else is ``processing`` until the notification comes.
    """
    if ledger_state in _PAID_STATES:
        return ReturnView(external_identifier, "paid", True, result_code)
    if ledger_state is ReconciliationState.FAILED:
        return ReturnView(external_identifier, "failed", True, result_code)
    if ledger_state is ReconciliationState.CANCELLED:
        return ReturnView(external_identifier, "cancelled", True, result_code)
    if kind == "cancel":
        return ReturnView(external_identifier, "cancelled", False, result_code)
    claimed = _RESULT_CODE_STATES.get(result_code or "", "processing")
    return ReturnView(external_identifier, claimed, False, result_code)


def redirect_target(template: str, view: ReturnView) -> str:
    """Fill ``PAYHOOKS_RETURN_REDIRECT``'s placeholders, each URL-quoted.

    ``template`` is the checked setting
    (:func:`payhooks.receiver.redirects.check_redirect_template` runs when the app starts),
    never one taken from the request.
    """
    return fill_redirect_template(
        template, external_identifier=view.external_identifier, state=view.state
    )


def customer_return(external_identifier: str, kind: ReturnKind) -> Response:
    """The view behind ``/return/<id>`` and ``/cancel/<id>``: record the visit, report.

    Answers JSON for ``Accept: application/json``; otherwise a 303 to
    ``PAYHOOKS_RETURN_REDIRECT`` when it is set, else the ``payhooks/return.html`` page. A
    ``HEAD`` request (a link checker, a browser's prefetch) gets the same answer without a
    body and records nothing: it is not the customer coming back.
    """
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    if not token_is_valid(app, request.args.get("token"), external_identifier, kind):
        return error_response("not_found", "This payment link has expired or is not valid.")
    # The browser's word, kept short: it is only a hint, and it is stored.
    result_code = (request.args.get("resultCode") or "")[:64] or None
    state = receiver_state(app)
    ledger = state.ledger
    if request.method != "HEAD":
        ledger.receiver.record_return(external_identifier, kind, result_code)
    view = customer_view(external_identifier, kind, result_code, ledger.state(external_identifier))

    wants_json = (
        request.accept_mimetypes.best_match(["text/html", "application/json"]) == "application/json"
    )
    if wants_json:
        response = make_response(view.as_json())
    elif state.return_redirect:
        response = make_response("", 303)
        response.headers["Location"] = redirect_target(state.return_redirect, view)
    else:
        response = make_response(render_template("payhooks/return.html", view=view))
    # The URL carries a token: keep it out of caches and out of other sites' Referer headers.
    response.headers["Cache-Control"] = "no-store"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.vary.add("Accept")
    return response
