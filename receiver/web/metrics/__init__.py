"""Prometheus metrics for the receiver (the ``metrics`` extra: prometheus_client).

Never open by default: :class:`~payhooks.receiver.PayHooks` does not mount them. The merchant
mounts :class:`Metrics` at a path of their choice with an ``authorize`` hook. The receiver's own
counters and latency histogram are updated as each answer leaves; the ledger's gauges are read
when Prometheus scrapes (docs/operations.md, "Metrics").

Rule: nothing here imports prometheus_client at load time, so ``payhooks.receiver`` loads
without the extra, and :class:`Metrics` says in one sentence what to install.
"""

from __future__ import annotations

from payhooks.receiver.web.metrics.mount import Metrics

__all__ = ["Metrics"]
