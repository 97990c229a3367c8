"""The ``exception_reviews`` table: what a person decided about one payment in a mismatch.

One row per ``external_identifier``: its status (open, acknowledged, resolved, ignored), the
note and who set it, and the reconciliation state the payment was in when they did. A review
holds only while the payment stays in that state: a payment whose state changes after its
review is open again (:meth:`ExceptionReview.status_for`), so a new problem is never hidden by
an old "resolved".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from payhooks.storage.sql import Connection
from payhooks.storage.times import from_text

__all__ = ["ExceptionReview", "ReviewStatus", "select_all", "select_one", "upsert"]


class ReviewStatus(StrEnum):
    """Where a person left one exception."""

    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"
    IGNORED = "ignored"


@dataclass(frozen=True, slots=True)
class ExceptionReview:
    """A person's decision about one payment's exception."""

    external_identifier: str
    status: ReviewStatus
    #: The payment's reconciliation state when it was reviewed.
    reviewed_state: str
    note: str | None
    who: str
    reviewed_at: datetime

    def status_for(self, state: str) -> ReviewStatus:
        """The status the payment shows now that it is in ``state``: this review's while the
        payment is still in the state it was reviewed in; otherwise open."""
        return self.status if self.reviewed_state == state else ReviewStatus.OPEN


_UPSERT = """
    INSERT INTO exception_reviews
        (external_identifier, status, reviewed_state, note, who, reviewed_at)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (external_identifier) DO UPDATE SET
        status = excluded.status, reviewed_state = excluded.reviewed_state,
        note = excluded.note, who = excluded.who, reviewed_at = excluded.reviewed_at"""


def upsert(
    conn: Connection,
    external_identifier: str,
    status: ReviewStatus,
    reviewed_state: str,
    note: str | None,
    who: str,
    now: str,
) -> None:
    """Set the payment's review, replacing the one before (the audit log keeps the history)."""
    conn.execute(_UPSERT, (external_identifier, status.value, reviewed_state, note, who, now))


def _review(values: tuple[Any, ...]) -> ExceptionReview:
    identifier, status, state, note, who, at = values
    return ExceptionReview(identifier, ReviewStatus(status), state, note, who, from_text(at))


def select_all(conn: Connection) -> dict[str, ExceptionReview]:
    """Every review, by identifier (one per payment ever reviewed: a small table)."""
    rows = conn.execute(
        "SELECT external_identifier, status, reviewed_state, note, who, reviewed_at "
        "FROM exception_reviews"
    ).fetchall()
    return {row[0]: _review(tuple(row)) for row in rows}


def select_one(conn: Connection, external_identifier: str) -> ExceptionReview | None:
    """The payment's review, or None when nobody reviewed it."""
    row = conn.execute(
        "SELECT external_identifier, status, reviewed_state, note, who, reviewed_at "
        "FROM exception_reviews WHERE external_identifier = ?",
        (external_identifier,),
    ).fetchone()
    return None if row is None else _review(tuple(row))
