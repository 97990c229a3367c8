"""What the ledger keeps of a signal's sending: each receiver's run, a round, a failing signal.

A signal (a row of ``owed_signals``, :class:`~payhooks.storage.rows.OwedSignal`) is owed until
every receiver connected to it has returned. Each round of sending runs the receivers that have
not returned yet and is recorded as one :class:`SignalRound`. A first round in which every
receiver returned is kept compactly on the signal's own row (the common case costs a delivery
no more writes than marking it sent); any other round's runs are rows of ``signal_runs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from payhooks.storage.rows import OwedSignal

__all__ = ["FailingSignal", "ReceiverRun", "SignalRound", "SignalRun"]


@dataclass(frozen=True, slots=True)
class ReceiverRun:
    """One receiver's run for one signal."""

    #: The receiver's stable name: its module and qualified name
    #: (``shop.create_app.<locals>.ship``).
    receiver: str
    started_at: datetime
    #: How long it ran, in whole milliseconds.
    duration_ms: int
    #: What it raised (type and message, shortened); None: it returned.
    error: str | None = None

    @property
    def returned(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class SignalRound:
    """One round of a claimed signal's receivers, to record (``Ledger.signals.finish``).

    When every run returned (or nothing was left to run), the signal is sent. Otherwise it
    stays owed: due again at :attr:`retry_at`, or parked when that is None.
    """

    signal: OwedSignal
    started_at: datetime
    runs: tuple[ReceiverRun, ...]
    #: When the next round is due, when a run raised; None then parks the signal.
    retry_at: datetime | None = None

    @property
    def returned(self) -> bool:
        """Whether every receiver of the round returned: the signal is owed no more."""
        return all(run.returned for run in self.runs)


@dataclass(frozen=True, slots=True)
class SignalRun:
    """A receiver's run as stored, for a delivery's page and a payment's story."""

    outcome_id: int
    delivery_id: int
    #: The signal's name (``payment-succeeded``...).
    signal: str
    receiver: str
    started_at: datetime
    duration_ms: int
    #: What it raised; None: it returned.
    error: str | None


@dataclass(frozen=True, slots=True)
class FailingSignal:
    """A signal still owed after one of its receivers raised: waiting for its retry, or parked
    (the exceptions queue, ``payhooks signals``)."""

    signal: OwedSignal
    #: The payment it is about.
    external_identifier: str
    #: The last round's start.
    attempted_at: datetime

    @property
    def parked(self) -> bool:
        return self.signal.parked_at is not None
