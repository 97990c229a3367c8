"""The Flask side of payhooks: payload parsing, the extension and blueprint, the CLI.

::

    from flask import Flask
    from receiver import PayHooks, return_url

    app = Flask(__name__)
    app.config["PAYHOOKS_SECRETS"] = ["whsec_..."]
    payhooks = PayHooks(app)
"""

from __future__ import annotations

from receiver import signals
from receiver.blueprint import blueprint
from receiver.extension import PayHooks
from receiver.payloads import PayloadError, load_status_map, parse_notification
from receiver.returns import ReturnView, return_url
from receiver.signals import (
    notification_received,
    payment_failed,
    payment_mismatch,
    payment_succeeded,
)
from receiver.state import ReceiverState, receiver_state

__all__ = [
    "PayHooks",
    "PayloadError",
    "ReceiverState",
    "ReturnView",
    "blueprint",
    "load_status_map",
    "notification_received",
    "parse_notification",
    "payment_failed",
    "payment_mismatch",
    "payment_succeeded",
    "receiver_state",
    "return_url",
    "signals",
]
