"""The service's side of the ledger, ``Ledger.service``: creation attempts and failures, and
the sync's records.

One concern: what the service itself says, as opposed to what notifications say. Nothing here
records an outcome or settles a payment: a change refreshes the payments it touches, whose rows
then show it as drift or as a failed creation (:mod:`payhooks.storage.payment_states`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import payhooks.storage.creation_attempts as creation_attempts
import payhooks.storage.payment_states as payment_states
import payhooks.storage.service_transactions as service_transactions
from payhooks.storage.currencies import MINOR_UNIT_EXPONENTS
from payhooks.storage.engines import Engine
from payhooks.storage.payment_states import Refresh
from payhooks.storage.records import PaymentState
from payhooks.storage.sync_rows import (
    CreationAttempt,
    CreationFailure,
    CreationState,
    DriftKind,
    DriftRow,
    ListedTransaction,
    SyncRun,
    SyncStatus,
)
from payhooks.storage.times import Clock, from_text, to_text

__all__ = ["ServiceRecords", "sync_run_from_row"]


_MAX_STATUS_LENGTH = 200
_MAX_ERROR_LENGTH = 1000

_KINDS = frozenset({"transaction", "subscription"})
_SELECT_PAYMENT = "SELECT 1 FROM payments WHERE external_identifier = ?"


def sync_run_from_row(row: tuple[Any, ...] | None) -> SyncRun | None:
    """A row of ``service_transactions.latest_run`` as a :class:`SyncRun` (None for none):
    shared with :mod:`payhooks.storage.reads.vitals`, which reads the last run in its own query."""
    if row is None:
        return None
    ident, started, before, status, cursor, pages, items, error, updated, finished = row
    return SyncRun(
        id=ident,
        started_at=from_text(started, column="sync_runs.started_at"),
        expected_before=from_text(before, column="sync_runs.expected_before"),
        status=SyncStatus(status),
        next_cursor=cursor,
        pages=pages,
        items=items,
        error=error,
        updated_at=from_text(updated, column="sync_runs.updated_at"),
        finished_at=None
        if finished is None
        else from_text(finished, column="sync_runs.finished_at"),
    )


def _drift(values: tuple[Any, ...]) -> DriftRow:
    kind, identifier, transaction_id, status, service_state, ledger_state, seen_at = values
    return DriftRow(
        kind=DriftKind(kind),
        external_identifier=identifier,
        transaction_id=transaction_id,
        service_status=status,
        service_state=None if service_state is None else PaymentState(service_state),
        ledger_state=None if ledger_state is None else PaymentState(ledger_state),
        seen_at=None if seen_at is None else from_text(seen_at),
    )


def _storable(value: object) -> str | None:
    """``value`` when the ledger can store it as a listed text (both engines alike)."""
    if isinstance(value, str) and 0 < len(value) <= _MAX_STATUS_LENGTH and "\x00" not in value:
        return value
    return None


def _values(item: ListedTransaction) -> tuple[Any, ...]:
    """An item checked and ready to store: text within bounds, a currency the ledger knows."""
    for name in ("transaction_id", "external_identifier", "status"):
        if _storable(getattr(item, name)) is None:
            raise ValueError(
                f"{name} must be a string of 1 to {_MAX_STATUS_LENGTH} characters, none NUL"
            )
    state = PaymentState(item.state)
    currency = item.currency if item.currency in MINOR_UNIT_EXPONENTS else None
    amount = item.amount_minor if type(item.amount_minor) is int else None
    return service_transactions.to_values(
        item.transaction_id, item.external_identifier, item.status, state, currency, amount
    )


class ServiceRecords:
    """Creation attempts and failures, and sync runs: what the service says, kept apart from
    the outcomes.

    Made by :class:`~payhooks.storage.Ledger` over its engine, clock and refresh.
    """

    def __init__(
        self,
        engine: Engine,
        write: Callable[..., AbstractContextManager[Any]],
        clock: Clock,
        refresh: Refresh,
    ) -> None:
        self._engine, self._write, self._read = engine, write, engine.read
        self._clock, self._refresh = clock, refresh

    # -- creation failures: what the newest finished creation attempt says -----------------

    def mark_creation_failed(self, external_identifier: str, *, reason: str, certain: bool) -> bool:
        """Record that creating this expected payment at the service failed: a finished
        ``refused`` (``certain``) or ``uncertain`` attempt whose error is ``reason``.

        ``certain`` (the service refused it, a 4xx) makes it ``not_created`` in the
        reconciliation, until an outcome or the service's list says otherwise; uncertain (no
        usable answer, a 5xx: it may exist) leaves it ``pending`` until a sync or an outcome
        decides. Marking again replaces the mark.

        :returns: True when marked; False when no payment has this identifier.
        """
        if not isinstance(reason, str) or not reason:
            raise ValueError("reason must be a non-empty string")
        state = CreationState.REFUSED if certain else CreationState.UNCERTAIN
        return self._record(external_identifier, state, reason[:_MAX_ERROR_LENGTH])

    def mark_creation_succeeded(self, external_identifier: str) -> bool:
        """Clear a creation failure (a retry created it): a finished ``created`` attempt, when
        the newest finished one failed. True when a payment was found."""
        return self._record(external_identifier, CreationState.CREATED, None)

    def _record(self, identifier: str, state: CreationState, error: str | None) -> bool:
        at = to_text(self._clock(), argument="clock()")
        with self._write() as conn:
            self._engine.lock_payment(conn, identifier)
            if (
                state is CreationState.CREATED
                and creation_attempts.failure(conn, identifier) is None
            ):
                return conn.execute(_SELECT_PAYMENT, (identifier,)).fetchone() is not None
            if not creation_attempts.record(conn, identifier, state, error, at):
                return False
            self._refresh(conn, identifier, at)
            return True

    def creation_failure(self, external_identifier: str) -> CreationFailure | None:
        """The payment's creation failure (its newest finished attempt's), or None."""
        with self._read() as conn:
            return creation_attempts.failure(conn, external_identifier)

    # -- creation attempts -----------------------------------------------------------------

    def begin_creation(
        self,
        external_identifier: str,
        kind: str,
        idempotency_key: str | None = None,
        *,
        after: int | None = None,
    ) -> int | None:
        """Record an attempt to create this expected payment, ``sending``, before it is sent.

        :param kind: ``transaction`` or ``subscription``.
        :param after: the id of the payment's newest attempt the caller decided from (None:
            it saw none). Beginning is refused when another attempt began since, so two
            callers deciding from the same attempt never both send.
        :returns: the new attempt's id; None when another attempt began since ``after``.
        :raises ValueError: no payment has this identifier (expect it first), or an unknown
            ``kind``.
        """
        if kind not in _KINDS:
            raise ValueError(f"kind must be 'transaction' or 'subscription', not {kind!r}")
        at = to_text(self._clock(), argument="clock()")
        with self._write() as conn:
            if conn.execute(_SELECT_PAYMENT, (external_identifier,)).fetchone() is None:
                raise ValueError(f"external_identifier {external_identifier!r} is not expected")
            self._engine.lock_payment(conn, external_identifier)
            return creation_attempts.begin(
                conn, external_identifier, kind, idempotency_key, at, after=after
            )

    def finish_creation(
        self,
        attempt_id: int,
        state: CreationState | str,
        *,
        service_id: str | None = None,
        http_status: int | None = None,
        error_code: str | None = None,
        error: str | None = None,
    ) -> bool:
        """Record how an attempt ended, and mark its payment in the same transaction.

        The newest finished attempt is the payment's creation mark: ``created`` clears a
        failure; ``refused`` and ``uncertain`` are one, as :meth:`mark_creation_failed` with
        ``certain`` for ``refused``, the reason being ``"<error_code>: <error>"``. Arguments
        left None keep what the attempt holds (an uncertain attempt found at the service later
        keeps its lost answer's error).

        :returns: True when recorded; False when there is no such attempt or it is already
            ``created`` (a created attempt is never changed).
        """
        ended = CreationState(state)
        if ended is CreationState.SENDING:
            raise ValueError("an attempt ends created, refused or uncertain, not sending")
        if error is not None:
            error = error[:_MAX_ERROR_LENGTH]
        at = to_text(self._clock(), argument="clock()")
        values = (service_id, http_status, error_code, error)
        with self._write() as conn:
            identifier = creation_attempts.finish(conn, attempt_id, ended, values, at)
            if identifier is None:
                return False
            self._refresh(conn, identifier, at)
            return True

    def creation_attempts(
        self,
        external_identifier: str | None = None,
        *,
        state: CreationState | str | None = None,
    ) -> list[CreationAttempt]:
        """The attempts to create this payment (every payment's, for None), oldest first; only
        those in ``state`` when given."""
        wanted = None if state is None else CreationState(state)
        with self._read() as conn:
            rows = creation_attempts.select(conn, external_identifier, wanted)
        return [creation_attempts.to_attempt(row) for row in rows]

    # -- sync runs ---------------------------------------------------------------------------

    def begin_sync(self, *, max_age: timedelta, resume: bool = True) -> SyncRun:
        """Start a sync, or go on with the last one when it did not complete.

        :param max_age: how long an expected payment may go unseen at the service before a
            complete sync calls it ``missing_at_service``.
        :param resume: False starts from the list's first page even after an interruption.
        """
        if not isinstance(max_age, timedelta) or max_age < timedelta(0):
            raise ValueError("max_age must be a timedelta of zero or more")
        now = self._clock()
        with self._write() as conn:
            last = sync_run_from_row(service_transactions.latest_run(conn))
            if resume and last is not None and last.status is not SyncStatus.COMPLETE:
                conn.execute(
                    "UPDATE sync_runs SET status = 'running', error = NULL, finished_at = NULL "
                    "WHERE id = ?",
                    (last.id,),
                )
                run_id = last.id
            else:
                if last is not None and last.status is not SyncStatus.COMPLETE:
                    service_transactions.end_run(
                        conn, last.id, "interrupted", "abandoned", to_text(now)
                    )
                run_id = service_transactions.begin_run(
                    conn, to_text(now), to_text(now - max_age, argument="max_age")
                )
            found = sync_run_from_row(service_transactions.latest_run(conn))
        assert found is not None
        assert found.id == run_id
        return found

    def record_service_page(
        self, run_id: int, items: Iterable[ListedTransaction], next_cursor: str | None
    ) -> int:
        """Store one page of the list and the cursor after it, in one transaction; how many
        items. Seeing a transaction again updates it: repeating a page changes nothing else.
        An item the ledger cannot store is kept as ``unstorable_item`` drift, without the value
        it refused, and the page goes on."""
        values, unstorable = [], []
        for item in items:
            try:
                values.append(_values(item))
            except ValueError as err:
                ident, reference = (
                    _storable(item.transaction_id),
                    _storable(item.external_identifier),
                )
                unstorable.append((ident, reference, str(err)))
        at = to_text(self._clock(), argument="clock()")
        with self._write() as conn:
            identifiers = service_transactions.touched_identifiers(conn, values)
            # Every payment's lock first, in order, before any row is written: a delivery
            # holding one of them never waits on a row this page has locked (no deadlock).
            for identifier in identifiers:
                self._engine.lock_payment(conn, identifier)
            count = service_transactions.record_page(
                conn, run_id, values, unstorable, next_cursor, at
            )
            for identifier in identifiers:
                self._refresh(conn, identifier, at)
            return count

    def end_sync(self, run_id: int, *, error: str | None = None) -> SyncRun:
        """Mark a run ``complete``, or ``interrupted`` with ``error`` (what was recorded stays,
        and the next :meth:`begin_sync` goes on from its cursor)."""
        status = "complete" if error is None else "interrupted"
        at = to_text(self._clock(), argument="clock()")
        with self._write() as conn:
            service_transactions.end_run(
                conn, run_id, status, None if error is None else error[:_MAX_ERROR_LENGTH], at
            )
            if error is None:
                payment_states.refresh_missing(conn, now=at, lock=self._engine.lock_payment)
            found = sync_run_from_row(service_transactions.latest_run(conn))
        assert found is not None
        return found

    def last_sync(self) -> SyncRun | None:
        """The newest sync run, or None before the first."""
        with self._read() as conn:
            return sync_run_from_row(service_transactions.latest_run(conn))

    def sync_drift(self, *, limit: int | None = None) -> Iterator[DriftRow]:
        """Stream the ``sync_drift`` view: every disagreement between the service's list and
        the ledger, as of now (a notification that arrived since removes its row); with
        ``limit``, only the first that many (the database reads no more)."""
        return self._engine.stream(
            lambda conn: service_transactions.select_drift(conn, limit=limit), _drift
        )

    def drift_counts(self) -> dict[DriftKind, int]:
        """How many rows of ``sync_drift`` there are of each kind, counted in SQL."""
        with self._read() as conn:
            return service_transactions.count_drift(conn)
