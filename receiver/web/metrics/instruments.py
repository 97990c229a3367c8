"""The receiver's own counters and its latency histogram, updated as each answer leaves.

An :class:`Instruments` is a delivery observer
(:mod:`payhooks.receiver.pipeline.delivery_reports`): per request it increments one counter
and observes one histogram, with the labelled children cached so the hot path is two dictionary
lookups and two prometheus_client updates. Under gunicorn with ``PROMETHEUS_MULTIPROC_DIR`` set,
prometheus_client writes these to one memory-mapped file per worker, and a scrape adds them up.
"""

from __future__ import annotations

from typing import Any, Final

from payhooks.receiver.pipeline.delivery_reports import DeliveryReport

__all__ = ["LATENCY_BUCKETS", "Instruments"]

#: The histogram's upper bounds, in seconds: a verified, durably stored delivery takes a few
#: milliseconds; the top buckets catch a ledger waiting on its busy timeout (5 s by default).
LATENCY_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Instruments:
    """``payhooks_deliveries_total``, ``payhooks_rejections_total`` and
    ``payhooks_request_duration_seconds``, registered on ``registry``."""

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter, Histogram

        self._deliveries = Counter(
            "payhooks_deliveries",
            "Deliveries whose signature held, by the HTTP status and the ledger's status or "
            "error code answered.",
            ("http_status", "code"),
            registry=registry,
        )
        self._rejections = Counter(
            "payhooks_rejections",
            "Requests refused before a signature held (a signature error, payload_too_large, "
            "bad_request), by error code.",
            ("code",),
            registry=registry,
        )
        self._latency = Histogram(
            "payhooks_request_duration_seconds",
            "Time from the notification endpoint's start to its answer, every request.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._observe = self._latency.observe
        self._children: dict[tuple[bool, int, str], Any] = {}

    def __call__(self, report: DeliveryReport) -> None:
        """Count ``report`` and observe its latency."""
        key = (report.rejected, report.http_status, report.code)
        child = self._children.get(key)
        if child is None:
            child = self._child(key)
        child.inc()
        self._observe(report.seconds)

    def _child(self, key: tuple[bool, int, str]) -> Any:
        rejected, http_status, code = key
        if rejected:
            child = self._rejections.labels(code=code)
        else:
            child = self._deliveries.labels(http_status=str(http_status), code=code)
        self._children[key] = child
        return child
