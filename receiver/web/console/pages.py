"""The console's blueprint: its routes, the guard in front of them, and its error pages.

Routes, relative to the console's prefix, all ``GET`` (and ``HEAD``):

- ``/``: to the delivery log.
- ``/deliveries``: the delivery log (:mod:`.log_views`); ``/deliveries/refused``: the refused
  requests.
- ``/deliveries/<id>``: one delivery; ``/payments/<identifier>``: one payment's story
  (:mod:`.record_views`).
- ``/reconciliation``: the finance page; ``/reconciliation.csv``: its rows as CSV
  (:mod:`.finance_views`).
- ``/static/console.css`` and ``/static/favicon.svg``: the stylesheet and the icon.
- anything else under the prefix: the console's 404 page, after the guard.

Every request but the static files' first passes the merchant's ``authorize`` hook. They are
the package's own files and say nothing about the ledger; leaving them open lets the 403 page
be styled without a failed load.
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response, g, redirect, request, url_for
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from payhooks.receiver.web.console.access import current_access, role_for
from payhooks.receiver.web.console.answers import error_page
from payhooks.receiver.web.console.finance_views import reconciliation, reconciliation_csv
from payhooks.receiver.web.console.log_views import deliveries, refused
from payhooks.receiver.web.console.query import BadQuery
from payhooks.receiver.web.console.record_views import delivery, payment
from payhooks.storage import StorageError

__all__ = ["IDENTIFIER_CONVERTER", "blueprint"]

logger = logging.getLogger("payhooks")

#: The URL converter name of the payment page's identifier (registered by ``Console``).
IDENTIFIER_CONVERTER = "payhooks_console_identifier"

#: Registered by :class:`~payhooks.receiver.web.console.Console` under its prefix.
blueprint = Blueprint(
    "payhooks_console",
    __name__,
    template_folder="templates",
    static_folder="static",
)


@blueprint.before_request
def _guard() -> Response | None:
    """Ask the merchant's hook; without a role, the 403 page and nothing else."""
    if request.endpoint == f"{blueprint.name}.static":
        return None
    role = role_for(current_access().authorize, request)
    if role is None:
        return error_page(403, "console_forbidden", "You are not allowed to see this console.")
    g.payhooks_console_role = role
    return None


@blueprint.context_processor
def _role() -> dict[str, object]:
    """The role the hook granted, for the header; None on a refusal's page."""
    return {"role": g.get("payhooks_console_role")}


@blueprint.errorhandler(BadQuery)
def _bad_query(err: BadQuery) -> Response:
    return error_page(400, "console_bad_query", err.message)


@blueprint.errorhandler(StorageError)
def _storage_error(err: StorageError) -> Response:
    logger.error("payhooks console: the ledger failed: %s", err.message, exc_info=err)
    return error_page(503, "console_storage_unavailable", "The ledger cannot be read now.")


@blueprint.errorhandler(HTTPException)
def _http_error(err: HTTPException) -> Response:
    status = err.code or 500
    if status == 404:
        return error_page(404, "console_not_found", "There is no such page in the console.")
    return error_page(status, "console_error", f"{err.name}.")


def _home() -> BaseResponse:
    return redirect(url_for(".deliveries"))


def _not_found(rest: str) -> Response:
    return error_page(404, "console_not_found", "There is no such page in the console.")


blueprint.add_url_rule("/", "home", _home, methods=["GET"])
blueprint.add_url_rule("/deliveries", "deliveries", deliveries, methods=["GET"])
blueprint.add_url_rule("/deliveries/refused", "refused", refused, methods=["GET"])
blueprint.add_url_rule("/deliveries/<int:delivery_id>", "delivery", delivery, methods=["GET"])
blueprint.add_url_rule(
    f"/payments/<{IDENTIFIER_CONVERTER}:external_identifier>",
    "payment",
    payment,
    methods=["GET"],
    merge_slashes=False,
)
blueprint.add_url_rule("/reconciliation", "reconciliation", reconciliation, methods=["GET"])
blueprint.add_url_rule(
    "/reconciliation.csv", "reconciliation_csv", reconciliation_csv, methods=["GET"]
)
blueprint.add_url_rule("/<path:rest>", "not_found", _not_found, methods=["GET"])
