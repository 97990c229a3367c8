"""The ``payhooks`` blueprint: the routes, and JSON errors for everything under them.

Routes, relative to ``PAYHOOKS_URL_PREFIX``:

- ``POST /notifications``: the webhook endpoint (:mod:`payhooks.receiver.web.notifications`).
- ``GET /return/<external_identifier>``: the customer's return
(:mod:`payhooks.receiver.web.returns`).
- ``GET /cancel/<external_identifier>``: the wallet's cancel URL.
- ``GET /health``: whether the ledger could store a notification now
  (:mod:`payhooks.receiver.web.health`).

Every error under the prefix follows the JSON error contract (or, for a browser, payhooks' own
error page), never Flask's HTML pages:

- Any other method on those paths, whatever its name (``PUT``, ``TRACE``, ``PROPFIND``, a
  made-up one), answers a JSON 405 with ``Allow``. ``OPTIONS`` too: nobody needs it here (the
  service posts server to server, the customer's browser navigates with ``GET``, and neither is
  ever a CORS preflight), and Flask's automatic answer would be a 200 that says nothing. The
  405 still carries ``Allow``, which is what an ``OPTIONS`` asks.
- Any other path under the prefix (``/notifications/`` with a trailing slash, ``/return/``
  with no identifier, the prefix itself) answers a JSON 404.

Routing errors happen before Flask knows the blueprint, so a blueprint error handler never sees
them; companion rules answer instead. They match every method (a werkzeug rule without
``methods``), which Flask's ``route`` cannot declare, so they are added to the app's URL map
when the blueprint is registered. With an empty prefix there is no catch-all path rule: it would
answer for the merchant's whole site. Errors raised inside the views (werkzeug's 413 from the
body cap, a ledger that cannot be reached) become the same JSON error shape here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Blueprint, Response
from flask.sansio.blueprints import BlueprintSetupState
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import BaseConverter, PathConverter, Rule

from payhooks.receiver.state import receiver_state
from payhooks.receiver.web.errors import error_response, http_error_response
from payhooks.receiver.web.health import health_answer
from payhooks.receiver.web.notifications import receive_notification
from payhooks.receiver.web.returns import customer_return
from payhooks.storage import StorageError, StorageUnavailableError

__all__ = ["IDENTIFIER_CONVERTER", "REST_CONVERTER", "ExternalIdentifierConverter", "blueprint"]

logger = logging.getLogger("payhooks")

#: The URL converter name the return routes use; :meth:`payhooks.receiver.PayHooks.init_app`
#: registers it on the app before the blueprint.
IDENTIFIER_CONVERTER = "payhooks_identifier"


class ExternalIdentifierConverter(PathConverter):
    """Any ``external_identifier`` the service accepts (1 to 64 characters of anything), slashes
    included, even a leading one or two in a row: werkzeug's ``path`` refuses a leading slash,
    so ``return_url("/0")`` would build a URL that never routes. Rules using it are built with
    ``merge_slashes=False``, so ``a//b`` is not redirected to ``a/b``."""

    regex = ".+?"
    #: werkzeug infers "one path segment" from a regex without a slash; this one spans several.
    part_isolating = False


#: The URL converter name of the catch-all rule under the prefix.
REST_CONVERTER = "payhooks_rest"


class _AnyRestConverter(BaseConverter):
    """Whatever follows the prefix: empty, slashes, newlines and all."""

    regex = "(?s:.*)"
    part_isolating = False


#: Mounted by :class:`payhooks.receiver.PayHooks`. Its template ``payhooks/return.html`` can be
#: overridden by a file of the same name in the app's own template folder.
blueprint = Blueprint("payhooks", __name__, template_folder="templates")


@blueprint.context_processor
def _shop_url() -> dict[str, str | None]:
    return {"shop_url": receiver_state().shop_url}


@blueprint.errorhandler(HTTPException)
def _http_error(err: HTTPException) -> Response:
    return http_error_response(err)


@blueprint.errorhandler(StorageError)
def _storage_unavailable(err: StorageError) -> Response:
    if isinstance(err, StorageUnavailableError):
        logger.warning("payhooks: storage unavailable: %s", err.message)
    else:
        logger.error("payhooks: the ledger failed: %s", err.message, exc_info=err)
    return error_response("storage_unavailable", "The ledger cannot be written; try again.")


def _only(*allowed: str) -> Response:
    return http_error_response(MethodNotAllowed(valid_methods=list(allowed)))


# The real routes declare their methods and no automatic OPTIONS: every other method is the
# companion rules' (see the module docstring).


@blueprint.post("/notifications", provide_automatic_options=False)
def notifications() -> Response:
    """The webhook endpoint."""
    return receive_notification()


@blueprint.get(
    "/return/<payhooks_identifier:external_identifier>",
    merge_slashes=False,
    provide_automatic_options=False,
)
def customer_return_page(external_identifier: str) -> Response:
    """The customer's return from the redirect flow."""
    return customer_return(external_identifier, "return")


@blueprint.get(
    "/cancel/<payhooks_identifier:external_identifier>",
    merge_slashes=False,
    provide_automatic_options=False,
)
def cancel_page(external_identifier: str) -> Response:
    """The wallet's cancel URL."""
    return customer_return(external_identifier, "cancel")


@blueprint.get("/health", provide_automatic_options=False)
def health() -> Response:
    """For load balancers: 200, or 503 with the reason's code."""
    return health_answer()


def notifications_wrong_method() -> Response:
    return _only("POST")


def return_wrong_method(external_identifier: str) -> Response:
    return _only("GET", "HEAD")


def health_wrong_method() -> Response:
    return _only("GET", "HEAD")


def not_found(rest: str = "") -> Response:
    return http_error_response(NotFound("There is no such page."))


def _add_any_method_rule(
    state: BlueprintSetupState, rule: str, view: Callable[..., Response]
) -> None:
    """Add ``rule`` under the blueprint's prefix for every method, answered by ``view``, as
    :meth:`BlueprintSetupState.add_url_rule` would name it (so the blueprint's error handlers
    apply), but without the method list Flask always gives a rule."""
    prefix = (state.url_prefix or "").rstrip("/")
    endpoint = f"{state.name_prefix}.{state.name}.{view.__name__}".lstrip(".")
    state.app.url_map.add(Rule(prefix + rule, endpoint=endpoint, merge_slashes=False))
    state.app.view_functions[endpoint] = view


@blueprint.record
def _answer_everything_else(state: BlueprintSetupState) -> None:
    """The companion rules; recorded after the routes, so for a path both match, a route's
    own method wins and every other method reaches the companion."""
    state.app.url_map.converters[REST_CONVERTER] = _AnyRestConverter
    _add_any_method_rule(state, "/notifications", notifications_wrong_method)
    _add_any_method_rule(state, "/health", health_wrong_method)
    for route in ("return", "cancel"):
        _add_any_method_rule(
            state, f"/{route}/<payhooks_identifier:external_identifier>", return_wrong_method
        )
    prefix = (state.url_prefix or "").rstrip("/")
    if prefix:
        _add_any_method_rule(state, "", not_found)
        _add_any_method_rule(state, f"/<{REST_CONVERTER}:rest>", not_found)
