"""``GET {PAYHOOKS_URL_PREFIX}/health``: whether this receiver could store a notification now.

For load balancers and orchestrators: 200 when the ledger answers, can be written and has this
payhooks' schema; otherwise 503 in the JSON error shape, with one of
:data:`payhooks.storage.health.HEALTH_CODES` (and ``Retry-After``), so a probe takes the
receiver out of rotation before the service's deliveries start failing. It says nothing about
payments and nothing secret: the engine and the schema version at most.

It writes nothing (:meth:`payhooks.storage.Ledger.health`), and anyone may ask, as often as
they like: each process answers from its last probe for a second and probes once at a time
(:mod:`payhooks.receiver.web.health_cache`), so the callers together cost the ledger at most
one probe a second per process. The probe uses the probing thread's own ledger.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, current_app, jsonify

from payhooks.receiver.state import ReceiverState, receiver_state
from payhooks.receiver.web.errors import error_response
from payhooks.receiver.web.health_cache import HealthCache
from payhooks.storage import LedgerHealth, SchemaBehindError, StorageError, is_postgres_url

__all__ = ["HEALTH_CACHE_KEY", "health_answer", "health_cache"]

logger = logging.getLogger("payhooks")

#: Where an app's :class:`HealthCache` is kept in ``app.extensions``, made on the first check.
HEALTH_CACHE_KEY = "payhooks.health"


def health_cache(app: Flask | None = None) -> HealthCache:
    """The health cache of ``app`` (default: the current app), made on first use."""
    target: Flask = current_app._get_current_object() if app is None else app  # type: ignore[attr-defined]
    cache: HealthCache | None = target.extensions.get(HEALTH_CACHE_KEY)
    if cache is None:
        made = HealthCache(locked_grace=receiver_state(target).ledgers.busy_timeout_ms / 1000)
        # setdefault is one step under the GIL: two first checks at once keep one cache.
        cache = target.extensions.setdefault(HEALTH_CACHE_KEY, made)
    return cache


def _probe(state: ReceiverState) -> LedgerHealth:
    """One look at the ledger, its failures as answers (so they are kept like the others)."""
    try:
        found = state.ledger.health(
            min_free_bytes=state.health_min_free_bytes,
            lock_timeout_ms=state.health_lock_timeout_ms,
        )
    except SchemaBehindError:
        found = LedgerHealth(
            "ledger_migration_pending",
            "The ledger's schema is behind this payhooks; run payhooks migrate.",
        )
    except StorageError as err:
        logger.warning("payhooks: health: the ledger failed: %s", err.message)
        return LedgerHealth("ledger_unavailable", "The ledger cannot be reached now.")
    if found.code is not None:
        logger.warning("payhooks: health: %s: %s", found.code, found.message)
    return found


def health_answer() -> Response:
    """The answer to one health check."""
    state = receiver_state()
    health = health_cache().answer(lambda: _probe(state))
    if health.code is not None:
        return error_response(health.code, health.message)
    engine = "postgresql" if is_postgres_url(state.ledgers.path) else "sqlite"
    response = jsonify({"status": "ok", "engine": engine, "schema_version": health.schema_version})
    response.headers["Cache-Control"] = "no-store"
    return response
