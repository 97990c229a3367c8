"""Sending :mod:`payhooks.receiver.signals` for a recorded outcome, one receiver's failure at a
time.

Signals are owed until sent (the ledger's ``owed_signals``): the commit that records a new
outcome records them, :func:`send_owed_signals` runs their receivers and marks them sent.

blinker's ``send`` stops at the first receiver that raises and lets the error out, which would
turn a stored, acknowledged outcome into a 500 and skip the other receivers. Here each receiver
is called on its own: a failure is logged with its traceback and recorded on the delivery
(``ledger.record_signal_error``), and the rest still run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime

from blinker import NamedSignal

from payhooks.receiver import signals
from payhooks.receiver.pipeline.sent_marks import SentMarks
from payhooks.storage import (
    MISMATCH_STATES,
    Ledger,
    Outcome,
    PaymentState,
    ReconciliationState,
    StorageError,
)

__all__ = [
    "OnOwed",
    "OwedOutcome",
    "send_owed_signals",
    "signal_names",
    "signals_for",
]

logger = logging.getLogger("payhooks")

_NOT_PAID_OUTCOMES = frozenset({PaymentState.FAILED, PaymentState.CANCELLED})
_NOT_PAID_PAYMENTS = frozenset({ReconciliationState.FAILED, ReconciliationState.CANCELLED})

_MAX_ERROR_CHARS = 500

_BY_NAME: dict[str, NamedSignal] = {
    signal.name: signal
    for signal in (
        signals.notification_received,
        signals.payment_succeeded,
        signals.payment_failed,
        signals.payment_mismatch,
    )
}


@dataclass(frozen=True, slots=True)
class OwedOutcome:
    """An outcome whose signals are owed: what the sender needs to send them."""

    outcome: Outcome
    #: The stored outcome's id: the same every time its signals are sent, so a receiver can
    #: tell a second sending from a new outcome.
    outcome_id: int
    #: The delivery that first recorded the outcome.
    delivery_id: int
    #: The payment's state the signals were decided on.
    reconciliation: ReconciliationState
    #: The owed signals' names, in the order they are sent.
    signals: tuple[str, ...]


#: Called after the commit with an outcome whose signals are owed; it sends them and marks them
#: sent. What it returns is ignored. The receiver and ``flask payhooks reprocess`` pass the
#: app's sender (:func:`~payhooks.receiver.pipeline.signal_dispatch.send_owed_signals`).
OnOwed = Callable[[OwedOutcome], object]


def signals_for(outcome: Outcome, reconciliation: ReconciliationState) -> Iterator[NamedSignal]:
    """The signals a newly recorded outcome sends, in order.

    The payment's reconciliation state decides, not the outcome alone: an order is paid or
    not as a whole. A failed attempt (``PF`` on one transaction) of an order that another
    transaction already paid leaves the order ``paid``, so it must not send
    ``payment_failed``, which merchants connect to cancelling the order.
    """
    yield signals.notification_received
    if reconciliation in MISMATCH_STATES:
        yield signals.payment_mismatch
    elif outcome.state is PaymentState.SUCCEEDED and reconciliation is ReconciliationState.PAID:
        yield signals.payment_succeeded
    elif outcome.state in _NOT_PAID_OUTCOMES and reconciliation in _NOT_PAID_PAYMENTS:
        yield signals.payment_failed


def signal_names(outcome: Outcome, reconciliation: ReconciliationState) -> tuple[str, ...]:
    """The names of :func:`signals_for`: what the ledger keeps as owed."""
    return tuple(signal.name for signal in signals_for(outcome, reconciliation))


def send_owed_signals(
    app: object, ledger: Ledger, owed: OwedOutcome, marks: SentMarks | None = None
) -> list[str]:
    """Send the signals ``owed`` names, with ``app`` as the sender (the Flask app, for the
    receiver), then mark them sent; return the receivers' errors (empty when none).

    With ``marks`` (the receiver's), a mark with no error to record waits there for the
    process's next write (:mod:`payhooks.receiver.pipeline.sent_marks`); otherwise it is
    written at once, with the errors.

    A receiver that raises is logged and its error kept on the delivery; the others still run,
    and the signal counts as sent (it ran): only a process that dies before the mark leaves it
    owed, for the next redelivery or ``flask payhooks signals --send``. A mark that cannot be
    written is logged: the signals stay owed and will be sent again (at least once).
    """
    errors: list[str] = []
    for name in owed.signals:
        signal = _BY_NAME.get(name)
        if signal is None or signal.is_muted:
            continue
        for receiver in signal.receivers_for(app):
            try:
                receiver(
                    app,
                    outcome=owed.outcome,
                    outcome_id=owed.outcome_id,
                    delivery_id=owed.delivery_id,
                    reconciliation=owed.reconciliation,
                )
            except Exception as err:
                receiver_name = getattr(receiver, "__qualname__", repr(receiver))
                logger.exception("payhooks: a %s receiver (%s) raised", name, receiver_name)
                error = f"{name} receiver {receiver_name} raised {type(err).__name__}: {err}"
                errors.append(error[:_MAX_ERROR_CHARS])
    if marks is not None and not errors:
        marks.add(owed.outcome_id, datetime.now(UTC))
        return errors
    try:
        with ledger.transaction() if errors else nullcontext():  # one commit for all of it
            for error in errors:
                ledger.record_signal_error(owed.delivery_id, error)
            ledger.mark_signals_sent(owed.outcome_id)
    except StorageError as storage_err:
        logger.warning(
            "payhooks: could not record the signals of outcome %s as sent: %s",
            owed.outcome_id,
            storage_err.message,
        )
    return errors
