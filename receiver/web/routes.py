"""The ``payhooks`` blueprint: the routes, and JSON errors for everything under them.

Routes, relative to ``PAYHOOKS_URL_PREFIX``:

- ``POST /notifications``: the webhook endpoint (:mod:`payhooks.receiver.web.notifications`).
- ``GET /return/<external_identifier>``: the customer's return
(:mod:`payhooks.receiver.web.returns`).
- ``GET /cancel/<external_identifier>``: the wallet's cancel URL.

Any other method on those paths answers a JSON 405 rather than Flask's HTML page. Routing
errors happen before Flask knows the blueprint, so a blueprint error handler never sees them; a
companion rule per path answers instead. Errors raised inside the views (werkzeug's 413 from the
body cap, a ledger that cannot be reached) become the same JSON error shape here.
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response
from payhooks.receiver.web.errors import error_response, http_error_response
from payhooks.receiver.web.notifications import receive_notification
from payhooks.receiver.web.returns import customer_return
from payhooks.storage import StorageError, StorageUnavailableError
from werkzeug.exceptions import HTTPException, MethodNotAllowed
from werkzeug.routing import PathConverter

__all__ = ["IDENTIFIER_CONVERTER", "ExternalIdentifierConverter", "blueprint"]

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


#: Mounted by :class:`payhooks.receiver.PayHooks`. Its template ``payhooks/return.html`` can be
#: overridden by a file of the same name in the app's own template folder.
blueprint = Blueprint("payhooks", __name__, template_folder="templates")

_OTHER_METHODS = ["PUT", "PATCH", "DELETE"]


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


@blueprint.post("/notifications")
def notifications() -> Response:
    """The webhook endpoint."""
    return receive_notification()


@blueprint.route("/notifications", methods=["GET", *_OTHER_METHODS])
def notifications_wrong_method() -> Response:
    return _only("POST")


@blueprint.get("/return/<payhooks_identifier:external_identifier>", merge_slashes=False)
def customer_return_page(external_identifier: str) -> Response:
    """The customer's return from the redirect flow."""
    return customer_return(external_identifier, "return")


@blueprint.get("/cancel/<payhooks_identifier:external_identifier>", merge_slashes=False)
def cancel_page(external_identifier: str) -> Response:
    """The wallet's cancel URL."""
    return customer_return(external_identifier, "cancel")


@blueprint.route(
    "/return/<payhooks_identifier:external_identifier>",
    methods=["POST", *_OTHER_METHODS],
    merge_slashes=False,
)
@blueprint.route(
    "/cancel/<payhooks_identifier:external_identifier>",
    methods=["POST", *_OTHER_METHODS],
    merge_slashes=False,
)
def return_wrong_method(external_identifier: str) -> Response:
    return _only("GET", "HEAD")
