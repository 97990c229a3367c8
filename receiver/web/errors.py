"""The one shape of every non-2xx answer: ``{"error": {"code", "message", "details"}}``.

The service's retry logic and the merchant's monitoring read ``code``; people read
``message``; ``details`` carries per-field reports (marshmallow's messages) or is ``{}``.
Building every error through :func:`error_response` keeps that shape in one place. A client
that prefers ``text/html`` to JSON (a browser, such as a customer following an expired return
link) gets the same status and headers with the ``payhooks/error.html`` page instead; any
other (no ``Accept``, ``*/*``, JSON) gets the JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Response, jsonify, make_response, render_template, request
from werkzeug.exceptions import HTTPException

__all__ = ["ERROR_CODES", "RETRY_AFTER_SECONDS", "error_response", "http_error_response"]

#: The stable error codes the receiver answers with, and the status of each (docs/errors.md).
#: The first nine are the webhook's contract; ``method_not_allowed`` and ``bad_request`` cover
#: HTTP misuse inside the blueprint, ``processing_error`` a failure of ours after the delivery
#: was stored (answered 503 so the service retries once it is fixed), ``non_canonical_body`` a
#: sorted-fields signature that holds but does not determine the body
#: (docs/signature-security.md), ``forbidden`` a scrape of the metrics that their
#: ``authorize`` hook refused (docs/operations.md).
ERROR_CODES: Mapping[str, int] = {
    "payload_too_large": 413,
    "missing_signature": 401,
    "malformed_signature": 401,
    "invalid_signature": 401,
    "timestamp_out_of_tolerance": 401,
    "malformed_json": 400,
    "invalid_payload": 422,
    "storage_unavailable": 503,
    "not_found": 404,
    "method_not_allowed": 405,
    "bad_request": 400,
    "processing_error": 503,
    "non_canonical_body": 401,
    "forbidden": 403,
    # GET /health (payhooks.storage.health.HEALTH_CODES): the ledger could not take a write now.
    "ledger_read_only": 503,
    "ledger_disk_full": 503,
    "ledger_locked": 503,
    "ledger_unavailable": 503,
    "ledger_migration_pending": 503,
}

#: What a 503 asks the sender to wait before trying again.
RETRY_AFTER_SECONDS = 5


def error_response(
    code: str,
    message: str,
    details: Mapping[str, Any] | None = None,
    *,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """Build the JSON error response for ``code``.

    :param code: one of :data:`ERROR_CODES`; its status is used unless ``status`` is given.
    :param message: one sentence for a person; never a secret or a traceback.
    :param details: per-field reports, or None for ``{}``.
    """
    error = {"code": code, "message": message, "details": dict(details or {})}
    status = status if status is not None else ERROR_CODES[code]
    if request.accept_mimetypes.best_match(["application/json", "text/html"]) == "text/html":
        response = make_response(render_template("payhooks/error.html", error=error, status=status))
    else:
        response = jsonify({"error": error})
    response.status_code = status
    if response.status_code == 503:
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response.headers["Cache-Control"] = "no-store"
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


_HTTP_CODES: Mapping[int, str] = {
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
}


def http_error_response(err: HTTPException) -> Response:
    """Answer a werkzeug HTTP error raised inside the blueprint in the JSON error shape."""
    status = err.code or 500
    code = _HTTP_CODES.get(status, "bad_request" if 400 <= status < 500 else "processing_error")
    headers: dict[str, str] = {}
    if status == 405:
        allowed = getattr(err, "valid_methods", None)
        if allowed:
            headers["Allow"] = ", ".join(allowed)
    message = err.description or err.name
    return error_response(code, str(message), status=status, headers=headers)
