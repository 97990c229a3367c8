"""Sending :mod:`payhooks.receiver.signals` for a recorded outcome, one receiver's failure at a
time.

blinker's ``send`` stops at the first receiver that raises and lets the error out, which would
turn a stored, acknowledged outcome into a 500 and skip the other receivers. Here each receiver
is called on its own: a failure is logged with its traceback and recorded on the delivery
(``ledger.record_signal_error``), and the rest still run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from blinker import NamedSignal
from payhooks.receiver import signals
from payhooks.storage import (
    MISMATCH_STATES,
    Ledger,
    Outcome,
    PaymentState,
    ReconciliationState,
    StorageError,
)

__all__ = ["send_outcome_signals", "signals_for"]

logger = logging.getLogger("payhooks")

_NOT_PAID_OUTCOMES = frozenset({PaymentState.FAILED, PaymentState.CANCELLED})
_NOT_PAID_PAYMENTS = frozenset({ReconciliationState.FAILED, ReconciliationState.CANCELLED})

_MAX_ERROR_CHARS = 500


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


def send_outcome_signals(
    app: object,
    ledger: Ledger,
    outcome: Outcome,
    delivery_id: int,
    reconciliation: ReconciliationState,
) -> list[str]:
    """Send every signal for ``outcome`` with ``app`` as the sender (the Flask app, for the
    receiver); return the errors recorded (empty when none)."""
    errors: list[str] = []
    for signal in signals_for(outcome, reconciliation):
        if signal.is_muted:
            continue
        for receiver in signal.receivers_for(app):
            try:
                receiver(
                    app, outcome=outcome, delivery_id=delivery_id, reconciliation=reconciliation
                )
            except Exception as err:
                name = getattr(receiver, "__qualname__", repr(receiver))
                logger.exception("payhooks: a %s receiver (%s) raised", signal.name, name)
                error = f"{signal.name} receiver {name} raised {type(err).__name__}: {err}"
                errors.append(error[:_MAX_ERROR_CHARS])
    for error in errors:
        try:
            ledger.record_signal_error(delivery_id, error)
        except StorageError as storage_err:
            logger.warning(
                "payhooks: could not record a signal error on delivery %s: %s",
                delivery_id,
                storage_err.message,
            )
    return errors
