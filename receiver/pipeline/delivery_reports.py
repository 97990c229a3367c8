"""What one request to the notification endpoint came to, handed to the app's observers.

The endpoint fills in a :class:`DeliveryReport` as it goes (the scheme once the signature
holds, the delivery's id once it is stored, the status or error code it answers with) and,
after the answer is built, hands it to each observer of the app: the metrics' counters
(:class:`payhooks.receiver.web.metrics.Metrics`) and the JSON log line
(``PAYHOOKS_DELIVERY_LOG``, :mod:`payhooks.receiver.pipeline.delivery_lines`). An app with no
observer pays for one small object per request and nothing else.

An observer is the merchant's monitoring, never part of the answer: one that raises is logged
and the answer goes out unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter

__all__ = ["DeliveryObserver", "DeliveryReport", "notify_observers"]

logger = logging.getLogger("payhooks")


@dataclass(slots=True)
class DeliveryReport:
    """One request to ``POST /notifications``, as its answer leaves. Nothing here is a secret
    or a body: identifiers and codes only."""

    #: ``perf_counter()`` when the endpoint began; :meth:`finish` turns it into :attr:`seconds`.
    started: float = field(default_factory=perf_counter)
    #: The HTTP status answered.
    http_status: int = 0
    #: For a 200, the ledger's status (``processed``, ``duplicate``, ``conflicting_outcome``);
    #: otherwise the error code answered (docs/errors.md).
    code: str = ""
    #: True when the request was refused before its signature held (a signature code,
    #: ``payload_too_large``, ``bad_request``): a rejection, not a delivery.
    rejected: bool = True
    #: The scheme that verified the signature; None when it did not hold.
    scheme: str | None = None
    #: What the delivery is stored under (``webhook-id``, the signed string's digest or the
    #: body's); webhook-borne text.
    dedupe_key: str | None = None
    #: The delivery's row in ``deliveries``, once stored.
    delivery_id: int | None = None
    #: The outcome this delivery stored first, when it did.
    outcome_id: int | None = None
    #: The payment the outcome names, when the body parsed; webhook-borne text.
    external_identifier: str | None = None
    #: From the start of the endpoint to the answer built, once :meth:`finish` ran.
    seconds: float = 0.0

    def finish(self, http_status: int, code: str) -> None:
        """Record the answer and how long it took."""
        self.http_status = http_status
        self.code = code
        self.seconds = perf_counter() - self.started


#: Called once per request with its finished report.
DeliveryObserver = Callable[[DeliveryReport], None]


def notify_observers(observers: Sequence[DeliveryObserver], report: DeliveryReport) -> None:
    """Hand ``report`` to each observer; one that raises is logged and the rest still run."""
    for observer in observers:
        try:
            observer(report)
        except Exception:
            logger.exception("payhooks: a delivery observer failed; the answer is unchanged")
