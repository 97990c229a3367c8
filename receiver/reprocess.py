"""Running stored deliveries through parsing again (``payhooks reprocess``).

A delivery that could not be parsed (``invalid_payload`` with a status map that lacked a code,
``processing_error`` after a bug) keeps its raw body in the ledger. Once the configuration or
payhooks is fixed, reprocessing parses each such body again and records its outcome, exactly as
the receiver would have: the same parser, the same ledger call, the same idempotency (an outcome
already stored stays stored once). Its signature was verified when it arrived.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from receiver.payloads import PayloadError, load_status_map, load_time_zone, parse_notification
from storage import DeliveryStatus, Ledger, Outcome, PaymentState, ReconciliationState

__all__ = [
    "UNFINISHED_STATUSES",
    "OnRecorded",
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

#: Called for each outcome recorded for the first time: (outcome, delivery id, state).
OnRecorded = Callable[[Outcome, int, ReconciliationState], None]


@dataclass
class ReprocessReport:
    """How many deliveries ended in each status (``processed``, ``duplicate``,
    ``invalid_payload``...)."""

    counts: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def still_failing(self) -> int:
        """Deliveries that still have no recorded outcome."""
        return sum(
            count
            for status, count in self.counts.items()
            if status not in (DeliveryStatus.PROCESSED, DeliveryStatus.DUPLICATE)
        )


def delivery_ids(
    ledger: Ledger, statuses: Iterable[DeliveryStatus] = UNFINISHED_STATUSES
) -> list[int]:
    """The ids of the stored deliveries in ``statuses``, in arrival order.

    Collected before anything is written, so no cursor stays open on a table being updated.
    """
    return sorted(
        delivery.id for status in statuses for delivery in ledger.deliveries(status=status)
    )


def reprocess_deliveries(
    ledger: Ledger,
    ids: Iterable[int],
    *,
    time_zone: str = "UTC",
    status_map: Mapping[str, PaymentState | str] | None = None,
    on_recorded: OnRecorded | None = None,
) -> ReprocessReport:
    """Parse the stored deliveries ``ids`` again (see :func:`delivery_ids`) and record what
    each says, as the receiver would have.

    :param time_zone: ``PAYHOOKS_PAYMENT_TIME_ZONE``; a stored ``timezone`` header wins, as it
        did on arrival.
    :param status_map: ``PAYHOOKS_STATUS_MAP`` (default: the service's codes).
    :param on_recorded: called after each outcome recorded for the first time (the CLI sends
        the app's signals from it).
    :raises ValueError: a ``time_zone`` or ``status_map`` that is not valid configuration.
    """
    states = None if status_map is None else load_status_map(status_map)
    load_time_zone(time_zone)
    report = ReprocessReport()
    for delivery_id in ids:
        delivery = ledger.delivery(delivery_id)
        if delivery is None:
            report.counts["not_found"] += 1
            continue
        try:
            outcome = parse_notification(
                delivery.body,
                time_zone=time_zone,
                delivery_time_zone=delivery.headers.get("timezone"),
                status_map=states,
            )
        except PayloadError as err:
            error = json.dumps({"code": err.code, "message": err.message, "details": err.details})
            ledger.mark_delivery(delivery_id, err.code, error=error)
            report.counts[err.code] += 1
        else:
            recorded = ledger.record_outcome(outcome, delivery_id=delivery_id)
            report.counts[str(recorded.delivery_status)] += 1
            if recorded.is_new and on_recorded is not None:
                on_recorded(outcome, delivery_id, recorded.reconciliation)
    return report
