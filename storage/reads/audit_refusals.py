"""The ``audit_refusals`` table: refused console actions, counted per person, action, code and
minute.

A refusal is anybody's to cause: a viewer who sends ``POST`` in a loop, a page left open with
a stale form. One row per refused request would let one person fill the disk (and bury the
actions people took), so a refusal adds one to its minute's row instead: the rows a person
can make are bounded by minutes x actions x codes, whatever they send. The count is one
upsert, the same SQL on both engines, atomic under concurrent refusals. These rows are
counts, not evidence: nothing guards them as the audit log is guarded, and ``payhooks prune``
archives and deletes them at the audit log's horizon.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from payhooks.storage.reads.audit import MAX_WHO_CHARS
from payhooks.storage.reads.delivery_log import check_page
from payhooks.storage.sql import Connection
from payhooks.storage.times import from_text, to_text

__all__ = [
    "MAX_REFUSAL_TARGET_CHARS",
    "RefusalCount",
    "check_refusal",
    "count",
    "minute_of",
    "select_newest",
]

#: The longest first target a count keeps: a payment's identifier fits; a URL's kilobytes not.
MAX_REFUSAL_TARGET_CHARS: Final = 100
_MAX_NAME_CHARS: Final = 100

_COLUMNS: Final = "id, minute, who, role, action, code, times, first_target, last_at"
_COUNT: Final = """
    INSERT INTO audit_refusals (minute, who, role, action, code, times, first_target, last_at)
    VALUES (?, ?, ?, ?, ?, 1, ?, ?)
    ON CONFLICT (minute, who, role, action, code)
    DO UPDATE SET times = audit_refusals.times + 1, last_at = excluded.last_at"""


@dataclass(frozen=True, slots=True)
class RefusalCount:
    """How often one person's action was refused with one code within one minute."""

    id: int
    #: The start of the minute (UTC).
    minute: datetime
    #: The person, as the merchant's hook named them.
    who: str
    #: The console role they held.
    role: str
    #: The action they asked for (``reprocess``, ``download_raw``...).
    action: str
    #: Why it was refused (``console_forbidden_action``, ``console_csrf_failed``...).
    code: str
    #: How many requests were refused so.
    times: int
    #: The first one's target, escaped and cut (it often comes from the URL); None for none.
    first_target: str | None
    #: When the last one was refused.
    last_at: datetime


def minute_of(moment: datetime) -> str:
    """The start of ``moment``'s minute as the ledger stores times (UTC ISO 8601).

    :raises ValueError: a naive ``moment``.
    """
    to_text(moment, argument="at")
    return to_text(moment.astimezone(UTC).replace(second=0, microsecond=0))


def check_refusal(who: str, role: str, action: str, code: str, target: str | None) -> None:
    """:raises ValueError: naming the argument: an empty or overlong value, or one with a NUL
    (PostgreSQL's text holds none)."""
    for value, argument, longest in (
        (who, "who", MAX_WHO_CHARS),
        (role, "role", _MAX_NAME_CHARS),
        (action, "action", _MAX_NAME_CHARS),
        (code, "code", _MAX_NAME_CHARS),
    ):
        if not isinstance(value, str) or not 1 <= len(value) <= longest or "\x00" in value:
            raise ValueError(f"{argument} must be text of 1 to {longest} characters; got {value!r}")
    if target is not None and (
        not isinstance(target, str)
        or not 1 <= len(target) <= MAX_REFUSAL_TARGET_CHARS
        or "\x00" in target
    ):
        raise ValueError(
            f"target must be text of 1 to {MAX_REFUSAL_TARGET_CHARS} characters, without NUL"
        )


def count(
    conn: Connection,
    *,
    at: datetime,
    who: str,
    role: str,
    action: str,
    code: str,
    target: str | None,
) -> None:
    """Add one refusal at ``at`` to its minute's row (the row's first target stays)."""
    conn.execute(_COUNT, (minute_of(at), who, role, action, code, target, to_text(at)))


def _refusal(values: tuple[Any, ...]) -> RefusalCount:
    row_id, minute, who, role, action, code, times, first_target, last_at = values
    return RefusalCount(
        id=row_id,
        minute=from_text(minute, column="audit_refusals.minute"),
        who=who,
        role=role,
        action=action,
        code=code,
        times=times,
        first_target=first_target,
        last_at=from_text(last_at, column="audit_refusals.last_at"),
    )


def select_newest(conn: Connection, limit: int) -> tuple[RefusalCount, ...]:
    """The newest ``limit`` counts, newest minute first, read from the unique key's index
    (it begins with the minute).

    :raises ValueError: a ``limit`` out of range.
    """
    check_page(None, limit)
    return tuple(
        _refusal(tuple(values))
        for values in conn.execute(
            f"SELECT {_COLUMNS} FROM audit_refusals "  # noqa: S608 - constants only
            "ORDER BY minute DESC, id DESC LIMIT ?",
            (limit,),
        ).fetchall()
    )
