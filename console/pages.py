"""The console's blueprint: its routes, the guard in front of them, and its error pages.

Routes, relative to the console's prefix, ``GET`` (and ``HEAD``) unless marked ``POST``:

- ``/``: to the delivery log.
- ``/deliveries``: the delivery log (:mod:`.log_views`); ``/deliveries/refused``: the refused
  requests.
- ``/deliveries/<id>``: one delivery; ``/deliveries/refused/<id>``: one refused request;
  ``/payments/<identifier>``: one payment's story (:mod:`.record_views`).
- ``/audit``: the audit log (:mod:`.audit_views`); ``/exceptions``: the exceptions queue, and
  ``POST /exceptions/<identifier>/review`` (:mod:`.exceptions_views`).
- ``POST /deliveries/<id>/reprocess``, ``POST /deliveries/<id>/send-signals``,
  ``POST /deliveries/<id>/download/<raw|fixture>`` (:mod:`.action_views`);
  ``/deliveries/bulk`` and its ``POST`` (:mod:`.bulk_views`). Every ``POST`` is an operator's
  action (an export: any role's): CSRF-checked (:mod:`.csrf`) and audited (:mod:`.acting`).
- ``/reconciliation``: the finance page (:mod:`.finance_views`); ``POST /exports``: an
  export of its rows, any role's; ``/exports/<id>``: the export's page;
  ``/exports/<id>/reconciliation.csv``: its file; ``/reconciliation.csv``: a 303 to the
  finance page, where exports start now (:mod:`.export_views`).
- ``/static/console.css`` and ``/static/favicon.svg``: the stylesheet and the icon.
- anything else under the prefix: the console's 404 page, after the guard.

Every request but the static files' first passes the merchant's ``authorize`` hook, then waits
for the person's turn (:mod:`.turns`: one console request per person at a time). They are
the package's own files and say nothing about the ledger; leaving them open lets the 403 page
be styled without a failed load.
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response, current_app, g, redirect, request, url_for
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from payhooks.console.access import current_access, grant_for
from payhooks.console.acting import (
    MAX_NOTE_CHARS,
    can_act,
    can_read_bodies,
    can_redrive,
    take_result,
)
from payhooks.console.action_views import (
    dismiss_signal,
    download,
    reprocess,
    send_payment_signals,
    send_signals,
)
from payhooks.console.answers import error_page
from payhooks.console.audit_views import audit
from payhooks.console.bulk_views import bulk_confirm, bulk_run
from payhooks.console.csrf import ActionRefused, actions_available, csrf_token
from payhooks.console.exceptions_views import exceptions, review
from payhooks.console.export_views import (
    export_download,
    export_page,
    old_csv_link,
    start_export,
)
from payhooks.console.finance_views import reconciliation
from payhooks.console.limits import (
    begin_time_limit,
    end_time_limit,
    limit_text,
    stopped_counting,
)
from payhooks.console.log_views import deliveries, refused
from payhooks.console.query import BadQuery
from payhooks.console.record_views import delivery, payment, refused_request
from payhooks.console.turns import Turn, take_turn
from payhooks.storage import ReadTimeLimitError, StorageError, UnreadableRowError

__all__ = ["IDENTIFIER_CONVERTER", "blueprint"]

logger = logging.getLogger("payhooks")

#: The URL converter name of the payment page's identifier (registered by ``Console``).
IDENTIFIER_CONVERTER = "payhooks_console_identifier"

#: Registered by :class:`~payhooks.console.Console` under its prefix.
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
    grant = grant_for(current_access().authorize, request)
    if grant is None:
        return error_page(403, "console_forbidden", "You are not allowed to see this console.")
    g.payhooks_console_grant = grant
    g.payhooks_console_role = grant.role
    turn = take_turn(current_app.instance_path, f"{grant.role.value} {grant.who}")
    if turn is None:
        return error_page(
            429,
            "console_busy",
            "Another of your console pages is still loading; reload this one once it is done.",
        )
    g.payhooks_console_turn = turn
    begin_time_limit()  # after the wait for the turn: the limit is the page's own reading
    return None


@blueprint.teardown_request
def _end_request(error: BaseException | None) -> None:
    """The time limit ended and the person's turn given back, however the request ended."""
    end_time_limit(error)
    turn: Turn | None = g.pop("payhooks_console_turn", None)
    if turn is not None:
        turn.release()


@blueprint.context_processor
def _role() -> dict[str, object]:
    """The role the hook granted, for the header (None on a refusal's page), and what the
    action forms need: whether this person may act, whether the app can (a ``SECRET_KEY``),
    the CSRF token, the note's length, whether it offers downloads (a grant that reads
    bodies); the last action's result line, shown once."""
    return {
        "result": take_result(),
        "role": g.get("payhooks_console_role"),
        "can_act": can_act(),
        "can_redrive": can_act() and can_redrive(),
        "can_download": can_act() and can_read_bodies(),
        "actions_available": actions_available(),
        "csrf_token": csrf_token,
        "max_note": MAX_NOTE_CHARS,
        "stopped": stopped_counting(),
    }


@blueprint.errorhandler(ActionRefused)
def _action_refused(err: ActionRefused) -> Response:
    return error_page(err.status, err.code, err.message)


@blueprint.errorhandler(BadQuery)
def _bad_query(err: BadQuery) -> Response:
    return error_page(400, "console_bad_query", err.message)


@blueprint.errorhandler(ReadTimeLimitError)
def _time_limit(err: ReadTimeLimitError) -> Response:
    """A page whose own rows could not be read within the console's time limit."""
    logger.warning("payhooks console: %s stopped at its time limit", request.endpoint)
    return error_page(
        503,
        "console_time_limit",
        f"This page stopped after {limit_text(err.limit_ms)}, the console's time limit: "
        "narrow the period or the filters, or ask the command line (payhooks reconcile).",
    )


@blueprint.errorhandler(StorageError)
def _storage_error(err: StorageError) -> Response:
    logger.error("payhooks console: the ledger failed: %s", err.message, exc_info=err)
    if isinstance(err, UnreadableRowError):  # its sentence names the column, never the value
        return error_page(503, "console_ledger_unreadable", err.message)
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
blueprint.add_url_rule(
    "/deliveries/refused/<int:rejected_id>", "refused_request", refused_request, methods=["GET"]
)
blueprint.add_url_rule("/deliveries/<int:delivery_id>", "delivery", delivery, methods=["GET"])
blueprint.add_url_rule("/deliveries/bulk", "bulk", bulk_confirm, methods=["GET"])
blueprint.add_url_rule("/deliveries/bulk", "bulk_run", bulk_run, methods=["POST"])
blueprint.add_url_rule(
    "/deliveries/<int:delivery_id>/reprocess", "reprocess", reprocess, methods=["POST"]
)
blueprint.add_url_rule(
    "/deliveries/<int:delivery_id>/send-signals", "send_signals", send_signals, methods=["POST"]
)
blueprint.add_url_rule(
    "/deliveries/<int:delivery_id>/download/<form>", "download", download, methods=["POST"]
)
blueprint.add_url_rule(
    "/signals/<int:signal_id>/dismiss", "dismiss_signal", dismiss_signal, methods=["POST"]
)
blueprint.add_url_rule("/audit", "audit", audit, methods=["GET"])
blueprint.add_url_rule("/exceptions", "exceptions", exceptions, methods=["GET"])
blueprint.add_url_rule(
    f"/exceptions/<{IDENTIFIER_CONVERTER}:external_identifier>/review",
    "review",
    review,
    methods=["POST"],
    merge_slashes=False,
)
blueprint.add_url_rule(
    f"/payments/<{IDENTIFIER_CONVERTER}:external_identifier>",
    "payment",
    payment,
    methods=["GET"],
    merge_slashes=False,
)
blueprint.add_url_rule(
    f"/payments/<{IDENTIFIER_CONVERTER}:external_identifier>/send-signals",
    "send_payment_signals",
    send_payment_signals,
    methods=["POST"],
    merge_slashes=False,
)
blueprint.add_url_rule("/reconciliation", "reconciliation", reconciliation, methods=["GET"])
blueprint.add_url_rule("/reconciliation.csv", "old_csv_link", old_csv_link, methods=["GET"])
blueprint.add_url_rule("/exports", "start_export", start_export, methods=["POST"])
blueprint.add_url_rule("/exports/<export_id>", "export_page", export_page, methods=["GET"])
blueprint.add_url_rule(
    "/exports/<export_id>/reconciliation.csv",
    "export_download",
    export_download,
    methods=["GET"],
)
blueprint.add_url_rule("/<path:rest>", "not_found", _not_found, methods=["GET"])
