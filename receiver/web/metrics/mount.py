"""The :class:`Metrics` extension: Prometheus' text format at a path the merchant chooses,
behind a hook the merchant writes.

Why an object with a required ``authorize`` rather than a config key: the figures tell anyone
who reads them the shop's volume, its failures and its reconciliation problems, and a key
(``PAYHOOKS_METRICS = True`` in an environment file) could open them to the internet with no
guard. Mounting :class:`Metrics` is a line of code that must name who may scrape, the same rule
as the console's; a merchant whose endpoint only a private network reaches says so in the hook
(``authorize=lambda request: True``), on purpose and in review.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, Final

from flask import Flask, Request, Response, request

from payhooks.receiver.state import STATE_KEY, receiver_state
from payhooks.receiver.web.errors import error_response
from payhooks.receiver.web.metrics.instruments import Instruments
from payhooks.receiver.web.metrics.ledger_collector import LedgerCollector

__all__ = ["METRICS_KEY", "MISSING_EXTRA", "Metrics", "MetricsAuthorize"]

#: Where :meth:`Metrics.init_app` keeps itself in ``app.extensions``.
METRICS_KEY: Final = "payhooks.metrics"
#: The one sentence a merchant reads when the extra is not installed.
MISSING_EXTRA: Final = (
    "payhooks metrics need prometheus_client: install the extra with "
    "pip install 'payhooks[metrics]'."
)
#: The merchant's hook: True lets the request read the metrics; anything else refuses.
MetricsAuthorize = Callable[[Request], bool]

logger = logging.getLogger("payhooks")


def _require_prometheus_client() -> None:
    try:
        import prometheus_client  # noqa: F401
    except ImportError as err:
        raise ImportError(MISSING_EXTRA) from err


class Metrics:
    """Serve the receiver's metrics in Prometheus' text format at ``url``, behind ``authorize``.

    ::

        def may_scrape(request):
            given = request.headers.get("Authorization", "")
            return hmac.compare_digest(given, f"Bearer {SCRAPE_TOKEN}")

        Metrics(app, url="/internal/metrics", authorize=may_scrape)

    Mount :class:`~payhooks.receiver.PayHooks` on the app first. Under gunicorn with several
    workers, set ``PROMETHEUS_MULTIPROC_DIR`` to an empty folder before it starts
    (docs/operations.md): each worker's counts then add up in every scrape.

    :param authorize: called with the request on each scrape; ``True`` (exactly) lets it read,
        anything else, or raising, is a 403 ``forbidden``.
    :param url: the path of the metrics, outside the receiver's ``PAYHOOKS_URL_PREFIX``.
    :raises ImportError: :data:`MISSING_EXTRA`, when prometheus_client is not installed.
    :raises ValueError: naming ``authorize`` or ``url``.
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        authorize: MetricsAuthorize | None = None,
        url: str = "/metrics",
    ) -> None:
        _require_prometheus_client()
        if authorize is None or not callable(authorize):
            raise ValueError(
                "Metrics: authorize is required: a callable that takes the request and returns "
                f"True to let it read the metrics; got {authorize!r}"
            )
        if not isinstance(url, str) or not url.startswith("/") or url == "/":
            raise ValueError(f"Metrics: url must start with / and name a path; got {url!r}")
        self.authorize = authorize
        self.url = url.rstrip("/")
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Count every answer of ``app``'s receiver and serve the metrics at :attr:`url`.

        :raises RuntimeError: PayHooks is not initialised on ``app``, or metrics already are.
        :raises ValueError: :attr:`url` is under the receiver's prefix, or
            ``PROMETHEUS_MULTIPROC_DIR`` names no folder.
        """
        from prometheus_client import CollectorRegistry

        if STATE_KEY not in app.extensions:
            raise RuntimeError(
                f"Metrics: PayHooks is not initialised on app {app.name!r}; mount PayHooks "
                "first, the metrics count its answers and read its ledger"
            )
        if METRICS_KEY in app.extensions:
            raise RuntimeError(f"Metrics: metrics are already mounted on app {app.name!r}")
        receiver = (app.config.get("PAYHOOKS_URL_PREFIX") or "").rstrip("/")
        if receiver and (self.url == receiver or self.url.startswith(receiver + "/")):
            raise ValueError(
                f"Metrics: url {self.url!r} is under the receiver's PAYHOOKS_URL_PREFIX "
                f"{receiver!r}; give the metrics a path of their own"
            )
        # The counters' own registry, per app: two apps in one process never clash.
        own = CollectorRegistry(auto_describe=False)
        instruments = Instruments(own)
        exposed = _exposed_registry(own)
        exposed.register(LedgerCollector(app))
        app.extensions[METRICS_KEY] = self
        receiver_state(app).observers.append(instruments)
        app.add_url_rule(
            self.url,
            endpoint="payhooks_metrics",
            view_func=lambda: self._serve(exposed),
            methods=["GET"],
        )

    def _serve(self, registry: Any) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if not self._allowed():
            return error_response("forbidden", "The metrics are not open to this request.")
        response = Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
        response.headers["Cache-Control"] = "no-store"
        return response

    def _allowed(self) -> bool:
        try:
            return self.authorize(request) is True
        except Exception:
            logger.exception("payhooks metrics: the authorize hook raised; the scrape is refused")
            return False

    def __repr__(self) -> str:
        return f"<Metrics {self.url}>"


def _exposed_registry(own: Any) -> Any:
    """What a scrape reads: with ``PROMETHEUS_MULTIPROC_DIR``, every worker's files added up
    (and never ``own``, which would count this worker twice); without it, ``own``."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not folder:
        return own
    if not os.path.isdir(folder):
        raise ValueError(f"Metrics: PROMETHEUS_MULTIPROC_DIR {folder!r} is not a folder")
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    return registry
