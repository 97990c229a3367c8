"""Sending the owed :mod:`payhooks.receiver.signals` that this process has claimed.

The ledger decides which signals an outcome owes and stores them in the commit that records it
(:mod:`payhooks.storage.rules`); a sender claims them there, with a lease, before it runs any
receiver (``Ledger.signals.claim``), so no two senders run one outcome's receivers at the same
time. :func:`send_claimed` runs the receivers of what was claimed and records the round.

blinker's ``send`` stops at the first receiver that raises and lets the error out, which would
skip the other receivers. Here each receiver is called on its own, under a stable name (its
module and qualified name): a failure is logged with its traceback and recorded, and the rest
still run. A signal is owed until every receiver connected to it has returned: one whose
receiver raised is tried again after a backoff (:class:`~payhooks.receiver.signal_retries.
SignalRetries`), running only the receivers that have not returned, and parked after its last
allowed round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import groupby
from typing import TYPE_CHECKING, Any

from blinker import NamedSignal

from payhooks.receiver import signals
from payhooks.receiver.signal_retries import SignalRetries
from payhooks.storage import (
    Ledger,
    Outcome,
    ReceiverRun,
    ReconciliationState,
    SignalRound,
    StorageError,
)

if TYPE_CHECKING:
    from payhooks.storage.rows import OwedSignal

__all__ = [
    "SendReport",
    "Sweeper",
    "error_text",
    "has_receivers",
    "receiver_name",
    "send_claimed",
    "send_owed",
    "sweep_unclaimed",
]

logger = logging.getLogger("payhooks")

_MAX_ERROR_CHARS = 500
#: How many outcomes' forgotten or due signals one request sends at most, after its own.
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


def has_receivers(app: object) -> bool:
    """Whether any receiver is connected to a payment signal for ``app``: an app without one
    (a checkout app that only registers payments) must not take owed signals from the one that
    ships them, for it would record them sent with nothing run."""
    return any(bool(list(signal.receivers_for(app))) for signal in _BY_NAME.values())


def receiver_name(receiver: Callable[..., Any]) -> str:
    """A receiver's stable name: its module and qualified name, the same in every process and
    after a restart (``shop.create_app.<locals>.ship``)."""
    target = getattr(receiver, "__func__", receiver)
    module = getattr(target, "__module__", None) or type(target).__module__
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}.{qualname}"


def _named_receivers(app: object, signal: NamedSignal) -> list[tuple[str, Callable[..., Any]]]:
    """The signal's receivers for ``app`` under stable names; a second receiver with the same
    name (one closure connected twice) is told apart by ``#2``, ``#3``... in connection order."""
    named: list[tuple[str, Callable[..., Any]]] = []
    seen: dict[str, int] = {}
    for receiver in signal.receivers_for(app):
        name = receiver_name(receiver)
        seen[name] = seen.get(name, 0) + 1
        named.append((name if seen[name] == 1 else f"{name}#{seen[name]}", receiver))
    return named


@dataclass
class SendReport:
    """What one sending did, counted as a person reads it: receivers run and how each ended,
    signals now sent, waiting for a retry, parked; deliveries whose signals ran."""

    receivers_run: int = 0
    returned: int = 0
    raised: int = 0
    signals_sent: int = 0
    signals_retrying: int = 0
    signals_parked: int = 0
    deliveries: set[int] = field(default_factory=set)
    #: What receivers raised, by signal name (the last of each).
    errors: dict[str, str] = field(default_factory=dict)

    def add(self, other: SendReport) -> None:
        """Fold another sending's counts into this one."""
        self.receivers_run += other.receivers_run
        self.returned += other.returned
        self.raised += other.raised
        self.signals_sent += other.signals_sent
        self.signals_retrying += other.signals_retrying
        self.signals_parked += other.signals_parked
        self.deliveries |= other.deliveries
        self.errors.update(other.errors)

    @property
    def ran(self) -> bool:
        """Whether any receiver ran."""
        return self.receivers_run > 0

    def describe(self) -> str:
        """One sentence: ``ran 2 receivers for 2 deliveries: 1 returned, 1 raised again
        (parked)``; what a sending with no receiver to run did, said as such."""
        deliveries = len(self.deliveries)
        if not self.ran:
            if self.signals_sent:
                return (
                    f"no receiver left to run; {self.signals_sent} signal(s) of {deliveries} "
                    "delivery(ies) recorded as sent"
                )
            return "nothing was run"
        said = (
            f"ran {self.receivers_run} receiver(s) for {deliveries} delivery(ies): "
            f"{self.returned} returned, {self.raised} raised"
        )
        later = []
        if self.signals_retrying:
            later.append(f"{self.signals_retrying} signal(s) will be retried")
        if self.signals_parked:
            later.append(f"{self.signals_parked} signal(s) parked")
        return said + (f" ({', '.join(later)})" if later else "")


def error_text(err: BaseException) -> str:
    """What a receiver raised, as the ledger can keep it on either engine: its type and
    message, shortened, with no NUL (PostgreSQL's text refuses one) and no lone surrogate
    (neither engine can encode one); a message that cannot be read is said so. A round whose
    error could not be stored would run again every lease, never parking."""
    try:
        text = f"{type(err).__name__}: {err}"
    except Exception:  # an exception whose __str__ raises
        text = f"{type(err).__name__}: (its message could not be read)"
    text = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    return text[:_MAX_ERROR_CHARS]


def _run(
    app: object, name: str, receiver: Callable[..., Any], signal: str, **kwargs: object
) -> ReceiverRun:
    started, clock = datetime.now().astimezone(), time.perf_counter()
    try:
        receiver(app, **kwargs)
    except Exception as err:
        elapsed = int((time.perf_counter() - clock) * 1000)
        logger.exception("payhooks: a %s receiver (%s) raised", signal, name)
        return ReceiverRun(name, started, elapsed, error_text(err))
    return ReceiverRun(name, started, int((time.perf_counter() - clock) * 1000))


def _round(
    app: object,
    item: OwedSignal,
    outcome: Outcome,
    returned: set[str],
    retries: SignalRetries,
) -> SignalRound:
    """Run the receivers of one claimed signal that have not returned for it yet."""
    started = datetime.now().astimezone()
    signal = _BY_NAME.get(item.signal)
    if signal is None or signal.is_muted:
        return SignalRound(item, started, ())
    runs = tuple(
        _run(
            app,
            name,
            receiver,
            item.signal,
            outcome=outcome,
            outcome_id=item.outcome_id,
            delivery_id=item.delivery_id,
            reconciliation=ReconciliationState(item.reconciliation),
        )
        for name, receiver in _named_receivers(app, signal)
        if name not in returned
    )
    if all(run.returned for run in runs):
        return SignalRound(item, started, runs)
    retry_at = retries.retry_at(item.attempts + 1, datetime.now().astimezone())
    return SignalRound(item, started, runs, retry_at)


def send_claimed(
    app: object,
    ledger: Ledger,
    claimed: Iterable[OwedSignal],
    known: Mapping[int, Outcome] | None = None,
    *,
    retries: SignalRetries | None = None,
) -> SendReport:
    """Run the receivers still owed of each claimed signal, with ``app`` as the sender,
    outcome by outcome in sending order, then record the round (one commit per outcome);
    what ran and how it ended. An outcome in ``known`` (by id: what the caller just stored) is
    sent as it is; any other is read from the ledger.

    A round that cannot be recorded is logged: the signals stay owed and are sent again once
    the lease passes (at least once).
    """
    retries = retries or SignalRetries()
    report = SendReport()
    claimed = list(claimed)
    try:
        returned = ledger.signals.returned_receivers(claimed)
    except StorageError as err:
        logger.warning("payhooks: could not read the receivers' earlier runs: %s", err.message)
        return report
    for outcome_id, group in groupby(claimed, key=lambda s: s.outcome_id):
        owed = list(group)
        try:
            outcome = (known or {}).get(outcome_id) or ledger.receiver.outcome(outcome_id)
        except StorageError as err:
            logger.warning("payhooks: could not read outcome %s: %s", outcome_id, err.message)
            continue
        if outcome is None:  # pragma: no cover - an owed signal's outcome is stored
            continue
        rounds = [
            _round(app, item, outcome, returned.get(item.id, set()), retries) for item in owed
        ]
        try:
            recorded = ledger.signals.finish(rounds)
        except StorageError as err:
            logger.warning(
                "payhooks: could not record the signals of outcome %s: %s", outcome_id, err.message
            )
            continue
        for round_ in recorded:
            _count(report, round_)
    return report


def _count(report: SendReport, round_: SignalRound) -> None:
    report.deliveries.add(round_.signal.delivery_id)
    report.receivers_run += len(round_.runs)
    report.returned += sum(run.returned for run in round_.runs)
    raised = [run for run in round_.runs if not run.returned]
    report.raised += len(raised)
    if not raised:
        report.signals_sent += 1
    elif round_.retry_at is None:
        report.signals_parked += 1
    else:
        report.signals_retrying += 1
    if raised:
        report.errors[round_.signal.signal] = "\n".join(
            f"{run.receiver}: {run.error}" for run in raised
        )


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


def send_owed(
    app: object,
    ledger: Ledger,
    *,
    lease: timedelta,
    retries: SignalRetries | None = None,
    limit: int | None = None,
    waiting: bool = False,
    parked: bool = False,
    delivery_id: int | None = None,
    identifier: str | None = None,
    once_since: datetime | None = None,
) -> SendReport:
    """Run the receivers still owed of the signals that are due (``waiting``: also those in
    their backoff; ``parked``: also the parked ones; one delivery's or one payment's when
    given), claiming **one outcome at a time**, just before running it: a claim then has to
    outlast one outcome's receivers, never a whole batch's (a batch claimed at once could see
    its lease pass halfway and another sender start the rest).

    ``limit``: at most this many outcomes (a sweep's share); ``once_since``: run each signal at
    most once from then on (a command or a person's re-run: a receiver that raises again is
    not run again in the same call; without a ``limit``, it defaults to now). It runs until
    nothing it may run is left.
    """
    report = SendReport()
    if limit is None and once_since is None:
        once_since = datetime.now().astimezone()  # never run one signal twice in a call
    selection: dict[str, Any] = {
        "waiting": waiting,
        "parked": parked,
        "delivery_id": delivery_id,
        "identifier": identifier,
        "tried_before": once_since,
    }
    taken = 0
    while limit is None or taken < limit:
        try:
            outcome_ids = ledger.signals.claimable(
                limit=100 if limit is None else limit - taken, **selection
            )
        except StorageError as err:
            logger.warning("payhooks: could not look for owed signals: %s", err.message)
            break
        ran_any = False
        for outcome_id in outcome_ids:
            try:
                claimed = ledger.signals.claim([outcome_id], lease=lease, **selection)
            except StorageError as err:
                logger.warning("payhooks: could not claim owed signals: %s", err.message)
                return report
            taken += 1
            if claimed:
                ran_any = True
                report.add(send_claimed(app, ledger, claimed, retries=retries))
        # A sweep takes one look; a re-run goes on while it finds what it has not run yet (an
        # outcome held back behind one it has just run, say).
        if limit is not None or not ran_any:
            break
    return report


def sweep_unclaimed(
    app: object,
    ledger: Ledger,
    *,
    lease: timedelta,
    retries: SignalRetries | None = None,
) -> SendReport:
    """Send the signals that are due and nobody holds (a sender died holding them past its
    lease, a registration owed them with nobody there to send, a retry's backoff is over), up
    to :data:`SWEEP_LIMIT` outcomes', one outcome claimed at a time. A read first, so that a
    ledger with nothing due pays no write."""
    try:
        if not ledger.signals.has_unclaimed():
            return SendReport()
    except StorageError as err:
        logger.warning("payhooks: could not look for owed signals: %s", err.message)
        return SendReport()
    return send_owed(app, ledger, lease=lease, retries=retries, limit=SWEEP_LIMIT)
