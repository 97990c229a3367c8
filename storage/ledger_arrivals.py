"""The ledger's method for the receiver's usual delivery: new, stored with its outcome in fewer
writes than the general calls make (:mod:`payhooks.storage.arrivals`).

A mixin of :class:`payhooks.storage.Ledger` (its one public face), kept in a module of its own
because it is one concern: the receiver's hot path, which :meth:`record_arrival` makes in fewer
statements and row versions than :meth:`~payhooks.storage.Ledger.record_delivery`,
:meth:`~payhooks.storage.Ledger.record_outcome` and
:meth:`~payhooks.storage.Ledger.owe_signals` would, with the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import payhooks.storage.arrivals as arrivals
import payhooks.storage.deliveries as deliveries
import payhooks.storage.outcomes as outcomes
from payhooks.storage.arrivals import Arrival, DecideSignals
from payhooks.storage.checks import check_amount, check_delivery, markable_status
from payhooks.storage.records import Outcome
from payhooks.storage.rows import DeliveryStatus
from payhooks.storage.sqlite.engine import SQLiteEngine
from payhooks.storage.times import Clock, to_text

if TYPE_CHECKING:
    from payhooks.storage.postgresql.engine import PostgresEngine

__all__ = ["ArrivalRecords"]


def _no_signals(outcome: Outcome, state: object) -> tuple[str, ...]:
    return ()


class ArrivalRecords:
    """The receiver's write of a new delivery; mixed into :class:`~payhooks.storage.Ledger`."""

    _engine: SQLiteEngine | PostgresEngine
    _clock: Clock
    _write: Callable[..., AbstractContextManager[Any]]

    def record_arrival(
        self,
        *,
        dedupe_key: str,
        body: bytes,
        headers: Mapping[str, str],
        outcome: Outcome | None = None,
        error: tuple[DeliveryStatus | str, str | None] | None = None,
        signals: DecideSignals = _no_signals,
    ) -> Arrival | None:
        """Store a delivery whose ``dedupe_key`` is new, already finished: with the ``outcome``
        it recorded (or found stored: ``duplicate``, ``conflicting_outcome``, as
        :meth:`~payhooks.storage.Ledger.record_outcome` decides), the payment reconciled, and
        the signals ``signals`` decides a new outcome owes; or with its ``error``, for a body
        that is not a notification. On PostgreSQL one insert of each row; on SQLite the delivery
        is inserted first and finished by one update. Committed at once or with the ledger's
        :meth:`~payhooks.storage.Ledger.transaction`.

        :param error: the status (``malformed_json``, ``invalid_payload``,
            ``processing_error``) and the text kept with it; only without an ``outcome``.
        :param signals: given the outcome and the payment's state once it is recorded, the
            names of the signals it owes, in sending order.
        :returns: what was stored; None, with nothing written, when the key is stored already
            (a retry, a reused key): :meth:`~payhooks.storage.Ledger.record_delivery` stores
            those.
        :raises payhooks.storage.arrivals.KeyTakenError: on PostgreSQL, another transaction
            stored the key meanwhile; the transaction must be undone and the delivery stored
            with ``record_delivery``.
        :raises ValueError: a bad key or body, both or neither of ``outcome`` and ``error``,
            an error status that is not one of the three.
        """
        check_delivery(dedupe_key, body)
        if (outcome is None) == (error is None):
            raise ValueError("give an outcome or an error, not both or neither")
        checked_error = None if error is None else (markable_status(error[0]), error[1])
        now = self._clock()
        row = deliveries.to_values(body, headers, now, now)[3]
        values = None
        if outcome is not None:
            check_amount(outcome.amount_minor, "outcome.amount_minor")
            # The delivery's id is allotted under the lock; 0 stands for it until then.
            values = outcomes.to_values(outcome, 0, to_text(now, argument="clock()"))
        engine = "sqlite" if isinstance(self._engine, SQLiteEngine) else "postgresql"
        with self._write() as conn:
            return arrivals.store(
                conn,
                engine,
                dedupe_key,
                row,
                outcome=outcome,
                outcome_values=values,
                error=checked_error,
                decide=signals,
            )
