"""The sandbox over HTTP: the interface's endpoints, the hosted payment page, and a control API.

- ``POST /v4/transactions``, ``POST /v4/subscriptions``, ``GET /v4/transactions``,
  ``GET /buyers``: as the interface describes them, Bearer JWT and scope checked, JSON in and
  out, errors as ``{"type": "error", "status", "code", "message", "field"}``.
- ``GET /pay/<id>``: the hosted payment page; its form posts the person's choice (pay, fail,
  cancel) and the customer is sent back with a 303.
- ``/sandbox/...``: control endpoints that are not the service's (settle a payment, read the
  notification log, resend one, switch dropping on and off), for scripts and other languages;
  Python callers use :class:`~payhooks.service.sandbox.Sandbox` directly. With a
  ``control_token`` setting they need it as a Bearer token.
"""

from __future__ import annotations

import json
import time
from typing import Any

from flask import Blueprint, Flask, Response, abort, redirect, render_template, request
from flask.typing import ResponseReturnValue

from payhooks.service.sandbox.access import authorize, authorize_control
from payhooks.service.sandbox.core import Sandbox, Settlement
from payhooks.service.sandbox.records import SandboxError, major_units
from payhooks.service.sandbox.settings import OUTCOMES

__all__ = ["create_app"]

_SANDBOX_KEY = "payhooks_sandbox"


def create_app(sandbox: Sandbox) -> Flask:
    """A Flask app serving ``sandbox``."""
    app = Flask(__name__)
    app.extensions[_SANDBOX_KEY] = sandbox
    app.register_blueprint(_api(sandbox))
    app.register_blueprint(_page(sandbox))
    app.register_blueprint(_control(sandbox))

    @app.errorhandler(SandboxError)
    def refused(err: SandboxError) -> Response:
        return _json(err.to_wire(), err.status)

    return app


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def _body() -> Any:
    if request.mimetype != "application/json":
        raise SandboxError(415, "unsupported_media_type", "The body must be application/json.")
    try:
        return json.loads(request.get_data())
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise SandboxError(400, "malformed_json", "The body is not valid JSON.") from err


def _authorize(sandbox: Sandbox, endpoint: str) -> str:
    return authorize(
        sandbox.settings,
        endpoint,
        authorization=request.headers.get("Authorization"),
        merchant_account=request.headers.get("x-merchant-account-id"),
    )


def _api(sandbox: Sandbox) -> Blueprint:
    api = Blueprint("api", __name__)

    def answer(body: dict[str, Any], replayed: bool) -> Response:
        delay = sandbox.take_answer_delay()
        if delay:
            time.sleep(delay)
        if sandbox.take_lost_answer():
            return _json(
                {"type": "error", "status": 503, "code": "answer_lost", "message": "Lost."}, 503
            )
        response = _json(body)
        if replayed:
            response.headers["idempotent-replayed"] = "true"
        return response

    @api.post("/v4/transactions")
    def create_transaction() -> Response:
        endpoint = "POST /v4/transactions"
        key = request.headers.get("idempotency-key")
        sandbox.requests.append(("POST", "/v4/transactions", key))
        merchant = _authorize(sandbox, endpoint)
        body = _body()
        return answer(
            *sandbox.idempotent(
                merchant, key, endpoint, body, lambda: sandbox.create_transaction(merchant, body)
            )
        )

    @api.post("/v4/subscriptions")
    def create_subscription() -> Response:
        endpoint = "POST /v4/subscriptions"
        key = request.headers.get("idempotency-key")
        sandbox.requests.append(("POST", "/v4/subscriptions", key))
        merchant = _authorize(sandbox, endpoint)
        if not request.headers.get("X-Forwarded-For", "").strip():
            raise SandboxError(
                400,
                "missing_header",
                "The X-Forwarded-For header is required.",
                field="X-Forwarded-For",
            )
        body = _body()
        return answer(
            *sandbox.idempotent(
                merchant, key, endpoint, body, lambda: sandbox.create_subscription(merchant, body)
            )
        )

    @api.get("/v4/transactions")
    def list_transactions() -> Response:
        return _list("transactions", "GET /v4/transactions", "/v4/transactions")

    @api.get("/buyers")
    def list_buyers() -> Response:
        return _list("buyers", "GET /buyers", "/buyers")

    def _list(resource: str, endpoint: str, path: str) -> Response:
        sandbox.requests.append(("GET", path, None))
        merchant = _authorize(sandbox, endpoint)
        page = sandbox.page(
            merchant,
            resource,
            limit=request.args.get("limit"),
            cursor=request.args.get("cursor"),
        )
        return answer(page, False)

    return api


def _page(sandbox: Sandbox) -> Blueprint:
    page = Blueprint("page", __name__, template_folder="templates")

    @page.get("/pay/<transaction_id>")
    def show(transaction_id: str) -> str:
        transaction = sandbox.transaction(transaction_id)
        if transaction.payment_url is None:
            abort(404)
        return render_template(
            "sandbox_pay.html",
            transaction=transaction,
            amount=major_units(transaction.amount, transaction.currency),
            outcomes=OUTCOMES,
        )

    @page.post("/pay/<transaction_id>")
    def decide(transaction_id: str) -> ResponseReturnValue:
        transaction = sandbox.transaction(transaction_id)
        if transaction.payment_url is None:
            abort(404)
        settlement = sandbox.settle(transaction_id, request.form.get("outcome", ""))
        if settlement.return_url is None:
            return render_template("sandbox_done.html", settlement=settlement)
        return redirect(settlement.return_url, code=303)

    return page


def _control(sandbox: Sandbox) -> Blueprint:
    control = Blueprint("control", __name__, url_prefix="/sandbox")

    @control.before_request
    def check_control_token() -> None:
        authorize_control(sandbox.settings, authorization=request.headers.get("Authorization"))

    def settled(settlement: Settlement, **extra: Any) -> Response:
        notification = settlement.notification
        return _json(
            {
                "transaction_id": settlement.transaction_id,
                "outcome": settlement.outcome,
                **extra,
                "notification_id": None if notification is None else notification.id,
            }
        )

    @control.post("/transactions/<transaction_id>/<outcome>")
    def settle(transaction_id: str, outcome: str) -> Response:
        settlement = sandbox.settle(transaction_id, outcome)
        return settled(settlement, return_url=settlement.return_url)

    @control.post("/subscriptions/<subscription_id>/bill/<outcome>")
    def bill(subscription_id: str, outcome: str) -> Response:
        return settled(sandbox.bill_period(subscription_id, outcome))

    @control.get("/notifications")
    def notifications() -> Response:
        return _json(
            [
                {
                    "id": n.id,
                    "transaction_id": n.transaction_id,
                    "external_identifier": n.external_identifier,
                    "url": n.url,
                    "state": n.state.value,
                    "webhook_id": n.webhook_id,
                    "resend_of": n.resend_of,
                    "body": n.body.decode(),
                    "tries": [
                        {"at": t.at.isoformat(), "status": t.status, "error": t.error}
                        for t in n.tries
                    ],
                }
                for n in sandbox.notifier.log()
            ]
        )

    @control.post("/notifications/<int:notification_id>/resend")
    def resend(notification_id: int) -> Response:
        try:
            notification = sandbox.notifier.resend(notification_id)
        except KeyError:
            raise SandboxError(404, "not_found", "There is no such notification.") from None
        return _json({"id": notification.id, "resend_of": notification_id})

    @control.put("/drop-notifications")
    def drop() -> Response:
        if not request.is_json:
            raise SandboxError(
                400,
                "invalid_request",
                "The body must be JSON, sent with Content-Type: application/json.",
                field="Content-Type",
            )
        value = request.get_json(silent=True)
        if not isinstance(value, bool):
            raise SandboxError(
                400, "invalid_request", "The body must be the JSON true or false.", field="body"
            )
        sandbox.notifier.dropping = value
        return _json({"dropping": value})

    return control
