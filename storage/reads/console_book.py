"""What the console writes and reads of its own: ``Ledger.console``.

The audit log (:mod:`payhooks.storage.reads.audit`: append and page through, never change), the
refusals counted beside it (:mod:`payhooks.storage.reads.audit_refusals`) and the exceptions'
reviews (:mod:`payhooks.storage.reads.exception_reviews`). An action that changes the ledger writes
its audit entry inside the same transaction: open ``Ledger.transaction()``, make the change,
call :meth:`ConsoleBook.audit`; a review and its entry are one write here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import payhooks.storage.reads.audit as audit_log
import payhooks.storage.reads.audit_refusals as audit_refusals
import payhooks.storage.reads.exception_queue as exception_queue
import payhooks.storage.reads.exception_reviews as exception_reviews
from payhooks.storage.checks import enum_member
from payhooks.storage.reads.audit import AuditEntry
from payhooks.storage.reads.audit_refusals import RefusalCount
from payhooks.storage.reads.delivery_log import LogPage
from payhooks.storage.reads.exception_queue import MismatchCount
from payhooks.storage.reads.exception_reviews import ExceptionReview, ReviewStatus
from payhooks.storage.reconciliation import to_row
from payhooks.storage.rows import ReconciliationRow
from payhooks.storage.times import Clock, to_text

__all__ = ["ConsoleBook"]


class ConsoleBook:
    """The console's audit log and exception reviews.

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

    def audit(
        self,
        *,
        who: str,
        role: str,
        action: str,
        result: str,
        target: str | None = None,
        note: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> int:
        """Append one entry to the audit log, in a commit of its own or the open
        transaction's; its id.

        :raises ValueError: an empty or overlong value (see
            :func:`payhooks.storage.reads.audit.check_entry`), before anything is written.
        """
        audit_log.check_entry(who, role, action, note, result, target=target)
        with self._write() as conn:
            return audit_log.append(
                conn,
                at=to_text(self._clock()),
                who=who,
                role=role,
                action=action,
                target=target,
                note=note,
                detail=detail or {},
                result=result,
            )

    def audit_once_an_hour(
        self,
        *,
        who: str,
        role: str,
        action: str,
        result: str,
        target: str,
        at: datetime,
        detail: Mapping[str, Any] | None = None,
    ) -> int | None:
        """Append one entry at ``at`` unless ``who`` already has one of ``action`` on
        ``target`` in the same clock hour (UTC); the new entry's id, or None when one was
        there. For what a person may repeat on every page load (a body viewed): who saw what,
        and in which hour, is the evidence; a row per reload would only be noise.

        A view already recorded costs one indexed read and no write. A first one checks again
        and appends in one write: on SQLite, whose writes take turns, two loads at once still
        leave one entry; on PostgreSQL two at the very same moment may leave two.

        :param at: the moment of the view, as the caller's clock tells it (the console's),
            aware; its hour is the window.
        :raises ValueError: an entry :meth:`audit` refuses, or a naive ``at``.
        """
        audit_log.check_entry(who, role, action, None, result, target=target)
        at_text = to_text(at, argument="at")  # a naive time is refused before its hour is read
        start = at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        hour = {"start": to_text(start), "end": to_text(start + timedelta(hours=1))}
        # A reload reads, and never waits for the writer the receiver uses; only a first view
        # in the hour writes, checking again under the write lock.
        with self._read() as conn:
            if audit_log.entry_between(conn, who=who, action=action, target=target, **hour):
                return None
        with self._write() as conn:
            if audit_log.entry_between(conn, who=who, action=action, target=target, **hour):
                return None
            return audit_log.append(
                conn,
                at=at_text,
                who=who,
                role=role,
                action=action,
                target=target,
                note=None,
                detail=detail or {},
                result=result,
            )

    def audit_log(self, *, before_id: int | None = None, limit: int = 50) -> LogPage[AuditEntry]:
        """A page of the audit log, newest first; ``next_before_id`` reads the next.

        :raises ValueError: ``limit`` outside 1 to 1000, or ``before_id`` below 1.
        """
        with self._read() as conn:
            return audit_log.select_page(conn, before_id, limit)

    def count_refusal(
        self, *, who: str, role: str, action: str, code: str, target: str | None = None
    ) -> None:
        """Count one refused action: one more in the row of this person, role, action, code
        and minute (the first refusal's ``target`` is the row's), in a commit of its own or
        the open transaction's. Never an entry of its own: anybody can send refused requests.

        :raises ValueError: an empty or overlong value, a target over
            :data:`~payhooks.storage.reads.audit_refusals.MAX_REFUSAL_TARGET_CHARS`, before anything
            is written.
        """
        audit_refusals.check_refusal(who, role, action, code, target)
        with self._write() as conn:
            audit_refusals.count(
                conn, at=self._clock(), who=who, role=role, action=action, code=code, target=target
            )

    def refusals(self, *, limit: int = 50) -> tuple[RefusalCount, ...]:
        """The newest ``limit`` refusal counts, newest minute first.

        :raises ValueError: ``limit`` outside 1 to 1000.
        """
        with self._read() as conn:
            return audit_refusals.select_newest(conn, limit)

    def audit_for(self, target: str, *, limit: int = 100) -> tuple[AuditEntry, ...]:
        """The newest ``limit`` audit entries whose target is ``target`` (a payment's
        identifier, ``delivery 12``), newest first: what people did to one record.

        :raises ValueError: ``limit`` outside 1 to 1000.
        """
        with self._read() as conn:
            return audit_log.select_for_target(conn, target, limit)

    def review(
        self,
        external_identifier: str,
        status: ReviewStatus | str,
        *,
        reviewed_state: str,
        who: str,
        role: str,
        note: str | None = None,
    ) -> None:
        """Set a payment's exception review and append its audit entry, in one write.

        :param reviewed_state: the payment's reconciliation state as the person saw it: the
            review holds while the payment stays in it.
        :raises ValueError: an unknown ``status``, or an entry :meth:`audit` refuses.
        """
        chosen = enum_member(ReviewStatus, status, "status")
        audit_log.check_entry(
            who, role, "review_exception", note, chosen.value, target=external_identifier
        )
        now = to_text(self._clock())
        with self._write() as conn:
            exception_reviews.upsert(
                conn, external_identifier, chosen, reviewed_state, note, who, now
            )
            audit_log.append(
                conn,
                at=now,
                who=who,
                role=role,
                action="review_exception",
                target=external_identifier,
                note=note,
                detail={"reviewed_state": reviewed_state},
                result=chosen.value,
            )

    def reviews(self) -> dict[str, ExceptionReview]:
        """Every payment's review, by identifier."""
        with self._read() as conn:
            return exception_reviews.select_all(conn)

    def review_of(self, external_identifier: str) -> ExceptionReview | None:
        """The payment's review as it was set (:meth:`ExceptionReview.status_for` says whether
        it still holds), or None when nobody reviewed it."""
        with self._read() as conn:
            return exception_reviews.select_one(conn, external_identifier)

    # -- the exceptions queue ----------------------------------------------------------------

    def mismatch_counts(self, now: datetime, ages: Sequence[timedelta]) -> list[MismatchCount]:
        """The mismatched payments counted in SQL by state, age bucket (``ages``: where each
        starts, youngest first, the first 0) and currency of the money received, with that
        money: a few rows however many payments (:mod:`payhooks.storage.reads.exception_queue`).

        :raises ValueError: ``now`` is naive.
        """
        to_text(now, argument="now")
        with self._read() as conn:
            return exception_queue.count_mismatches(conn, now, ages)

    def mismatches(self, limit: int) -> list[ReconciliationRow]:
        """The ``limit`` mismatched payments opened first, read alone (never the others).

        :raises ValueError: ``limit`` is not from 1 to 10000.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10000:
            raise ValueError(f"limit must be an int from 1 to 10000; got {limit!r}")
        with self._read() as conn:
            return [to_row(values) for values in exception_queue.select_mismatches(conn, limit)]
