"""Sending the owed :mod:`payhooks.receiver.signals` that this process has claimed.

The ledger decides which signals an outcome owes and stores them in the commit that records it
(:mod:`payhooks.storage.rules`); a sender claims them there, with a lease, before it runs any
receiver (``Ledger.claim_signals``), so no two senders run one outcome's receivers at the same
time. :func:`send_claimed` runs the receivers of what was claimed and marks it sent.

blinker's ``send`` stops at the first receiver that raises and lets the error out, which would
skip the other receivers. Here each receiver is called on its own: a failure is logged with its
traceback and kept with the signal (and on the delivery's ``signal_error``), and the rest still
run. A signal counts as sent once its receivers ran, failed or not.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import timedelta
from itertools import groupby

from blinker import NamedSignal

from payhooks.receiver import signals
from payhooks.storage import Ledger, Outcome, OwedSignal, ReconciliationState, StorageError

__all__ = ["Sweeper", "send_claimed", "sweep_unclaimed"]

logger = logging.getLogger("payhooks")

_MAX_ERROR_CHARS = 500
#: How many outcomes' forgotten signals one request sends at most, after its own.
SWEEP_LIMIT = 20

_BY_NAME: dict[str, NamedSignal] = {
    signal.name: signal
    for signal in (
        signals.notification_received,
        signals.payment_succeeded,
        signals.payment_failed,
        signals.payment_mismatch,
    )
}


def _run_receivers(app: object, signal: NamedSignal, **kwargs: object) -> list[str]:
    """Every receiver of ``signal`` for ``app``, each on its own; their errors."""
    errors: list[str] = []
    for receiver in signal.receivers_for(app):
        try:
            receiver(app, **kwargs)
        except Exception as err:
            name = getattr(receiver, "__qualname__", repr(receiver))
            logger.exception("payhooks: a %s receiver (%s) raised", signal.name, name)
            errors.append(f"{signal.name} receiver {name} raised {type(err).__name__}: {err}")
    return errors


def send_claimed(
    app: object,
    ledger: Ledger,
    claimed: Iterable[OwedSignal],
    known: Mapping[int, Outcome] | None = None,
) -> dict[str, str]:
    """Run the receivers of each claimed signal, with ``app`` as the sender, outcome by
    outcome in sending order, then mark them sent; return the errors by signal name (empty
    when none). An outcome in ``known`` (by id: what the caller just stored) is sent as it is;
    any other is read from the ledger.

    A mark that cannot be written is logged: the signals stay owed and are sent again once
    the lease passes (at least once).
    """
    all_errors: dict[str, str] = {}
    for outcome_id, group in groupby(claimed, key=lambda s: s.outcome_id):
        owed = list(group)
        errors: dict[str, str] = {}
        try:
            outcome = (known or {}).get(outcome_id) or ledger.receiver.outcome(outcome_id)
        except StorageError as err:
            logger.warning("payhooks: could not read outcome %s: %s", outcome_id, err.message)
            continue
        if outcome is None:  # pragma: no cover - an owed signal's outcome is stored
            continue
        for item in owed:
            signal = _BY_NAME.get(item.signal)
            if signal is None or signal.is_muted:
                continue
            found = _run_receivers(
                app,
                signal,
                outcome=outcome,
                outcome_id=outcome_id,
                delivery_id=item.delivery_id,
                reconciliation=ReconciliationState(item.reconciliation),
            )
            if found:
                errors[item.signal] = "\n".join(found)[:_MAX_ERROR_CHARS]
        try:
            ledger.signals.mark_sent(owed, errors=errors)
        except StorageError as err:
            logger.warning(
                "payhooks: could not record the signals of outcome %s as sent: %s",
                outcome_id,
                err.message,
            )
        all_errors.update(errors)
    return all_errors


class Sweeper:
    """When a process last looked for signals nobody holds: it looks at most once per
    ``interval`` (the lease, up to 5 s), for a lease is minutes long and every delivery would
    otherwise pay a read for it."""

    def __init__(self, lease: timedelta) -> None:
        self.interval = min(lease.total_seconds(), 5.0)
        self._last = float("-inf")
        self._lock = threading.Lock()

    def due(self) -> bool:
        """True (and the clock restarted) when the interval has passed since the last look."""
        now = time.monotonic()
        with self._lock:
            if now - self._last < self.interval:
                return False
            self._last = now
            return True


def sweep_unclaimed(app: object, ledger: Ledger, *, lease: timedelta) -> int:
    """Send the signals nobody holds (a sender died holding them past its lease, or a
    registration owed them with nobody there to send), up to :data:`SWEEP_LIMIT` outcomes';
    how many signals. A read first, so that a ledger with nothing forgotten pays no write."""
    try:
        if not ledger.signals.has_unclaimed():
            return 0
        claimed = ledger.signals.claim(None, lease=lease, limit=SWEEP_LIMIT)
    except StorageError as err:
        logger.warning("payhooks: could not claim forgotten signals: %s", err.message)
        return 0
    send_claimed(app, ledger, claimed)
    return len(claimed)
