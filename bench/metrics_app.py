"""The receiver with metrics and structured logs, for ``bench/receive.py``'s contender
"receiver, FULL, metrics and logs": the demo app (``PAYHOOKS_*`` from the environment,
``PAYHOOKS_DELIVERY_LOG=1`` among them) with :class:`payhooks.receiver.Metrics` mounted at
``/metrics`` (open: the bench scrapes it from loopback) and the delivery lines written to the
file ``BENCH_DELIVERY_LOG`` names, as a merchant's log handler would write them. Run under
gunicorn with ``PROMETHEUS_MULTIPROC_DIR`` set, so each worker's counts go to its own file, as
in production.

Served as ``bench.metrics_app:create_app()``.
"""

from __future__ import annotations

import logging
import os

from flask import Flask

from payhooks.receiver import Metrics
from payhooks.receiver.demo import create_app as create_demo_app
from payhooks.receiver.pipeline.delivery_lines import DELIVERY_LOGGER

__all__ = ["create_app"]


def create_app() -> Flask:
    app = create_demo_app()
    Metrics(app, url="/metrics", authorize=lambda request: True)
    lines = logging.getLogger(DELIVERY_LOGGER)
    if not lines.handlers:
        handler = logging.FileHandler(os.environ["BENCH_DELIVERY_LOG"])
        handler.setFormatter(logging.Formatter("%(message)s"))
        lines.addHandler(handler)
        lines.setLevel(logging.INFO)
        lines.propagate = False
    return app
