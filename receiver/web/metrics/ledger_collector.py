"""The ledger's gauges, read at scrape time by a prometheus_client custom collector.

Owed signals, the last accepted delivery, the last sync, drift and mismatches are facts of the
ledger, written by every worker and by commands (``payhooks sync``, ``signals --send``). Counted
per delivery in each worker they would be wrong as soon as anything else wrote; read from the
ledger when Prometheus asks they are right, cost the receiver nothing, and are the same whichever
worker answers the scrape (which is why they stay out of prometheus_client's multiprocess files).

They are the figures of ``Ledger.vitals`` (the ones the console's health strip and ``payhooks
check`` read), one read per scrape, so the three never disagree about what the ledger holds.
The one difference is on purpose: the metrics' last accepted delivery is the newest *finished*
one (a conflicting outcome too, answered 200 like the others; ``Vitals.last_finished_at``),
whereas ``payhooks check``'s silence counts only deliveries whose outcome is in the ledger.

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
from payhooks.storage import DriftKind, StorageError
from payhooks.storage.reads import Vitals

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
            ledger = receiver_state(self._app).ledger
            vitals = ledger.vitals(self._clock())
            receiver_errors = ledger.signals.receiver_errors()
        except StorageError as err:
            logger.warning("payhooks metrics: the ledger could not be read: %s", err.message)
            readable.add_metric([], 0)
            yield readable
            return
        readable.add_metric([], 1)
        yield readable
        yield from self._gauges(vitals, GaugeMetricFamily)
        yield from self._receivers(vitals, receiver_errors, GaugeMetricFamily)

    def _receivers(
        self, vitals: Vitals, errors: list[tuple[str, str, int]], family: Any
    ) -> Iterator[Any]:
        """The merchant's receivers: their raises by signal and receiver (code names, never a
        webhook's values, as labels), and the signals parked or waiting for a retry."""
        from prometheus_client.core import CounterMetricFamily

        raised = CounterMetricFamily(
            "payhooks_receiver_errors",
            "Runs of the app's signal receivers that raised, by signal and receiver.",
            labels=("signal", "receiver"),
        )
        for signal, receiver, count in errors:
            raised.add_metric([signal, receiver], count)
        yield raised
        parked = family(
            "payhooks_parked_signals",
            "Signals parked after their receiver raised in every allowed round: a person must "
            "re-run them.",
        )
        parked.add_metric([], vitals.parked_signals)
        yield parked
        retrying = family(
            "payhooks_retrying_signals",
            "Signals owed after their receiver raised, waiting for their retry.",
        )
        retrying.add_metric([], vitals.failing_signals - vitals.parked_signals)
        yield retrying

    def _gauges(self, vitals: Vitals, family: Any) -> Iterator[Any]:
        now = vitals.now
        owed = family("payhooks_owed_signals", "Signals owed and not yet sent.")
        owed.add_metric([], vitals.unsent_signals)
        yield owed
        age = family(
            "payhooks_oldest_owed_signal_age_seconds",
            "How long the oldest unsent signal has been owed (retried and parked ones too); 0 "
            "when none is.",
        )
        oldest = vitals.oldest_unsent_at
        age.add_metric([], 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds()))
        yield age
        accepted = family(
            "payhooks_last_accepted_delivery_timestamp_seconds",
            "When the newest accepted delivery arrived (Unix time); 0 before the first.",
        )
        accepted.add_metric([], _timestamp(vitals.last_finished_at))
        yield accepted
        synced = family(
            "payhooks_last_sync_timestamp_seconds",
            "When the last complete payhooks sync finished (Unix time); 0 before the first.",
        )
        synced.add_metric([], _timestamp(vitals.last_complete_sync_at))
        yield synced
        drift = family(
            "payhooks_sync_drift", "Rows of the sync_drift view, by kind.", labels=("kind",)
        )
        for kind in DriftKind:  # every kind, zeros too: a series that vanishes alerts nobody
            drift.add_metric([kind.value], vitals.drift.get(kind, 0))
        yield drift
        mismatches = family(
            "payhooks_reconciliation_mismatches",
            "Payments in each state that needs a person, by state.",
            labels=("state",),
        )
        for state, count in sorted(vitals.mismatches.items()):
            mismatches.add_metric([state.value], count)
        yield mismatches
        lag = family(
            "payhooks_rollup_lag_seconds",
            "How long the oldest change not yet in finance's rollup has waited (0: up to date).",
        )
        lag.add_metric([], vitals.rollup_lag.total_seconds())
        yield lag
