"""The signals owed to the merchant's code, as the ledger keeps them: ``Ledger.signals``.

What is owed is decided and stored by the writes that change a payment
(:mod:`payhooks.storage.payment_states`); here it is listed, claimed by one sender at a time
with a lease, and each round of its receivers recorded: sent once every receiver returned,
else owed again after a backoff, or parked (:mod:`payhooks.storage.owed_signals` has the SQL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

import payhooks.storage.deliveries as deliveries
import payhooks.storage.owed_signals as owed_signals
from payhooks.storage.owed_signals import Selection
from payhooks.storage.rows import OwedSignal
from payhooks.storage.signal_rows import FailingSignal, SignalRound, SignalRun
from payhooks.storage.times import Clock, to_text

__all__ = ["SignalBook"]


def _selection(
    waiting: bool,
    parked: bool,
    delivery_id: int | None,
    identifier: str | None,
    tried_before: datetime | None,
) -> Selection:
    return Selection(
        waiting=waiting,
        parked=parked,
        delivery_id=delivery_id,
        identifier=identifier,
        tried_before=None if tried_before is None else to_text(tried_before),
    )


class SignalBook:
    """Owed signals: :meth:`owed`, :meth:`claim`, :meth:`finish`, :meth:`failing`.

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

    def owed(
        self, delivery_id: int | None = None, *, identifier: str | None = None
    ) -> list[OwedSignal]:
        """The signals still owed (claimed or not, waiting for a retry or parked), oldest
        outcome first, each outcome's in sending order: for one delivery, one payment, or all."""
        with self._read() as conn:
            return owed_signals.unsent(conn, delivery_id, identifier)

    def claim(
        self,
        outcome_ids: Iterable[int] | None = None,
        *,
        lease: timedelta,
        limit: int = 100,
        waiting: bool = False,
        parked: bool = False,
        delivery_id: int | None = None,
        identifier: str | None = None,
        tried_before: datetime | None = None,
    ) -> list[OwedSignal]:
        """Claim owed signals for sending, for ``lease``, in a commit (or the open
        transaction): those of ``outcome_ids``, or (None) up to ``limit`` outcomes' that nobody
        holds (never claimed, or their sender's lease has passed).

        Only what is due, unless ``waiting`` (also those whose retry waits for its backoff) or
        ``parked`` (also the parked ones); only one delivery's or one payment's when given;
        ``tried_before``: not those that had a round since then (a command claims each once).
        A signal another sender holds is never returned, so no two senders run one outcome's
        receivers at once; nor one an earlier outcome of its payment holds back (its signal's
        receiver raised and it is still owed).
        """
        moment = self._clock()
        now, until = to_text(moment), to_text(moment + lease, argument="lease")
        selection = _selection(waiting, parked, delivery_id, identifier, tried_before)
        with self._write(durable=False) as conn:
            if outcome_ids is None:
                outcome_ids = owed_signals.claimable(
                    conn, now=now, limit=limit, selection=selection
                )
            return owed_signals.claim(conn, outcome_ids, now=now, until=until, selection=selection)

    def claimable(
        self,
        *,
        limit: int = 100,
        waiting: bool = False,
        parked: bool = False,
        delivery_id: int | None = None,
        identifier: str | None = None,
        tried_before: datetime | None = None,
    ) -> list[int]:
        """The outcomes, oldest first, whose owed signals :meth:`claim` with the same arguments
        would take now (a read): for a sender that claims them one at a time, so that no claim
        has to outlast more than one outcome's receivers."""
        selection = _selection(waiting, parked, delivery_id, identifier, tried_before)
        with self._read() as conn:
            return owed_signals.claimable(
                conn, now=to_text(self._clock()), limit=limit, selection=selection
            )

    def has_unclaimed(self) -> bool:
        """Whether :meth:`claim` without ids would find something due: a read, so that a caller
        pays for a write only when there is work."""
        with self._read() as conn:
            return bool(owed_signals.claimable(conn, now=to_text(self._clock()), limit=1))

    def returned_receivers(self, signals: Iterable[OwedSignal]) -> dict[int, set[str]]:
        """For signals that had a round before, the receivers that returned (by signal id):
        a retry runs only the others."""
        ids = [signal.id for signal in signals if signal.attempts > 0]
        if not ids:
            return {}
        with self._read() as conn:
            return owed_signals.returned_receivers(conn, ids)

    def finish(self, rounds: Sequence[SignalRound]) -> list[SignalRound]:
        """Record a round of each claimed signal's receivers, in one commit: sent once every
        receiver returned; else owed again from ``retry_at``, or parked. Only while the
        round's sender still holds the lease it claimed with. A delivery whose signals'
        receivers raise keeps their errors in its ``signal_error`` until none is owed (brought
        up to date in a commit of its own, after: a redelivery locks the delivery first and the
        signals second, so one transaction holding both in the other order could deadlock on
        PostgreSQL). What was recorded.

        Not synced: a round lost to a power cut means one more round, never none.
        """
        now = to_text(self._clock())
        with self._write(durable=False) as conn:
            recorded = owed_signals.finish(conn, rounds, now)
        touched = {
            round_.signal.delivery_id
            for round_ in recorded
            if not round_.returned or round_.signal.attempts > 0
        }
        if touched:
            with self._write(durable=False) as conn:
                for delivery_id in sorted(touched):
                    deliveries.note_signal_error(conn, delivery_id, now)
        return recorded

    def mark_sent(self, signals: Iterable[OwedSignal]) -> int:
        """Record claimed signals as sent with no receiver run (there was none to run, or the
        caller ran them itself); how many."""
        moment = self._clock()
        rounds = [SignalRound(signal, moment, ()) for signal in signals]
        return len(self.finish(rounds))

    def failing(
        self,
        *,
        limit: int = 500,
        delivery_id: int | None = None,
        identifier: str | None = None,
    ) -> list[FailingSignal]:
        """Signals still owed after a receiver raised (waiting for a retry, or parked), parked
        first: what a person must see."""
        with self._read() as conn:
            return owed_signals.failing(
                conn, limit=limit, delivery_id=delivery_id, identifier=identifier
            )

    def failing_counts(self) -> tuple[int, int]:
        """(signals owed after a raise, of which parked): the counts beside :meth:`failing`'s
        list, which stops at its limit."""
        with self._read() as conn:
            return owed_signals.failing_counts(conn)

    def runs(self, delivery_ids: Sequence[int]) -> list[SignalRun]:
        """Every receiver run recorded for these deliveries' signals, oldest first."""
        with self._read() as conn:
            return owed_signals.runs_of_deliveries(conn, delivery_ids)

    def receiver_errors(self) -> list[tuple[str, str, int]]:
        """(signal, receiver, runs that raised) for every receiver that ever raised: the
        metrics' ``payhooks_receiver_errors_total``."""
        with self._read() as conn:
            return owed_signals.receiver_errors(conn)

    def dismiss(self, signal_id: int) -> OwedSignal | None:
        """Mark one owed signal handled without running its receivers: a person's decision
        (the order was shipped by hand; the receiver can never handle this outcome), so that
        the payment's later signals follow. Refused (None) when it is not owed, or a sender
        holds it now. Its delivery's ``signal_error`` follows."""
        now = to_text(self._clock())
        with self._write(durable=False) as conn:
            found = owed_signals.dismiss(conn, signal_id, now)
            if found is not None:
                deliveries.note_signal_error(conn, found.delivery_id, now)
            return found
