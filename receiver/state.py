"""Per-app receiver state: what one app's requests need, built from its config once.

:meth:`payhooks.receiver.PayHooks.init_app` builds a :class:`ReceiverState` and keeps it in the
app's ``extensions``; the views find it through :func:`receiver_state`. Nothing here is global, so
two apps in one process never share a verifier or a database.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta, tzinfo
from pathlib import Path
from typing import Any

from flask import Flask, current_app

from payhooks.receiver.ledgers import LedgerPool
from payhooks.receiver.pipeline import Sweeper
from payhooks.receiver.pipeline.delivery_lines import log_delivery
from payhooks.receiver.pipeline.delivery_reports import DeliveryObserver
from payhooks.receiver.settings import load_settings
from payhooks.receiver.signal_retries import SignalRetries
from payhooks.storage import (
    DEFAULT_HEALTH_LOCK_TIMEOUT_MS,
    DEFAULT_MIN_FREE_BYTES,
    Ledger,
    PaymentState,
    is_postgres_url,
)
from payhooks.verify import Verifier

__all__ = ["STATE_KEY", "ReceiverState", "build_state", "receiver_state"]

#: Where :meth:`payhooks.receiver.PayHooks.init_app` keeps the app's :class:`ReceiverState`.
STATE_KEY = "payhooks.state"


@dataclass(frozen=True, slots=True)
class ReceiverState:
    """Everything one app's receiver needs at request time, built from its config once."""

    #: None only in an app loaded for a command (:func:`build_state`'s ``serving``).
    verifier: Verifier | None
    ledgers: LedgerPool
    status_map: Mapping[str, PaymentState]
    time_zone: tzinfo
    max_body_bytes: int
    #: ``PAYHOOKS_SIGNALS_LEASE_SECONDS``: how long a claim on owed signals lasts.
    signal_lease: timedelta
    #: When this process last looked for signals nobody holds.
    sweeper: Sweeper
    #: ``PAYHOOKS_RETURN_REDIRECT``, checked: a template for the return handler's 303, or None.
    return_redirect: str | None = None
    #: ``PAYHOOKS_SHOP_URL``, checked: where the customer's pages link back to, or None.
    shop_url: str | None = None
    #: Called with each request's :class:`~payhooks.receiver.pipeline.delivery_reports.
    #: DeliveryReport` once its answer is built: the JSON log line (``PAYHOOKS_DELIVERY_LOG``)
    #: and whatever mounts itself later (:class:`~payhooks.receiver.web.metrics.Metrics`).
    observers: list[DeliveryObserver] = field(default_factory=list)
    #: ``PAYHOOKS_HEALTH_MIN_FREE_BYTES`` and ``PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS``: the ``/health``
    #: route's thresholds.
    health_min_free_bytes: int = DEFAULT_MIN_FREE_BYTES
    health_lock_timeout_ms: int = DEFAULT_HEALTH_LOCK_TIMEOUT_MS
    #: ``PAYHOOKS_SIGNALS_RETRY_*``: the backoff of a signal whose receiver raised.
    signal_retries: SignalRetries = field(default_factory=SignalRetries)
    #: ``PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS``: each serving process's look for due retries.
    retry_poll_seconds: int = 30

    @property
    def ledger(self) -> Ledger:
        """The calling thread's ledger for this app, its finance rollup in
        ``PAYHOOKS_TIMEZONE`` (the pool sets it as the ledger opens)."""
        return self.ledgers.get()


def receiver_state(app: Flask | None = None) -> ReceiverState:
    """The :class:`ReceiverState` of ``app`` (default: the current app).

    :raises RuntimeError: when :class:`PayHooks` was not initialised on that app.
    """
    target: Flask = current_app._get_current_object() if app is None else app  # type: ignore[attr-defined]
    try:
        state: ReceiverState = target.extensions[STATE_KEY]
    except KeyError:
        raise RuntimeError(
            f"PayHooks is not initialised on app {target.name!r}: call PayHooks(app) "
            "or PayHooks().init_app(app)"
        ) from None
    return state


def build_state(config: Mapping[str, Any], *, serving: bool = True) -> ReceiverState:
    """Check an app's ``PAYHOOKS_*`` config (:func:`~payhooks.receiver.settings.load_settings`)
    and build its state.

    :param serving: the app may receive notifications, so it needs its keys and a ledger
        folder it can write in; an app loaded for a command (a report) needs neither.
    :raises ValueError: naming the key, for a configuration that cannot work.
    """
    settings = load_settings(config, require_keys=serving)
    if settings.database is None:
        raise ValueError("PAYHOOKS_DATABASE is required")
    if not is_postgres_url(settings.database):
        folder = Path(settings.database).absolute().parent
        if not folder.is_dir() or (serving and not os.access(folder, os.W_OK | os.X_OK)):
            raise ValueError(
                f"PAYHOOKS_DATABASE: {folder} is not a folder this process can write in; "
                "create it, or name a ledger file in one"
            )
    ledgers = LedgerPool(
        settings.database if is_postgres_url(settings.database) else Path(settings.database),
        busy_timeout_ms=settings.busy_timeout_ms,
        synchronous=settings.synchronous,
        pool_size=settings.postgres_pool_size,
        timezone=settings.timezone,
    )
    return ReceiverState(
        verifier=settings.verifier,
        ledgers=ledgers,
        signal_lease=timedelta(seconds=settings.signals_lease_seconds),
        sweeper=Sweeper(timedelta(seconds=settings.signals_lease_seconds)),
        status_map=settings.status_map,
        time_zone=settings.time_zone,
        max_body_bytes=settings.max_body_bytes,
        return_redirect=settings.return_redirect,
        shop_url=settings.shop_url,
        observers=[log_delivery] if settings.delivery_log else [],
        health_min_free_bytes=settings.health_min_free_bytes,
        health_lock_timeout_ms=settings.health_lock_timeout_ms,
        signal_retries=settings.signal_retries,
        retry_poll_seconds=settings.signals_retry_poll_seconds,
    )
