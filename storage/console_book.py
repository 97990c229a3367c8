"""What the console writes and reads of its own: ``Ledger.console``.

The audit log (:mod:`payhooks.storage.audit`: append and page through, never change) and the
exceptions' reviews (:mod:`payhooks.storage.exception_reviews`). An action that changes the
ledger writes its audit entry inside the same transaction: open ``Ledger.transaction()``, make
the change, call :meth:`ConsoleBook.audit`; a review and its entry are one write here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

import payhooks.storage.audit as audit_log
import payhooks.storage.exception_queue as exception_queue
import payhooks.storage.exception_reviews as exception_reviews
from payhooks.storage.audit import AuditEntry
from payhooks.storage.checks import enum_member
from payhooks.storage.delivery_log import LogPage
from payhooks.storage.exception_queue import MismatchCount
from payhooks.storage.exception_reviews import ExceptionReview, ReviewStatus
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
            :func:`payhooks.storage.audit.check_entry`), before anything is written.
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

    def audit_log(self, *, before_id: int | None = None, limit: int = 50) -> LogPage[AuditEntry]:
        """A page of the audit log, newest first; ``next_before_id`` reads the next.

        :raises ValueError: ``limit`` outside 1 to 1000, or ``before_id`` below 1.
        """
        with self._read() as conn:
            return audit_log.select_page(conn, before_id, limit)

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
        money: a few rows however many payments (:mod:`payhooks.storage.exception_queue`).

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
