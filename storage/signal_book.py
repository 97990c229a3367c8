"""The signals owed to the merchant's code, as the ledger keeps them: ``Ledger.signals``.

What is owed is decided and stored by the writes that change a payment
(:mod:`payhooks.storage.payment_states`); here it is listed, claimed by one sender at a time
with a lease, and marked sent (:mod:`payhooks.storage.owed_signals` has the SQL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import payhooks.storage.deliveries as deliveries
import payhooks.storage.owed_signals as owed_signals
from payhooks.storage.rows import OwedSignal
from payhooks.storage.times import Clock, to_text

__all__ = ["SignalBook"]


class SignalBook:
    """Owed signals: :meth:`owed`, :meth:`claim`, :meth:`mark_sent`.

    :param read: the ledger's read context (a connection).
    :param write: the ledger's write context (a transaction, or a savepoint of the open one).
    :param clock: the ledger's clock.
    """

    def __init__(
        self,
        read: Callable[[], AbstractContextManager[Any]],
        write: Callable[..., AbstractContextManager[Any]],
        clock: Clock,
    ) -> None:
        self._read, self._write, self._clock = read, write, clock

    def owed(self, delivery_id: int | None = None) -> list[OwedSignal]:
        """The signals still owed (claimed or not), oldest outcome first, each outcome's in
        sending order: for one delivery, or all of them."""
        with self._read() as conn:
            return owed_signals.unsent(conn, delivery_id)

    def claim(
        self, outcome_ids: Iterable[int] | None = None, *, lease: timedelta, limit: int = 100
    ) -> list[OwedSignal]:
        """Claim owed signals for sending, for ``lease``, in a commit (or the open
        transaction): those of ``outcome_ids``, or (None) up to ``limit`` outcomes' that nobody
        holds (never claimed, or their sender's lease has passed).

        A signal another sender holds is never returned, so no two senders run one outcome's
        receivers at once; one that dies holding a claim leaves it to the next sender after
        ``lease``.
        """
        moment = self._clock()
        now, until = to_text(moment), to_text(moment + lease, argument="lease")
        with self._write(durable=False) as conn:
            if outcome_ids is None:
                outcome_ids = owed_signals.claimable(conn, now=now, limit=limit)
            return owed_signals.claim(conn, outcome_ids, now=now, until=until)

    def has_unclaimed(self) -> bool:
        """Whether :meth:`claim` without ids would find something: a read, so that a caller
        pays for a write only when there is work."""
        with self._read() as conn:
            return bool(owed_signals.claimable(conn, now=to_text(self._clock()), limit=1))

    def mark_sent(
        self, signals: Iterable[OwedSignal], *, errors: Mapping[str, str] | None = None
    ) -> int:
        """Mark claimed signals sent (their receivers ran), keeping what a receiver raised, by
        signal name, with the signal and on its delivery's ``signal_error``; how many.

        Not synced: a mark lost to a power cut means one more sending, never none.
        """
        sent = list(signals)
        errors = dict(errors or {})
        now = to_text(self._clock())
        with self._write(durable=False) as conn:
            for signal in sent:
                if signal.signal in errors:
                    deliveries.note_signal_error(
                        conn, signal.delivery_id, errors[signal.signal], now
                    )
            return owed_signals.mark_sent(conn, sent, now, errors)
