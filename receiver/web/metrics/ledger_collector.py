"""The ledger's gauges, read at scrape time by a prometheus_client custom collector.

Owed signals, the last accepted delivery, the last sync, drift and mismatches are facts of the
ledger, written by every worker and by commands (``payhooks sync``, ``signals --send``). Counted
per delivery in each worker they would be wrong as soon as anything else wrote; read from the
ledger when Prometheus asks they are right, cost the receiver nothing, and are the same whichever
worker answers the scrape (which is why they stay out of prometheus_client's multiprocess files).

A ledger that cannot be read gives ``payhooks_ledger_readable 0`` and no other ledger gauge: an
alert on it says more than stale figures would.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from flask import Flask

from payhooks.receiver.state import receiver_state
from payhooks.storage import LedgerFigures, StorageError, read_ledger_figures

__all__ = ["LedgerCollector"]

logger = logging.getLogger("payhooks")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _timestamp(moment: datetime | None) -> float:
    """Seconds since the epoch, 0 for never (Prometheus' convention for "not yet")."""
    return 0.0 if moment is None else moment.timestamp()


class LedgerCollector:
    """Yields the ledger's gauges for one app on every ``collect()``."""

    def __init__(self, app: Flask, clock: Callable[[], datetime] = _utc_now) -> None:
        self._app = app
        self._clock = clock

    def describe(self) -> list[Any]:
        """Nothing up front: registering must not read the ledger."""
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        readable = GaugeMetricFamily(
            "payhooks_ledger_readable", "1 when the ledger's figures could be read, else 0."
        )
        try:
            figures = read_ledger_figures(receiver_state(self._app).ledger)
        except StorageError as err:
            logger.warning("payhooks metrics: the ledger could not be read: %s", err.message)
            readable.add_metric([], 0)
            yield readable
            return
        readable.add_metric([], 1)
        yield readable
        yield from self._gauges(figures, GaugeMetricFamily)

    def _gauges(self, figures: LedgerFigures, family: Any) -> Iterator[Any]:
        now = self._clock()
        owed = family("payhooks_owed_signals", "Signals owed and not yet sent.")
        owed.add_metric([], figures.owed_signals)
        yield owed
        age = family(
            "payhooks_oldest_owed_signal_age_seconds",
            "How long the oldest unsent signal has been owed; 0 when none is.",
        )
        oldest = figures.oldest_owed_at
        age.add_metric([], 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds()))
        yield age
        accepted = family(
            "payhooks_last_accepted_delivery_timestamp_seconds",
            "When the newest accepted delivery arrived (Unix time); 0 before the first.",
        )
        accepted.add_metric([], _timestamp(figures.last_accepted_at))
        yield accepted
        synced = family(
            "payhooks_last_sync_timestamp_seconds",
            "When the last complete payhooks sync finished (Unix time); 0 before the first.",
        )
        synced.add_metric([], _timestamp(figures.last_sync_at))
        yield synced
        drift = family(
            "payhooks_sync_drift", "Rows of the sync_drift view, by kind.", labels=("kind",)
        )
        for kind, count in figures.drift.items():
            drift.add_metric([kind], count)
        yield drift
        mismatches = family(
            "payhooks_reconciliation_mismatches",
            "Payments in each state that needs a person, by state.",
            labels=("state",),
        )
        for state, count in figures.mismatches.items():
            mismatches.add_metric([state], count)
        yield mismatches
