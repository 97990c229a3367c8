"""The ``audit_log`` table: who did what from the console, when, with which note and result.

Append-only: this module only inserts and reads, and a trigger on each engine refuses an
``UPDATE``, a ``DELETE`` (and on PostgreSQL a ``TRUNCATE``), so a person who can act cannot
also rewrite what they did through payhooks. ``detail`` is JSON text (the filter of a bulk
action, the counts); it must never carry a secret.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from payhooks.storage.reads.delivery_log import LogPage, check_page
from payhooks.storage.sql import Connection
from payhooks.storage.times import from_text

__all__ = [
    "MAX_NOTE_CHARS",
    "MAX_TARGET_CHARS",
    "MAX_WHO_CHARS",
    "AuditEntry",
    "append",
    "check_entry",
    "entry_between",
    "select_for_target",
    "select_page",
]

#: The longest note a person may give with an action.
MAX_NOTE_CHARS: Final = 1000
#: The longest name the merchant's hook may give for a person.
MAX_WHO_CHARS: Final = 200
#: The longest target: a payment's identifier (at most 64 characters) fits even escaped.
MAX_TARGET_CHARS: Final = 400
_MAX_NAME_CHARS: Final = 100

_COLUMNS = "id, at, who, role, action, target, note, detail, result"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One line of the audit log."""

    id: int
    at: datetime
    #: The person, as the merchant's hook named them (``unnamed operator`` when it did not).
    who: str
    #: The console role they held (``viewer``, ``operator``).
    role: str
    #: What they did (``reprocess``, ``send_signals``, ``download_raw``...).
    action: str
    #: What it was done to (``delivery 12``, a payment's identifier); None for none.
    target: str | None
    #: The note they gave; None when they gave none.
    note: str | None
    #: How it ended (``processed``, ``refused: console_csrf_failed``...).
    result: str
    #: The action's particulars (a bulk action's filter and counts).
    detail: Mapping[str, Any] = field(default_factory=dict)


def check_entry(
    who: str,
    role: str,
    action: str,
    note: str | None,
    result: str,
    *,
    target: str | None = None,
) -> None:
    """:raises ValueError: naming the argument: an empty or overlong ``who``, ``role``,
    ``action``, ``result`` or ``target``, or an overlong ``note``; any of them with a NUL
    (PostgreSQL's text holds none). A target often comes from a URL: unchecked, anybody could
    write kilobytes of their own text into the log."""
    for value, argument, longest in (
        (who, "who", MAX_WHO_CHARS),
        (role, "role", _MAX_NAME_CHARS),
        (action, "action", _MAX_NAME_CHARS),
        (result, "result", MAX_NOTE_CHARS),
    ):
        if not isinstance(value, str) or not 1 <= len(value) <= longest or "\x00" in value:
            raise ValueError(f"{argument} must be text of 1 to {longest} characters; got {value!r}")
    if target is not None and (
        not isinstance(target, str) or not 1 <= len(target) <= MAX_TARGET_CHARS or "\x00" in target
    ):
        raise ValueError(
            f"target must be text of 1 to {MAX_TARGET_CHARS} characters, without NUL; "
            f"got {target[:50]!r}"
        )
    if note is not None and (
        not isinstance(note, str) or len(note) > MAX_NOTE_CHARS or "\x00" in note
    ):
        raise ValueError(f"note must be text of at most {MAX_NOTE_CHARS} characters, without NUL")


def append(
    conn: Connection,
    *,
    at: str,
    who: str,
    role: str,
    action: str,
    target: str | None,
    note: str | None,
    detail: Mapping[str, Any],
    result: str,
) -> int:
    """Append one entry; its id."""
    row = conn.execute(
        "INSERT INTO audit_log (at, who, role, action, target, note, detail, result) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (at, who, role, action, target, note, json.dumps(dict(detail), sort_keys=True), result),
    ).fetchone()
    entry_id: int = row[0]
    return entry_id


def _entry(values: tuple[Any, ...]) -> AuditEntry:
    entry_id, at, who, role, action, target, note, detail, result = values
    return AuditEntry(
        id=entry_id,
        at=from_text(at),
        who=who,
        role=role,
        action=action,
        target=target,
        note=note,
        result=result,
        detail=json.loads(detail),
    )


def select_page(conn: Connection, before_id: int | None, limit: int) -> LogPage[AuditEntry]:
    """A page of entries, newest first, below ``before_id`` when given.

    :raises ValueError: a ``limit`` or ``before_id`` out of range.
    """
    check_page(before_id, limit)
    where, params = ("", []) if before_id is None else (" WHERE id < ?", [before_id])
    rows = [
        _entry(tuple(values))
        for values in conn.execute(
            f"SELECT {_COLUMNS} FROM audit_log{where} ORDER BY id DESC LIMIT ?",  # noqa: S608
            (*params, limit + 1),
        ).fetchall()
    ]
    more = len(rows) > limit
    return LogPage(rows=tuple(rows[:limit]), next_before_id=rows[limit - 1].id if more else None)


def select_for_target(conn: Connection, target: str, limit: int) -> tuple[AuditEntry, ...]:
    """The newest ``limit`` entries whose target is ``target``, newest first, read from the
    index ``audit_log_target`` (a payment's page reads its own, not the whole log).

    :raises ValueError: a ``limit`` out of range.
    """
    check_page(None, limit)
    return tuple(
        _entry(tuple(values))
        for values in conn.execute(
            f"SELECT {_COLUMNS} FROM audit_log WHERE target = ? "  # noqa: S608
            "ORDER BY id DESC LIMIT ?",
            (target, limit),
        ).fetchall()
    )


def entry_between(
    conn: Connection, *, who: str, action: str, target: str, start: str, end: str
) -> bool:
    """Whether ``who`` has an entry of ``action`` on ``target`` written at or after ``start``
    and before ``end`` (stored times, :func:`~payhooks.storage.times.to_text`, which sort as
    text). Read through the index ``audit_log_target``: one record's entries, not the log's."""
    row = conn.execute(
        "SELECT 1 FROM audit_log WHERE target = ? AND who = ? AND action = ? "
        "AND at >= ? AND at < ? LIMIT 1",
        (target, who, action, start, end),
    ).fetchone()
    return row is not None
