"""``GET {PAYHOOKS_URL_PREFIX}/health``: whether this receiver could store a notification now.

For load balancers and orchestrators: 200 when the ledger answers, can be written and has this
payhooks' schema; otherwise 503 in the JSON error shape, with one of
:data:`payhooks.storage.HEALTH_CODES` (and ``Retry-After``), so a probe takes the receiver out
of rotation before the service's deliveries start failing. It says nothing about payments and
nothing secret: the engine and the schema version at most.

It uses the thread's own ledger (no connection opened per call) and writes nothing
(:meth:`payhooks.storage.Ledger.health`): asked every second, it adds no write to the ledger.
"""

from __future__ import annotations

import logging

from flask import Response, jsonify

from payhooks.receiver.state import receiver_state
from payhooks.receiver.web.errors import error_response
from payhooks.storage import SchemaBehindError, StorageError

__all__ = ["health_answer"]

logger = logging.getLogger("payhooks")


def health_answer() -> Response:
    """The answer to one health check."""
    state = receiver_state()
    try:
        ledger = state.ledger
        health = ledger.health(
            min_free_bytes=state.health_min_free_bytes,
            lock_timeout_ms=state.health_lock_timeout_ms,
        )
    except SchemaBehindError:
        return error_response(
            "ledger_migration_pending",
            "The ledger's schema is behind this payhooks; run payhooks migrate.",
        )
    except StorageError as err:
        logger.warning("payhooks: health: the ledger failed: %s", err.message)
        return error_response("ledger_unavailable", "The ledger cannot be reached now.")
    if health.code is not None:
        logger.warning("payhooks: health: %s: %s", health.code, health.message)
        return error_response(health.code, health.message)
    response = jsonify(
        {"status": "ok", "engine": ledger.engine, "schema_version": health.schema_version}
    )
    response.headers["Cache-Control"] = "no-store"
    return response
