"""Steps 3 to 6 of the pipeline: parse once, then store and claim in one transaction.

:func:`receive_delivery` is the receiver's one path for an authenticated delivery: parse the
body (pure work, no side effects), then in one ledger transaction store the delivery and what
came of it (the outcome, the payment's new reconciliation row and the signals the change owes,
or the parse error), and claim the owed signals of its outcome for this process. The caller
answers after the commit and runs the claimed signals' receivers after the answer
(:func:`~payhooks.receiver.pipeline.signal_dispatch.send_claimed`). Nothing is lost by
answering first: what is owed is committed, and a claim is a lease, so signals a dying process
held are sent by the next sender once it passes.

``payhooks reprocess`` runs stored deliveries again through :func:`process_stored_delivery`,
the same parse and the same record, so a delivery reprocessed ends as it would have on arrival.
A delivery is always parsed as stored: a retry whose ``timezone`` header or bytes differ from
the stored ones is parsed again from what was stored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta, tzinfo
from functools import partial
from typing import TYPE_CHECKING

from payhooks.receiver.payloads import PayloadError, parse_notification
from payhooks.storage import (
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

if TYPE_CHECKING:
    from payhooks.storage.rows import OwedSignal

__all__ = [
    "DEFAULT_SIGNAL_LEASE",
    "ProcessedDelivery",
    "payload_error_text",
    "process_stored_delivery",
    "receive_delivery",
]

logger = logging.getLogger("payhooks")

#: How long a claim on owed signals lasts by default (``PAYHOOKS_SIGNALS_LEASE_SECONDS``).
DEFAULT_SIGNAL_LEASE = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class ProcessedDelivery:
    """How one delivery ended."""

    delivery_id: int
    #: What the delivery is now: ``processed``, ``duplicate`` or ``conflicting_outcome`` (the
    #: ledger's :attr:`payhooks.storage.rows.RecordedOutcome.delivery_status`), or
    #: ``malformed_json``, ``invalid_payload``, ``processing_error``. For a :attr:`redelivery`,
    #: ``duplicate``: the answer, while the stored row keeps its own status.
    status: DeliveryStatus
    #: The payment's reconciliation state after the outcome was recorded (for a redelivery:
    #: that of the payment its stored outcome names); None otherwise.
    reconciliation: ReconciliationState | None = None
    #: The outcome parsed from the body, when it parsed.
    outcome: Outcome | None = None
    #: Why the body is not a notification (``malformed_json``, ``invalid_payload``).
    payload_error: PayloadError | None = None
    #: True when the same delivery (``dedupe_key`` and bytes) had already finished: it only
    #: counted one more attempt.
    redelivery: bool = False
    #: The owed signals this process claimed in the delivery's commit: its to send.
    claimed: tuple[OwedSignal, ...] = ()
    #: The id the parsed :attr:`outcome` was stored under, when this delivery stored it first.
    new_outcome_id: int | None = None

    @property
    def finished(self) -> bool:
        """True when the outcome is recorded: nothing is left to do for this delivery."""
        return self.status in FINISHED_DELIVERY_STATUSES

    @property
    def stored_outcomes(self) -> dict[int, Outcome]:
        """The outcome this delivery stored first, by its id: its signals are sent with it
        rather than with the same outcome read back from the ledger."""
        if self.new_outcome_id is None or self.outcome is None:
            return {}
        return {self.new_outcome_id: self.outcome}


def payload_error_text(err: PayloadError) -> str:
    """What is kept in a delivery's ``error`` for a body that is not a notification: the same
    code, message and per-field details the sender was answered with, as JSON."""
    return json.dumps({"code": err.code, "message": err.message, "details": err.details})


@dataclass(frozen=True, slots=True)
class _Parsed:
    """What a body parsed to: exactly one of the three is set."""

    outcome: Outcome | None = None
    payload_error: PayloadError | None = None
    #: An exception the parser should never raise: a bug of ours, logged where it happened.
    failure: Exception | None = None


def _parse(
    body: bytes,
    delivery_time_zone: str | None,
    time_zone: tzinfo,
    status_map: Mapping[str, PaymentState] | None,
) -> _Parsed:
    try:
        return _Parsed(
            outcome=parse_notification(
                body,
                time_zone=time_zone,
                delivery_time_zone=delivery_time_zone,
                status_map=status_map,
            )
        )
    except PayloadError as err:
        return _Parsed(payload_error=err)
    except Exception as err:
        logger.exception("payhooks: a delivery's body could not be parsed")
        return _Parsed(failure=err)


def _record(
    ledger: Ledger, delivery_id: int, parsed: _Parsed, lease: timedelta | None
) -> ProcessedDelivery:
    """Record what ``parsed`` says on the stored delivery and (with a ``lease``) claim its
    outcome's owed signals, in the caller's transaction (both commit or neither)."""
    if parsed.outcome is None:
        err = parsed.payload_error
        if err is not None:
            status, error = DeliveryStatus(err.code), payload_error_text(err)
        else:
            status, error = DeliveryStatus.PROCESSING_ERROR, type(parsed.failure).__name__
        named = None if err is None else err.external_identifier
        ledger.receiver.mark_delivery(delivery_id, status, error=error, external_identifier=named)
        return ProcessedDelivery(delivery_id, status, payload_error=err)
    recorded = ledger.receiver.record_outcome(parsed.outcome, delivery_id=delivery_id)
    claimed = [] if lease is None else ledger.signals.claim([recorded.outcome_id], lease=lease)
    return ProcessedDelivery(
        delivery_id,
        recorded.delivery_status,
        recorded.reconciliation,
        parsed.outcome,
        claimed=tuple(claimed),
        new_outcome_id=recorded.outcome_id if recorded.is_new else None,
    )


def receive_delivery(
    ledger: Ledger,
    *,
    dedupe_key: str,
    body: bytes,
    headers: Mapping[str, str],
    time_zone: tzinfo,
    status_map: Mapping[str, PaymentState] | None,
    key_names_content: bool = False,
    lease: timedelta = DEFAULT_SIGNAL_LEASE,
) -> ProcessedDelivery:
    """Store an authenticated delivery with its outcome, the payment's new state and the
    signals it owes (or its parse error) in one commit, claiming those signals for the caller
    to send after it answers.

    A ``dedupe_key`` already stored with these bytes and finished is a :attr:`redelivery`:
    one more attempt is counted, and its outcome's owed signals that nobody holds are claimed
    (a process died before sending them). One stored but not finished (an earlier try answered
    503, or an invalid payload sent again) is finished now. A body that is not a notification
    is stored with its error (``malformed_json``, ``invalid_payload``).

    When something other than the ledger's availability fails (a bug in the parser, a fault of
    the SQLite file), the delivery is still stored, in a commit of its own, with the status
    ``processing_error``: a retry or ``payhooks reprocess`` finishes it later.

    :param headers: the headers to store with the delivery (lower-case names); its
        ``timezone`` dates ``payment_time``.
    :param time_zone: ``PAYHOOKS_PAYMENT_TIME_ZONE``, loaded (``load_time_zone``).
    :param status_map: ``PAYHOOKS_STATUS_MAP``, loaded (``load_status_map``); None: the
        service's codes.
    :param key_names_content: ``dedupe_key`` is the digest of a signed string that
        determines the body (:attr:`payhooks.verify.VerifiedDelivery.signed_digest`): a body
        laid out otherwise under a known key is that delivery again, and the stored body is
        the one parsed.
    :param lease: how long the claim on the owed signals holds off other senders.
    :raises StorageUnavailableError: the ledger cannot be written now; nothing was stored,
        and the caller should answer so that the sender retries.
    :raises StorageError: not even the delivery alone could be stored; nothing was.
    """
    parsed = _parse(body, headers.get("timezone"), time_zone, status_map)
    store = partial(
        ledger.receiver.record_delivery,
        dedupe_key=dedupe_key,
        body=body,
        headers=headers,
        key_names_content=key_names_content,
    )
    try:
        with ledger.transaction(savepoints=False):
            delivery = store()
            if _finished(delivery):
                return _redelivery(ledger, delivery, lease)
            assert delivery.body is not None  # read whole
            assert delivery.headers is not None
            stored_zone = delivery.headers.get("timezone")
            if stored_zone != headers.get("timezone") or delivery.body != body:
                parsed = _parse(delivery.body, stored_zone, time_zone, status_map)
            return _record(ledger, delivery.id, parsed, lease)
    except StorageUnavailableError:
        raise  # a passing condition: the caller answers so that the sender retries
    except Exception as err:
        logger.exception("payhooks: a delivery could not be processed; storing it alone")
        return _store_failed(ledger, store, err)


def _finished(delivery: Delivery) -> bool:
    """A delivery stored before and finished: this one is a redelivery of it."""
    return not delivery.is_new and delivery.status in FINISHED_DELIVERY_STATUSES


def _store_failed(
    ledger: Ledger, store: Callable[[], Delivery], err: Exception
) -> ProcessedDelivery:
    """Store the delivery (``store``) with the status ``processing_error`` after its full
    transaction failed (and was rolled back); the failure's kind is kept, never its message
    (it could quote the body)."""
    with ledger.transaction(savepoints=False):
        delivery = store()
        if _finished(delivery):
            # A twin copy finished it meanwhile; its signals are that copy's to send.
            return _redelivery(ledger, delivery, None)
        ledger.receiver.mark_delivery(
            delivery.id, DeliveryStatus.PROCESSING_ERROR, error=type(err).__name__
        )
    return ProcessedDelivery(delivery.id, DeliveryStatus.PROCESSING_ERROR)


def _redelivery(ledger: Ledger, delivery: Delivery, lease: timedelta | None) -> ProcessedDelivery:
    """The answer to a finished delivery sent again: ``duplicate``, with its outcome's owed
    signals that nobody holds claimed (when ``lease`` is given), and the current state of the
    payment its stored outcome names (read, not parsed again: for a ``conflicting_outcome``
    delivery it is the payment of the first word)."""
    claimed: list[OwedSignal] = []
    state = None
    if delivery.outcome_id is not None:
        if lease is not None:
            claimed = ledger.signals.claim([delivery.outcome_id], lease=lease)
        identifier = ledger.receiver.outcome_identifier(delivery.outcome_id)
        state = None if identifier is None else ledger.state(identifier)
    return ProcessedDelivery(
        delivery.id, DeliveryStatus.DUPLICATE, state, redelivery=True, claimed=tuple(claimed)
    )


def process_stored_delivery(
    ledger: Ledger,
    delivery: Delivery,
    *,
    time_zone: tzinfo,
    status_map: Mapping[str, PaymentState] | None,
    lease: timedelta | None = DEFAULT_SIGNAL_LEASE,
) -> ProcessedDelivery:
    """Parse a stored delivery's body, record its outcome and (with a ``lease``) claim its owed
    signals in one commit (``payhooks reprocess``); the caller sends what was claimed. Without
    a lease they stay owed for the next sender.

    A body that is not a notification marks the delivery ``malformed_json`` or
    ``invalid_payload`` with the error. Anything else that goes wrong (a bug of ours, a ledger
    failure that is not about availability) is logged with its traceback and marks the
    delivery ``processing_error``: it stays stored, so a later run can finish it.

    :param time_zone: ``PAYHOOKS_PAYMENT_TIME_ZONE``, loaded (``load_time_zone``); the stored
        ``timezone`` header wins, as it did on arrival.
    :param status_map: ``PAYHOOKS_STATUS_MAP``, loaded (``load_status_map``); None: the
        service's codes.
    :raises StorageUnavailableError: the ledger cannot be written now; nothing was changed.
    """
    assert delivery.body is not None  # read whole
    assert delivery.headers is not None
    parsed = _parse(delivery.body, delivery.headers.get("timezone"), time_zone, status_map)
    try:
        with ledger.transaction(savepoints=False):
            return _record(ledger, delivery.id, parsed, lease)
    except StorageUnavailableError:
        raise  # a passing condition: the caller answers so that the sender retries
    except Exception as err:
        logger.exception("payhooks: delivery %s could not be processed", delivery.id)
        _mark_processing_error(ledger, delivery.id, err)
        return ProcessedDelivery(delivery.id, DeliveryStatus.PROCESSING_ERROR)


def _mark_processing_error(ledger: Ledger, delivery_id: int, err: Exception) -> None:
    """Keep the failure's kind on the delivery (never its message: it could quote the body);
    a ledger that cannot take even that only costs the note, not the stored delivery."""
    try:
        ledger.receiver.mark_delivery(
            delivery_id, DeliveryStatus.PROCESSING_ERROR, error=type(err).__name__
        )
    except StorageError as storage_err:
        logger.warning(
            "payhooks: could not mark delivery %s as processing_error: %s",
            delivery_id,
            storage_err.message,
        )
