"""The receiver over HTTP: the blueprint's routes, the notification endpoint, the customer's
return, the JSON error answers, and the return page's template.

Rule: this is the only part of :mod:`payhooks.receiver` that handles a request; what it does with
a delivery is the pipeline's (:mod:`payhooks.receiver.pipeline`), which never sees Flask.
"""

from __future__ import annotations

from payhooks.receiver.web.errors import error_response, http_error_response
from payhooks.receiver.web.returns import ReturnView, return_url
from payhooks.receiver.web.routes import (
    IDENTIFIER_CONVERTER,
    ExternalIdentifierConverter,
    blueprint,
)
from payhooks.receiver.web.signal_sending import RETRY_TIMER_KEY, install_retry_timer

__all__ = [
    "IDENTIFIER_CONVERTER",
    "RETRY_TIMER_KEY",
    "ExternalIdentifierConverter",
    "ReturnView",
    "blueprint",
    "error_response",
    "http_error_response",
    "install_retry_timer",
    "return_url",
]
