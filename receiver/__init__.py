"""The Flask side of payhooks: the extension, its routes, the pipeline, the in-app commands.

::

    from flask import Flask
    from payhooks.receiver import PayHooks, return_url

    app = Flask(__name__)
    app.config["PAYHOOKS_SECRETS"] = ["whsec_..."]
    payhooks = PayHooks(app)

The names below load on first use (PEP 562), so that importing a Flask-free part of the
receiver, such as :mod:`payhooks.receiver.pipeline` or :mod:`payhooks.receiver.payloads`, does
not import Flask through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from payhooks.receiver import signals
    from payhooks.receiver.checks import CheckLimits, CheckReport, CheckResult, run_checks
    from payhooks.receiver.config import config_from_env
    from payhooks.receiver.extension import PayHooks
    from payhooks.receiver.payloads import PayloadError, parse_notification
    from payhooks.receiver.settings import ReceiverSettings, load_settings
    from payhooks.receiver.signals import (
        notification_received,
        payment_failed,
        payment_mismatch,
        payment_succeeded,
    )
    from payhooks.receiver.state import ReceiverState, receiver_state
    from payhooks.receiver.web import blueprint, return_url
    from payhooks.receiver.web.metrics import Metrics

#: Where each public name lives.
_HOMES = {
    "CheckLimits": "payhooks.receiver.checks",
    "CheckReport": "payhooks.receiver.checks",
    "CheckResult": "payhooks.receiver.checks",
    "Metrics": "payhooks.receiver.web.metrics",
    "PayHooks": "payhooks.receiver.extension",
    "PayloadError": "payhooks.receiver.payloads",
    "ReceiverSettings": "payhooks.receiver.settings",
    "ReceiverState": "payhooks.receiver.state",
    "blueprint": "payhooks.receiver.web",
    "config_from_env": "payhooks.receiver.config",
    "load_settings": "payhooks.receiver.settings",
    "notification_received": "payhooks.receiver.signals",
    "parse_notification": "payhooks.receiver.payloads",
    "payment_failed": "payhooks.receiver.signals",
    "payment_mismatch": "payhooks.receiver.signals",
    "payment_succeeded": "payhooks.receiver.signals",
    "receiver_state": "payhooks.receiver.state",
    "run_checks": "payhooks.receiver.checks",
    "return_url": "payhooks.receiver.web",
}

__all__ = [
    "CheckLimits",
    "CheckReport",
    "CheckResult",
    "Metrics",
    "PayHooks",
    "PayloadError",
    "ReceiverSettings",
    "ReceiverState",
    "blueprint",
    "config_from_env",
    "load_settings",
    "notification_received",
    "parse_notification",
    "payment_failed",
    "payment_mismatch",
    "payment_succeeded",
    "receiver_state",
    "return_url",
    "run_checks",
    "signals",
]


def __getattr__(name: str) -> Any:
    if name == "signals":
        return importlib.import_module("payhooks.receiver.signals")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'payhooks.receiver' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
