"""Steps 4 to 7 of the pipeline for one stored delivery: parse, record, signal.

The receiver runs them right after storing a delivery, and ``payhooks reprocess`` runs them
again later for deliveries that did not finish (a status code the map lacked, a bug since
fixed). Both call :func:`process_stored_delivery`, so a delivery reprocessed ends exactly as it
would have on arrival: the same parser and settings, the same ledger call and idempotency (an
outcome already stored stays stored once), the same error kept on the delivery, the same
signals for an outcome seen for the first time.

Everything is read from the stored delivery (its body and its stored headers), never from a
request: a retry or a reprocess finishes exactly what was stored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import tzinfo

from receiver.payloads import PayloadError, parse_notification
from storage import (
    FINISHED_DELIVERY_STATUSES,
    Delivery,
    DeliveryStatus,
    Ledger,
    Outcome,
    PaymentState,
    ReconciliationState,
    StorageError,
    StorageUnavailableError,
)

__all__ = ["OnRecorded", "ProcessedDelivery", "payload_error_text", "process_stored_delivery"]

logger = logging.getLogger("payhooks")

#: Called after an outcome is recorded for the first time, after the commit:
#: ``(outcome, delivery_id, reconciliation)``; what it returns is ignored. The receiver and
#: ``flask payhooks reprocess`` send the app's signals from it.
OnRecorded = Callable[[Outcome, int, ReconciliationState], object]


@dataclass(frozen=True, slots=True)
class ProcessedDelivery:
    """How one stored delivery ended."""

    delivery_id: int
    #: What the delivery is now: ``processed``, ``duplicate`` or ``conflicting_outcome`` (the
    #: ledger's :attr:`storage.RecordedOutcome.delivery_status`), or ``malformed_json``,
    #: ``invalid_payload``, ``processing_error``.
    status: DeliveryStatus
    #: The payment's reconciliation state after the outcome was recorded; None otherwise.
    reconciliation: ReconciliationState | None = None
    #: The outcome parsed from the body, when it parsed.
    outcome: Outcome | None = None
    #: Why the body is not a notification (``malformed_json``, ``invalid_payload``).
    payload_error: PayloadError | None = None

    @property
    def finished(self) -> bool:
        """True when the outcome is recorded: nothing is left to do for this delivery."""
        return self.status in FINISHED_DELIVERY_STATUSES


def payload_error_text(err: PayloadError) -> str:
    """What is kept in a delivery's ``error`` for a body that is not a notification: the same
    code, message and per-field details the sender was answered with, as JSON."""
    return json.dumps({"code": err.code, "message": err.message, "details": err.details})


def process_stored_delivery(
    ledger: Ledger,
    delivery: Delivery,
    *,
    time_zone: tzinfo,
    status_map: Mapping[str, PaymentState] | None,
    on_recorded: OnRecorded | None = None,
) -> ProcessedDelivery:
    """Parse ``delivery``'s body, record its outcome and reconcile, then call ``on_recorded``
    for an outcome seen for the first time.

    A body that is not a notification marks the delivery ``malformed_json`` or
    ``invalid_payload`` with the error. Anything else that goes wrong (a bug of ours, a ledger
    failure that is not about availability) is logged with its traceback and marks the
    delivery ``processing_error``: it stays stored, so a retry or ``payhooks reprocess`` can
    finish it. ``on_recorded`` runs after the commit and outside that net: what it raises is
    its own business (the signal sender records its receivers' errors itself).

    :param time_zone: ``PAYHOOKS_PAYMENT_TIME_ZONE``, loaded (``load_time_zone``); the stored
        ``timezone`` header wins, as it did on arrival.
    :param status_map: ``PAYHOOKS_STATUS_MAP``, loaded (``load_status_map``); None: the
        service's codes.
    :raises StorageUnavailableError: the ledger cannot be written now; nothing was changed,
        and the caller should answer so the sender retries.
    """
    try:
        try:
            outcome = parse_notification(
                delivery.body,
                time_zone=time_zone,
                delivery_time_zone=delivery.headers.get("timezone"),
                status_map=status_map,
            )
        except PayloadError as err:
            ledger.mark_delivery(delivery.id, err.code, error=payload_error_text(err))
            return ProcessedDelivery(delivery.id, DeliveryStatus(err.code), payload_error=err)
        recorded = ledger.record_outcome(outcome, delivery_id=delivery.id)
    except StorageUnavailableError:
        raise  # a passing condition: the caller answers so that the sender retries
    except Exception as err:
        logger.exception("payhooks: delivery %s could not be processed", delivery.id)
        _mark_processing_error(ledger, delivery.id, err)
        return ProcessedDelivery(delivery.id, DeliveryStatus.PROCESSING_ERROR)

    if recorded.is_new and on_recorded is not None:
        on_recorded(outcome, delivery.id, recorded.reconciliation)
    return ProcessedDelivery(
        delivery.id, recorded.delivery_status, recorded.reconciliation, outcome
    )


def _mark_processing_error(ledger: Ledger, delivery_id: int, err: Exception) -> None:
    """Keep the failure's kind on the delivery (never its message: it could quote the body);
    a ledger that cannot take even that only costs the note, not the stored delivery."""
    try:
        ledger.mark_delivery(delivery_id, DeliveryStatus.PROCESSING_ERROR, error=type(err).__name__)
    except StorageError as storage_err:
        logger.warning(
            "payhooks: could not mark delivery %s as processing_error: %s",
            delivery_id,
            storage_err.message,
        )
