"""Steps 3 to 7 of the pipeline: store, parse, record, reconcile, signal.

:func:`receive_delivery` is the receiver's path for an authenticated delivery: parse it (pure
work, no side effects), then store the delivery *and* what came of it (the outcome and its
reconciliation and the signals it owes, or the parse error) in one ledger transaction, then
call ``on_owed`` after the commit to send the owed signals. One commit instead of two halves
the waits for the write lock and the syncs to disk, and loses nothing: the sender is answered
only after the commit, so a crash before it leaves an unanswered delivery that the service
sends again. Nothing here goes on after a failed write inside that transaction, so its writes
join it without savepoints (each one two round trips on PostgreSQL).

``payhooks reprocess`` runs stored deliveries again through :func:`process_stored_delivery`
(a status code the map lacked, a bug since fixed). Both paths share the parse, and end the same
way, so a delivery reprocessed ends exactly as it would have on arrival: the same parser and
settings, the same idempotency (an outcome already stored stays stored once), the same error
kept on the delivery, the same signals owed for an outcome seen for the first time. A new
delivery is stored by ``Ledger.record_arrival`` in fewer writes (on PostgreSQL each row once);
a stored one (a retry, a reprocess) by the general calls (``record_delivery``,
``record_outcome``, ``owe_signals``), which ``tests/storage/test_arrivals.py`` holds to the same
result.

Signals are owed until sent: a worker that dies after the commit leaves them in the ledger, and
the service's retry of the same delivery (a :attr:`ProcessedDelivery.redelivery`) sends them.

A delivery is always parsed as stored: a retry whose ``timezone`` header differs from the
stored one is parsed again with the stored header, as a reprocess would.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, tzinfo

from payhooks.receiver.payloads import PayloadError, parse_notification
from payhooks.receiver.pipeline.sent_marks import SentMarks
from payhooks.receiver.pipeline.signal_dispatch import OnOwed, OwedOutcome, signal_names
from payhooks.storage import (
    FINISHED_DELIVERY_STATUSES,
    Arrival,
    Delivery,
    DeliveryStatus,
    KeyTakenError,
    Ledger,
    Outcome,
    OwedSignal,
    PaymentState,
    ReconciliationState,
    RecordedOutcome,
    StorageError,
    StorageUnavailableError,
)

__all__ = [
    "ProcessedDelivery",
    "owed_for",
    "payload_error_text",
    "process_stored_delivery",
    "receive_delivery",
]

logger = logging.getLogger("payhooks")


@dataclass(frozen=True, slots=True)
class ProcessedDelivery:
    """How one delivery ended."""

    delivery_id: int
    #: What the delivery is now: ``processed``, ``duplicate`` or ``conflicting_outcome`` (the
    #: ledger's :attr:`payhooks.storage.RecordedOutcome.delivery_status`), or ``malformed_json``,
    #: ``invalid_payload``, ``processing_error``. For a :attr:`redelivery`, ``duplicate``:
    #: the answer, while the stored row keeps its own status.
    status: DeliveryStatus
    #: The payment's reconciliation state after the outcome was recorded (for a redelivery:
    #: that of the payment its stored outcome names); None otherwise.
    reconciliation: ReconciliationState | None = None
    #: The outcome parsed from the body, when it parsed.
    outcome: Outcome | None = None
    #: Why the body is not a notification (``malformed_json``, ``invalid_payload``).
    payload_error: PayloadError | None = None
    #: True when the same delivery (``dedupe_key`` and bytes) had already finished: it only
    #: counted one more attempt, and sent the signals still owed, if any.
    redelivery: bool = False
    #: The outcome whose signals are owed once this is committed, if any.
    owed: OwedOutcome | None = None

    @property
    def finished(self) -> bool:
        """True when the outcome is recorded: nothing is left to do for this delivery."""
        return self.status in FINISHED_DELIVERY_STATUSES


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


def _record(ledger: Ledger, delivery_id: int, parsed: _Parsed) -> ProcessedDelivery:
    """Record what ``parsed`` says on the stored delivery, and the signals a new outcome owes
    (in the caller's transaction, so that both commit or neither)."""
    if parsed.outcome is None:
        status, error = _error_of(parsed)
        ledger.mark_delivery(delivery_id, status, error=error)
        return ProcessedDelivery(delivery_id, status, payload_error=parsed.payload_error)
    outcome = parsed.outcome
    recorded = ledger.record_outcome(outcome, delivery_id=delivery_id)
    names: tuple[str, ...] = ()
    if recorded.is_new:
        names = signal_names(outcome, recorded.reconciliation)
        ledger.owe_signals(
            recorded.outcome_id,
            delivery_id=delivery_id,
            signals=names,
            reconciliation=recorded.reconciliation,
        )
    return _processed(delivery_id, recorded, outcome, names)


def _processed(
    delivery_id: int, recorded: RecordedOutcome, outcome: Outcome, names: tuple[str, ...]
) -> ProcessedDelivery:
    """How a delivery that recorded (or found stored) ``outcome`` ended: with the signals
    ``names`` owed when the outcome is new."""
    owed = None
    if recorded.is_new:
        owed = OwedOutcome(
            outcome, recorded.outcome_id, delivery_id, recorded.reconciliation, names
        )
    return ProcessedDelivery(
        delivery_id, recorded.delivery_status, recorded.reconciliation, outcome, owed=owed
    )


def _send(result: ProcessedDelivery, on_owed: OnOwed | None) -> None:
    """``on_owed`` for the signals the result owes, once it is committed."""
    if result.owed is not None and on_owed is not None:
        on_owed(result.owed)


def receive_delivery(
    ledger: Ledger,
    *,
    dedupe_key: str,
    body: bytes,
    headers: Mapping[str, str],
    time_zone: tzinfo,
    status_map: Mapping[str, PaymentState] | None,
    on_owed: OnOwed | None = None,
    key_names_content: bool = False,
    sent_marks: SentMarks | None = None,
) -> ProcessedDelivery:
    """Store an authenticated delivery with its outcome and the signals it owes (or its parse
    error) in one commit, then call ``on_owed`` to send those signals.

    The marks waiting in ``sent_marks`` (signals this process sent since its last write) are
    written first in the same commit (:mod:`payhooks.receiver.pipeline.sent_marks`).

    A ``dedupe_key`` already stored with these bytes and finished is a :attr:`redelivery`:
    one more attempt is counted, and the signals its outcome still owes (a worker died before
    sending them) are handed to ``on_owed``; nothing else happens. One stored but not finished (an
    earlier try answered 503, or an invalid payload sent again) is finished now. A body that
    is not a notification is stored with its error (``malformed_json``, ``invalid_payload``).

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
    :raises StorageUnavailableError: the ledger cannot be written now; nothing was stored,
        and the caller should answer so that the sender retries.
    :raises StorageError: not even the delivery alone could be stored; nothing was.
    """
    parsed = _parse(body, headers.get("timezone"), time_zone, status_map)

    def known() -> ProcessedDelivery:
        return _receive_known(
            ledger, dedupe_key, body, headers, parsed, time_zone, status_map, key_names_content
        )

    try:
        try:
            with _transaction(ledger, sent_marks):
                arrival = ledger.record_arrival(
                    dedupe_key=dedupe_key,
                    body=body,
                    headers=headers,
                    outcome=parsed.outcome,
                    error=None if parsed.outcome is not None else _error_of(parsed),
                    signals=signal_names,
                )
                if arrival is None:
                    result = known()
        except KeyTakenError:  # another copy stored the key meanwhile (PostgreSQL): see it
            arrival = None
            with _transaction(ledger, sent_marks):
                result = known()
    except StorageUnavailableError:
        raise  # a passing condition: the caller answers so that the sender retries
    except Exception as err:
        logger.exception("payhooks: a delivery could not be processed; storing it alone")
        return _store_failed(ledger, dedupe_key, body, headers, err, key_names_content)
    if arrival is not None:
        result = _arrived(arrival, parsed)
    _send(result, on_owed)
    return result


@contextmanager
def _transaction(ledger: Ledger, sent_marks: SentMarks | None) -> Iterator[None]:
    """The delivery's transaction, without savepoints, that first writes the marks waiting in
    ``sent_marks`` (a redelivery of their outcomes then finds them sent); they wait again if
    the transaction or its commit fails."""
    carried: AbstractContextManager[dict[int, datetime]] = (
        nullcontext({}) if sent_marks is None else sent_marks.carried()
    )
    with carried as marks, ledger.transaction(savepoints=False):
        ledger.mark_many_signals_sent(marks)
        yield


def _error_of(parsed: _Parsed) -> tuple[DeliveryStatus, str]:
    """The status and error text kept on a delivery whose body gave no outcome."""
    if parsed.payload_error is not None:
        err = parsed.payload_error
        return DeliveryStatus(err.code), payload_error_text(err)
    return DeliveryStatus.PROCESSING_ERROR, type(parsed.failure).__name__


def _arrived(arrival: Arrival, parsed: _Parsed) -> ProcessedDelivery:
    """How a new delivery, stored by ``Ledger.record_arrival``, ended."""
    if arrival.recorded is None or parsed.outcome is None:
        return ProcessedDelivery(
            arrival.delivery_id, arrival.status, payload_error=parsed.payload_error
        )
    return _processed(arrival.delivery_id, arrival.recorded, parsed.outcome, arrival.signals)


def _receive_known(
    ledger: Ledger,
    dedupe_key: str,
    body: bytes,
    headers: Mapping[str, str],
    parsed: _Parsed,
    time_zone: tzinfo,
    status_map: Mapping[str, PaymentState] | None,
    key_names_content: bool,
) -> ProcessedDelivery:
    """A delivery whose key is stored already, in the caller's transaction: a finished one
    sent again is a redelivery; one not finished (or stored apart under a key derived from
    other bytes) is finished now, parsed as stored."""
    delivery = ledger.record_delivery(
        dedupe_key=dedupe_key, body=body, headers=headers, key_names_content=key_names_content
    )
    if not delivery.is_new and delivery.status in FINISHED_DELIVERY_STATUSES:
        return _redelivery(ledger, delivery, time_zone, status_map)
    stored_zone = delivery.headers.get("timezone")
    if stored_zone != headers.get("timezone") or delivery.body != body:
        parsed = _parse(delivery.body, stored_zone, time_zone, status_map)
    return _record(ledger, delivery.id, parsed)


def _store_failed(
    ledger: Ledger,
    dedupe_key: str,
    body: bytes,
    headers: Mapping[str, str],
    err: Exception,
    key_names_content: bool,
) -> ProcessedDelivery:
    """Store the delivery with the status ``processing_error`` after its full transaction
    failed (and was rolled back); the failure's kind is kept, never its message (it could
    quote the body)."""
    with ledger.transaction(savepoints=False):
        delivery = ledger.record_delivery(
            dedupe_key=dedupe_key,
            body=body,
            headers=headers,
            key_names_content=key_names_content,
        )
        if not delivery.is_new and delivery.status in FINISHED_DELIVERY_STATUSES:
            # A twin copy finished it meanwhile; its signals are that copy's to send.
            return _redelivery(ledger, delivery, None, None)
        ledger.mark_delivery(delivery.id, DeliveryStatus.PROCESSING_ERROR, error=type(err).__name__)
    return ProcessedDelivery(delivery.id, DeliveryStatus.PROCESSING_ERROR)


def _redelivery(
    ledger: Ledger,
    delivery: Delivery,
    time_zone: tzinfo | None,
    status_map: Mapping[str, PaymentState] | None,
) -> ProcessedDelivery:
    """The answer to a finished delivery sent again: ``duplicate``, with the signals its
    outcome still owes when there are any (and ``time_zone`` is given to read it again)."""
    owed = None
    if time_zone is not None:
        owed_outcomes = owed_for(ledger, ledger.owed_signals(delivery.id), time_zone, status_map)
        owed = owed_outcomes[0] if owed_outcomes else None
    return ProcessedDelivery(
        delivery.id,
        DeliveryStatus.DUPLICATE,
        _reconciliation_of(ledger, delivery),
        redelivery=True,
        owed=owed,
    )


def owed_for(
    ledger: Ledger,
    owed: Sequence[OwedSignal],
    time_zone: tzinfo,
    status_map: Mapping[str, PaymentState] | None,
) -> list[OwedOutcome]:
    """The owed signals ``owed`` (:meth:`~payhooks.storage.Ledger.owed_signals`), grouped by
    outcome, each with its outcome read again from the delivery that recorded it, as it was
    parsed on arrival. An outcome whose delivery no longer parses (the status map changed
    since) is left owed and logged."""
    grouped: dict[int, list[OwedSignal]] = {}
    for row in owed:
        grouped.setdefault(row.outcome_id, []).append(row)
    found = []
    for outcome_id, rows in grouped.items():
        first = rows[0]
        delivery = ledger.delivery(first.delivery_id)
        if delivery is None:  # pragma: no cover - a foreign key keeps the delivery
            continue
        parsed = _parse(delivery.body, delivery.headers.get("timezone"), time_zone, status_map)
        if parsed.outcome is None:
            logger.warning("payhooks: outcome %s owes signals but no longer parses", outcome_id)
            continue
        state = ReconciliationState(first.reconciliation)
        names = tuple(row.signal for row in rows)
        found.append(OwedOutcome(parsed.outcome, outcome_id, first.delivery_id, state, names))
    return found


def _reconciliation_of(ledger: Ledger, delivery: Delivery) -> ReconciliationState | None:
    """The current state of the payment a finished delivery's stored outcome names, for the
    answer to its redelivery.

    Read from the ledger, not by parsing the body again: the stored outcome is what counts
    (for a ``conflicting_outcome`` delivery it names the payment of the first word, which may
    not be the body's), and a redelivery costs no parse.
    """
    if delivery.outcome_id is None:
        return None
    external_identifier = ledger.outcome_identifier(delivery.outcome_id)
    return None if external_identifier is None else ledger.state(external_identifier)


def process_stored_delivery(
    ledger: Ledger,
    delivery: Delivery,
    *,
    time_zone: tzinfo,
    status_map: Mapping[str, PaymentState] | None,
    on_owed: OnOwed | None = None,
) -> ProcessedDelivery:
    """Parse a stored delivery's body, record its outcome, reconcile and owe its signals in one
    commit, then call ``on_owed`` for an outcome seen for the first time
    (``payhooks reprocess``).

    A body that is not a notification marks the delivery ``malformed_json`` or
    ``invalid_payload`` with the error. Anything else that goes wrong (a bug of ours, a ledger
    failure that is not about availability) is logged with its traceback and marks the
    delivery ``processing_error``: it stays stored, so a later run can finish it.
    ``on_owed`` runs after the commit and outside that net: what it raises is its own
    business (the signal sender records its receivers' errors itself).

    :param time_zone: ``PAYHOOKS_PAYMENT_TIME_ZONE``, loaded (``load_time_zone``); the stored
        ``timezone`` header wins, as it did on arrival.
    :param status_map: ``PAYHOOKS_STATUS_MAP``, loaded (``load_status_map``); None: the
        service's codes.
    :raises StorageUnavailableError: the ledger cannot be written now; nothing was changed,
        and the caller should answer so the sender retries.
    """
    parsed = _parse(delivery.body, delivery.headers.get("timezone"), time_zone, status_map)
    try:
        with ledger.transaction(savepoints=False):
            result = _record(ledger, delivery.id, parsed)
    except StorageUnavailableError:
        raise  # a passing condition: the caller answers so that the sender retries
    except Exception as err:
        logger.exception("payhooks: delivery %s could not be processed", delivery.id)
        _mark_processing_error(ledger, delivery.id, err)
        return ProcessedDelivery(delivery.id, DeliveryStatus.PROCESSING_ERROR)
    _send(result, on_owed)
    return result


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
