"""Running stored deliveries through parsing again (``payhooks reprocess``).

A delivery that could not be parsed (``invalid_payload`` with a status map that lacked a code,
``processing_error`` after a bug) keeps its raw body in the ledger. Once the configuration or
payhooks is fixed, reprocessing parses each such body again and records its outcome, exactly as
the receiver would have: through the same
:func:`~payhooks.receiver.pipeline.processing.process_stored_delivery` (the same parser, ledger
call, idempotency and stored errors). Its signature was verified when it arrived.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Final

from payhooks.receiver.payloads import load_status_map, load_time_zone
from payhooks.receiver.pipeline.processing import DEFAULT_SIGNAL_LEASE, process_stored_delivery
from payhooks.receiver.pipeline.signal_dispatch import send_claimed
from payhooks.receiver.signal_retries import SignalRetries
from payhooks.storage import FINISHED_DELIVERY_STATUSES, DeliveryStatus, Ledger, PaymentState

__all__ = [
    "UNFINISHED_STATUSES",
    "ReprocessReport",
    "delivery_ids",
    "reprocess_deliveries",
]

#: The statuses reprocessed by default: every delivery whose outcome is not recorded yet.
UNFINISHED_STATUSES: Final = (
    DeliveryStatus.RECEIVED,
    DeliveryStatus.MALFORMED_JSON,
    DeliveryStatus.INVALID_PAYLOAD,
    DeliveryStatus.PROCESSING_ERROR,
)


@dataclass
class ReprocessReport:
    """How many deliveries ended in each status (``processed``, ``duplicate``,
    ``invalid_payload``...)."""

    counts: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def failing_statuses(self) -> list[str]:
        """The statuses of the deliveries that still have no recorded outcome, sorted."""
        return sorted(
            s for s in self.counts if s not in FINISHED_DELIVERY_STATUSES and s != "pruned"
        )

    @property
    def still_failing(self) -> int:
        """Deliveries that still have no recorded outcome."""
        return sum(self.counts[status] for status in self.failing_statuses)


def delivery_ids(
    ledger: Ledger, statuses: Iterable[DeliveryStatus] = UNFINISHED_STATUSES
) -> list[int]:
    """The ids of the stored deliveries in ``statuses``, in arrival order.

    Collected before anything is written, so no cursor stays open on a table being updated.
    """
    return sorted(
        delivery.id for status in statuses for delivery in ledger.receiver.deliveries(status=status)
    )


def reprocess_deliveries(
    ledger: Ledger,
    ids: Iterable[int],
    *,
    time_zone: str | tzinfo = "UTC",
    status_map: Mapping[str, PaymentState | str] | None = None,
    app: object | None = None,
    retries: SignalRetries | None = None,
) -> ReprocessReport:
    """Run the stored deliveries ``ids`` (see :func:`delivery_ids`) through
    :func:`~payhooks.receiver.pipeline.processing.process_stored_delivery` again, as the receiver
    would have.

    :param time_zone: ``PAYHOOKS_PAYMENT_TIME_ZONE``; a stored ``timezone`` header wins, as it
        did on arrival.
    :param status_map: ``PAYHOOKS_STATUS_MAP`` (default: the service's codes).
    :param app: the Flask app whose receivers get the signals each outcome owes, sent after
        its commit. Without it they stay owed: ``flask payhooks signals --send`` in the app,
        or the receiver's next delivery, sends them later.
    :raises ValueError: a ``time_zone`` or ``status_map`` that is not valid configuration,
        before anything is processed.
    :raises payhooks.storage.StorageUnavailableError: the ledger cannot be written; the deliveries
        processed so far stay processed.
    """
    zone = load_time_zone(time_zone)
    states = None if status_map is None else load_status_map(status_map)
    report = ReprocessReport()
    for delivery_id in ids:
        delivery = ledger.receiver.delivery(delivery_id)
        if delivery is None:
            report.counts["not_found"] += 1
            continue
        if delivery.pruned_at is not None:  # its body is in a prune's archive, not here
            report.counts["pruned"] += 1
            continue
        result = process_stored_delivery(
            ledger,
            delivery,
            time_zone=zone,
            status_map=states,
            lease=None if app is None else DEFAULT_SIGNAL_LEASE,
        )
        if app is not None:
            send_claimed(app, ledger, result.claimed, result.stored_outcomes, retries=retries)
        report.counts[str(result.status)] += 1
    return report
