"""``POST /notifications``: the webhook pipeline, in the order of docs/overview.md.

1. Cap the body: a ``Content-Length`` over ``PAYHOOKS_MAX_BODY_BYTES`` is refused unread, and
   the read itself stops one byte past the cap (chunked bodies too): 413. A body the server
   cannot read in full (shorter than announced, broken chunked framing) is a 400
   ``bad_request``, whatever the server raises for it.
2. Verify the signature over the raw bytes, before anything parses them: 401 with the
   :class:`payhooks.verify.SignatureError` code, and a row in ``rejected_deliveries``. For
   the sorted-fields schemes that includes ``non_canonical_body``: a signature that holds
   for a string which does not determine the body.
3. Parse into an :class:`payhooks.storage.Outcome`, once (pure work: nothing is acted on yet).
4. Store the delivery and what came of it in one ledger transaction
   (:func:`~payhooks.receiver.pipeline.processing.receive_delivery`): the outcome, the payment's
   reconciliation and the signals it owes, claimed for this process; or the parse error, kept
   for ``payhooks reprocess`` (400 ``malformed_json``, 422 ``invalid_payload``). A delivery
   already finished answers ``duplicate``; one stored but not finished (a 503 earlier) is
   finished now.
5. Answer, after the commit: 200 with the acknowledgement the service's SDK expects.
6. Report the answer to the app's observers (:mod:`~payhooks.receiver.pipeline.delivery_reports`:
   the metrics' counters, the JSON log line), when it has any.
7. After the answer is sent (the response's close), run the receivers of the claimed signals
   (:mod:`payhooks.receiver.signals`) and mark them sent.

Nothing is answered or acted on before the commit, so a crash before it only leaves a delivery
unanswered, which the service sends again. After it, what is owed is stored and claimed with a
lease: a crash before the receivers ran leaves the signals to the next sender once the lease
passes (the next delivery of any payment sends them, or ``flask payhooks signals --send``).

A ledger that cannot be written answers 503 ``storage_unavailable`` so the service retries;
nothing of the delivery is stored then. A failure of our own (a bug in the parser, a fault of
the SQLite file) is logged with its traceback, the delivery stored alone as
``processing_error`` and answered 503 ``processing_error``: the service retries, and the retry
(or ``payhooks reprocess``) finishes the work. Bad input never gets a 500.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import BadRequest, HTTPException, RequestEntityTooLarge

from payhooks.receiver.pipeline.delivery_reports import DeliveryReport, notify_observers
from payhooks.receiver.pipeline.processing import receive_delivery
from payhooks.receiver.settings import STORED_HEADERS
from payhooks.receiver.state import ReceiverState, receiver_state
from payhooks.receiver.web.errors import error_response
from payhooks.receiver.web.signal_sending import send_after_answer
from payhooks.storage import (
    ReconciliationState,
    StorageError,
    StorageUnavailableError,
)
from payhooks.verify import SignatureError

__all__ = ["STORED_HEADERS", "receive_notification"]

logger = logging.getLogger("payhooks")


def receive_notification() -> Response:
    """Run one delivery through the pipeline; see the module docstring for the steps. Each
    answer is reported to the app's observers (metrics, the JSON log line), if any."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    state = receiver_state(app)
    report = DeliveryReport()
    try:
        response = _receive(app, state, report)
    except HTTPException as err:  # an unreadable body: routes.py answers it as bad_request
        if state.observers:
            report.finish(err.code or 400, "bad_request")
            notify_observers(state.observers, report)
        raise
    if state.observers:
        report.finish(response.status_code, report.code)
        notify_observers(state.observers, report)
    return response


def _refuse(
    report: DeliveryReport, code: str, message: str, details: Mapping[str, Any] | None = None
) -> Response:
    report.code = code
    return error_response(code, message, details)


def _receive(app: Flask, state: ReceiverState, report: DeliveryReport) -> Response:
    if state.verifier is None:
        return _refuse(
            report,
            "processing_error",
            "The app was loaded for a command, without the webhook keys.",
        )

    body = _read_capped_body(state.max_body_bytes)
    if body is None:
        return _refuse(
            report,
            "payload_too_large",
            f"The body is larger than {state.max_body_bytes} bytes.",
            {"max_bytes": state.max_body_bytes},
        )

    # Only the headers the scheme reads and the ones kept with the delivery, under lower-case
    # names (the verifier's fast path): nothing else of a request is read or stored.
    received = request.headers
    headers = {
        name: value
        for name in (*state.verifier.header_names, *STORED_HEADERS)
        if (value := received.get(name)) is not None
    }
    try:
        verified = state.verifier.verify(headers, body)
    except SignatureError as err:
        _record_rejected(state, err, body)
        return _refuse(report, err.code, err.message)

    # What the sender signed identifies the delivery: its id (Standard Webhooks), the digest of
    # the sorted-fields string (many layouts of one body give it, and its signature shows the
    # body is the one it means), else the bytes (hmac-sha256 signs exactly them).
    dedupe_key = verified.webhook_id or verified.signed_digest or hashlib.sha256(body).hexdigest()
    report.rejected = False
    report.scheme = verified.scheme
    report.dedupe_key = dedupe_key
    try:
        ledger = state.ledger
        result = receive_delivery(
            ledger,
            dedupe_key=dedupe_key,
            body=body,
            headers=headers,
            time_zone=state.time_zone,
            status_map=state.status_map,
            key_names_content=verified.webhook_id is None and verified.signed_digest is not None,
            lease=state.signal_lease,
        )
    except StorageUnavailableError as err:
        logger.warning("payhooks: storage unavailable: %s", err.message)
        return _refuse(report, "storage_unavailable", "The ledger cannot be written; try again.")
    except StorageError:
        # Not a passing condition (a schema from a newer payhooks, say), but still nothing
        # stored: ask the service to come back once a person has looked.
        logger.exception("payhooks: the ledger refused a delivery")
        return _refuse(report, "storage_unavailable", "The ledger cannot be written; try again.")
    report.delivery_id = result.delivery_id
    report.outcome_id = result.new_outcome_id
    if result.outcome is not None:
        report.external_identifier = result.outcome.external_identifier
    refused = result.payload_error
    if refused is not None:
        return _refuse(report, refused.code, refused.message, refused.details)
    if not result.finished:
        # A bug of ours, or a ledger failure that is not about availability: the delivery is
        # stored, so the service's retry (or `payhooks reprocess`) can finish it later.
        return _refuse(
            report,
            "processing_error",
            "The delivery is stored but could not be processed; try again.",
        )
    report.code = str(result.status)
    response = _acknowledge(report.code, result.delivery_id, result.reconciliation)
    response.call_on_close(
        partial(send_after_answer, app, state, result.claimed, result.stored_outcomes)
    )
    return response


def _read_capped_body(limit: int) -> bytes | None:
    """The raw body, or None when it is over ``limit`` bytes (reading at most ``limit + 1``)."""
    if request.content_length is not None and request.content_length > limit:
        return None
    stream = request.environ.get("wsgi.input")
    unannounced = request.content_length is None and request.environ.get("wsgi.input_terminated")
    # Flask 3.1's per-request cap bounds the read, also for a chunked body whose length nobody
    # announced. werkzeug stops such a body at the cap without complaint, so read one byte
    # more than allowed: getting it is how an oversized body shows.
    request.max_content_length = limit + 1
    try:
        if unannounced and hasattr(stream, "readinto"):
            body = _read_unannounced(stream, limit + 1)
        else:
            body = request.get_data(cache=True)
    except RequestEntityTooLarge:
        return None
    except HTTPException:
        raise  # werkzeug's own 400 for a client that stopped early (ClientDisconnected)
    except Exception as err:
        # The server could not read the body the client announced: cut short, or chunked
        # framing that does not parse. Each server says so in its own way (gunicorn raises
        # NoMoreData or a ParseException from wsgi.input, others an OSError); all are the
        # sender's fault, answered 400 so that they never look like a failure of ours.
        logger.info("payhooks: could not read a request body: %r", err)
        raise BadRequest("The request body could not be read in full.") from err
    return None if len(body) > limit else body


def _read_unannounced(stream: Any, most: int) -> bytes:
    """At most ``most`` bytes of a body whose length nobody announced (chunked), read from the
    server's decoded input into a fixed buffer.

    Not through werkzeug's request stream: that reads into a ``bytearray``, and werkzeug's
    development server decodes chunks into whatever buffer it gets. A chunk cut short then
    shrinks the bytearray while the count returned says it is full, and CPython's
    ``RawIOBase.read`` copies that many bytes: a heap over-read, which crashed Python 3.13.0
    once in the hostile-HTTP tests. A memoryview cannot shrink: the short chunk raises
    instead, and the sender gets a 400.
    """
    buffer = memoryview(bytearray(min(most, 65536)))
    body = bytearray()
    while len(body) < most:
        count = stream.readinto(buffer[: most - len(body)])
        if not count:
            break
        body += buffer[:count]
    return bytes(body)


def _record_rejected(state: ReceiverState, err: SignatureError, body: bytes) -> None:
    """Keep a bounded trace of a refused delivery; a ledger failure must not hide the 401."""
    logger.info("payhooks: rejected a delivery from %s: %s", request.remote_addr, err.code)
    try:
        # The ledger keeps the first 4 KiB and the full size.
        state.ledger.receiver.record_rejected(
            reason=err.code, body=body, remote_addr=request.remote_addr
        )
    except StorageError as storage_err:
        logger.warning("payhooks: could not record a rejected delivery: %s", storage_err.message)


def _acknowledge(
    status: str, delivery_id: int, reconciliation: ReconciliationState | None
) -> Response:
    """The 200 the service's SDK expects; built directly, for it is sent for every delivery
    (``jsonify`` would go through the app's JSON provider to write five fixed members)."""
    body = json.dumps(
        {
            "code": "200",
            "msg": "success",
            "status": status,
            "delivery_id": delivery_id,
            "reconciliation": None if reconciliation is None else str(reconciliation),
        },
        separators=(",", ":"),
    )
    response: Response = current_app.response_class(body, mimetype="application/json")
    return response
