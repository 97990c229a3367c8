"""The ledger's methods for the signals owed to the merchant's code
(:mod:`payhooks.storage.owed_signals`).

A mixin of :class:`payhooks.storage.Ledger` (its one public face), kept in a module of its own
because it is one concern: what the receiver still owes the merchant's receivers, and the marks
that say they ran. Marks are never synced on their own: a mark lost to a power cut only means
one more sending, and the receiver carries most of them in its next delivery's commit
(:mod:`payhooks.receiver.pipeline.sent_marks`), so a batch of marks is one call here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import payhooks.storage.owed_signals as owed_signals
from payhooks.storage.checks import enum_member
from payhooks.storage.records import ReconciliationState
from payhooks.storage.rows import OwedSignal
from payhooks.storage.times import Clock, to_text

__all__ = ["SignalRecords"]


class SignalRecords:
    """Signals owed, and their marks; mixed into :class:`~payhooks.storage.Ledger`."""

    _clock: Clock
    _write: Callable[..., AbstractContextManager[Any]]
    _read: Callable[[], AbstractContextManager[Any]]

    def owe_signals(
        self,
        outcome_id: int,
        *,
        delivery_id: int,
        signals: Iterable[str],
        reconciliation: ReconciliationState | str,
    ) -> None:
        """Record the signals a new outcome owes on the row of the delivery that recorded it, in
        that transaction (:mod:`payhooks.storage.owed_signals`); a StorageError if it did not."""
        state = enum_member(ReconciliationState, reconciliation, "reconciliation").value
        with self._write() as conn:
            owed_signals.owe(conn, outcome_id, delivery_id, signals, state)

    def owed_signals(self, delivery_id: int | None = None) -> list[OwedSignal]:
        """The signals still owed, oldest first: for one delivery, or all of them."""
        with self._read() as conn:
            return owed_signals.unsent(conn, delivery_id)

    def mark_signals_sent(self, outcome_id: int, *, sent_at: datetime | None = None) -> int:
        """Mark an outcome's owed signals sent once their receivers ran (at ``sent_at``, default
        now); how many were owed. Not synced: a mark lost to a power cut means one more
        sending, not none."""
        return self.mark_many_signals_sent({outcome_id: sent_at or self._clock()})

    def mark_many_signals_sent(self, marks: Mapping[int, datetime]) -> int:
        """Mark several outcomes' owed signals sent, outcome id -> when their receivers ran, in
        one write (not synced; inside :meth:`~payhooks.storage.Ledger.transaction`, in that
        one); how many signals were still owed."""
        texts = {
            outcome_id: to_text(sent_at, argument="sent_at")
            for outcome_id, sent_at in marks.items()
        }
        if not texts:
            return 0
        with self._write(durable=False) as conn:
            # In the order of their ids: two transactions carrying marks of the same deliveries
            # lock their rows in one order (on PostgreSQL, never a deadlock between them).
            return sum(
                owed_signals.mark_sent(conn, outcome_id, at)
                for outcome_id, at in sorted(texts.items())
            )
