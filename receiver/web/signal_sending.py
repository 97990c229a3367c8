"""When the serving processes send owed signals: after a delivery's answer, and on a timer.

After a delivery has been answered, its claimed signals' receivers run, then (at most every
few seconds per process) whatever is due that nobody holds. A light timer per process
(:class:`~payhooks.receiver.pipeline.RetryTimer`, started at the process's first request)
sends due retries while no delivery arrives. Neither lets an error escape into the server.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Final

from flask import Flask, current_app

from payhooks.receiver.pipeline import RetryTimer, has_receivers, send_claimed, sweep_unclaimed
from payhooks.receiver.state import ReceiverState, receiver_state
from payhooks.storage import Outcome, StorageError

if TYPE_CHECKING:
    from payhooks.storage.rows import OwedSignal

__all__ = ["RETRY_TIMER_KEY", "install_retry_timer", "send_after_answer", "send_due"]

logger = logging.getLogger("payhooks")

#: Where the app's :class:`RetryTimer` is kept in ``app.extensions``.
RETRY_TIMER_KEY: Final = "payhooks.retry_timer"


def send_after_answer(
    app: Flask,
    state: ReceiverState,
    claimed: tuple[OwedSignal, ...],
    known: Mapping[int, Outcome],
) -> None:
    """After the answer has gone out: run the receivers of the signals this delivery claimed,
    then of any due that nobody holds (a sender that died, a registration's, a retry). A slow
    receiver never delays the acknowledgment, so it never provokes the service's retry."""
    with app.app_context():
        try:
            ledger = state.ledger
            send_claimed(app, ledger, claimed, known, retries=state.signal_retries)
            if state.sweeper.due():
                sweep_unclaimed(app, ledger, lease=state.signal_lease, retries=state.signal_retries)
        except Exception:  # the answer is sent: nothing may escape into the server
            logger.exception("payhooks: sending signals failed; they stay owed")


def send_due(app: Flask) -> None:
    """Send what is due and nobody holds (the timer's look). A ledger that cannot be opened
    now is a warning line, not a traceback every interval: the next look tries again. An app
    with no receiver connected takes nothing (another app ships)."""
    if not has_receivers(app):
        return
    with app.app_context():
        state = receiver_state(app)
        try:
            ledger = state.ledger
        except StorageError as err:
            logger.warning("payhooks: cannot look for due signal retries: %s", err.message)
            return
        sweep_unclaimed(app, ledger, lease=state.signal_lease, retries=state.signal_retries)


def _tick(app_ref: weakref.ref[Flask]) -> bool:
    """The timer's look, for as long as its app exists: the timer holds no strong reference,
    so an app a process drops (a test's, a bench's) takes its timer with it."""
    app = app_ref()
    if app is None:
        return False
    send_due(app)
    return True


def _start_timer() -> None:
    """Before each request: start this process's timer once (not in an app under test, whose
    tests send what they mean to send, nor in an app with no receiver connected)."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    timer: RetryTimer = app.extensions[RETRY_TIMER_KEY]
    if not app.testing and not timer.running and has_receivers(app):
        timer.ensure_started()


def install_retry_timer(app: Flask, state: ReceiverState) -> RetryTimer:
    """Give ``app`` its timer, started by the first request each process serves."""
    timer = RetryTimer(state.retry_poll_seconds, partial(_tick, weakref.ref(app)))
    app.extensions[RETRY_TIMER_KEY] = timer
    app.before_request(_start_timer)
    return timer
