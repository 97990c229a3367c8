"""``PAYHOOKS_DELIVERY_LOG``: one JSON line per request to the notification endpoint, on the
``payhooks.deliveries`` logger.

The fields are fixed (docs/operations.md, "Logs") so a log pipeline can index them: ``event``,
``time``, ``http_status``, ``status``, ``error``, ``rejected``, ``scheme``, ``delivery_id``,
``dedupe_key``, ``external_identifier``, ``outcome_id``, ``latency_ms``. Never a body, a
header's value or a key: the only webhook-borne strings are the two identifiers, and they are
written by :func:`payhooks.receiver.visible_text.visible_json`, so a control character or a
bidirectional control in one reaches a terminal as an inert ``\\u`` escape, and a line break
can never split one delivery's line in two. They are cut to :data:`MAX_TEXT` characters.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Final

from payhooks.receiver.pipeline.delivery_reports import DeliveryReport
from payhooks.receiver.visible_text import visible_json

__all__ = ["DELIVERY_LOGGER", "MAX_TEXT", "delivery_line", "log_delivery"]

#: The logger the lines go to, at INFO.
DELIVERY_LOGGER: Final = "payhooks.deliveries"
#: The longest identifier written whole; a longer one is cut and ends with ``...``.
MAX_TEXT: Final = 200

_logger = logging.getLogger(DELIVERY_LOGGER)


def _bounded(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + "..."


def delivery_line(report: DeliveryReport, now: datetime | None = None) -> str:
    """The one-line JSON document for ``report``."""
    moment = datetime.now(UTC) if now is None else now
    fields: dict[str, Any] = {
        "event": "delivery",
        "time": moment.isoformat(timespec="milliseconds"),
        "http_status": report.http_status,
        "status": report.code if report.http_status == 200 else None,
        "error": None if report.http_status == 200 else report.code,
        "rejected": report.rejected,
        "scheme": report.scheme,
        "delivery_id": report.delivery_id,
        "dedupe_key": _bounded(report.dedupe_key),
        "external_identifier": _bounded(report.external_identifier),
        "outcome_id": report.outcome_id,
        "latency_ms": round(report.seconds * 1000, 3),
    }
    return visible_json(fields)


def log_delivery(report: DeliveryReport) -> None:
    """The observer ``PAYHOOKS_DELIVERY_LOG`` adds: the line, at INFO, when anyone listens."""
    if _logger.isEnabledFor(logging.INFO):
        _logger.info("%s", delivery_line(report))
