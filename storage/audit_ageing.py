"""The audit log's ageing, by ``payhooks prune``: its entries older than their own horizon
(longer than the bodies') archived, then deleted through the one path the triggers let by.

``audit_log`` stays append-only: its triggers refuse every ``UPDATE`` and every ``DELETE``
but of an entry the newest row of ``audit_prune_permits`` covers (an id up to its
``up_to_id``, a time before its ``horizon``). Only this module writes a permit, and only once
every entry it covers is in an archive whose checksum file is on disk; the permit is itself
append-only, so each ageing stays on record (when, up to which entry, which archive and its
SHA-256), and so does an entry in the log itself, ``prune_audit_log`` by ``payhooks prune``,
written with the permit and never covered by it. After the deletes the permit covers only
rows that are gone; an entry appended later has a higher id.

The refusal counts (:mod:`payhooks.storage.reads.audit_refusals`) of the minutes before the horizon
go into the same archive and are deleted with the entries: they are counts, not evidence, so
no permit guards them, but a prune that drops rows keeps a copy of what it dropped.

The work goes in batches, as the bodies' prune does: the archive is written from short reads;
one short transaction writes the permit and the log's entry; then the rows are deleted by
their archived ids, ``batch`` per write transaction. A prune stopped before the permit deleted
nothing (the next archives the same entries again); one stopped after it left entries its
archive holds, which the next prune archives again and deletes.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

from payhooks.storage.archives import ArchiveWriter
from payhooks.storage.reads.audit_refusals import minute_of
from payhooks.storage.sql import Connection
from payhooks.storage.times import to_text

__all__ = [
    "DEFAULT_AUDIT_HORIZON",
    "PRUNE_ACTION",
    "PRUNE_WHO",
    "AuditAgeing",
    "age_audit",
    "check_prune",
]

#: How old an audit entry must be before ``payhooks prune`` ages it, unless told otherwise:
#: more than a year, so a year's audit is always in the ledger.
DEFAULT_AUDIT_HORIZON: Final = timedelta(days=400)
#: Who the audit log names for its ageing, and the action.
PRUNE_WHO: Final = "payhooks prune"
PRUNE_ACTION: Final = "prune_audit_log"

_ENTRY_BATCH: Final = """
    SELECT id, at, who, role, action, target, note, detail, result FROM audit_log
    WHERE id > ? AND id <= ? AND at < ? ORDER BY id LIMIT ?"""
_REFUSAL_BATCH: Final = """
    SELECT id, minute, who, role, action, code, times, first_target, last_at FROM audit_refusals
    WHERE id > ? AND id <= ? AND minute < ? ORDER BY id LIMIT ?"""
_BOUNDS: Final = (
    "SELECT (SELECT MAX(id) FROM audit_log WHERE at < ?), "
    "(SELECT COUNT(*) FROM audit_log WHERE at < ?), "
    "(SELECT MAX(id) FROM audit_refusals WHERE minute < ?), "
    "(SELECT COUNT(*) FROM audit_refusals WHERE minute < ?)"
)
_PERMIT: Final = (
    "INSERT INTO audit_prune_permits (at, up_to_id, horizon, archive, archive_sha256, entries) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_ENTRY: Final = (
    "INSERT INTO audit_log (at, who, role, action, target, note, detail, result) "
    "VALUES (?, ?, 'command', ?, NULL, NULL, ?, ?)"
)

Context = Callable[[], AbstractContextManager[Connection]]


@dataclass(frozen=True, slots=True)
class AuditAgeing:
    """What a prune archived and deleted of the audit log (or, dry, would have)."""

    #: Entries older than this were aged (UTC).
    horizon: datetime
    #: Audit entries archived and deleted (dry: that would be).
    entries: int = 0
    #: Refusal counts (rows of minutes) archived and deleted (dry: that would be).
    refusals: int = 0
    #: The archive written; None when nothing was old enough, or on a dry run.
    archive: Path | None = None
    #: The archive's SHA-256 (hex), as its checksum file holds it.
    archive_sha256: str | None = None
    dry_run: bool = False


def _rows(read: Context, sql: str, last_id: int, before: str, batch: int) -> Iterator[Any]:
    """The rows ``sql`` selects up to ``last_id``, read ``batch`` at a time (short reads,
    memory flat)."""
    after = 0
    while True:
        with read() as conn:
            found = [tuple(row) for row in conn.execute(sql, (after, last_id, before, batch))]
        if not found:
            return
        yield from found
        after = found[-1][0]


def age_audit(
    read: Context,
    write: Context,
    *,
    now: datetime,
    older_than: timedelta,
    archive_path: Path,
    dry_run: bool = False,
    batch: int = 1000,
) -> AuditAgeing:
    """Archive into ``archive_path``, then delete, the audit entries made before
    ``now - older_than`` and the refusal counts of the minutes before it (see the module).

    :raises ArchiveError: the archive could not be written; nothing was deleted.
    :raises StorageError: a write failed; the batches before it stay deleted, and everything
        the permit covers is in the archive.
    """
    moment = now - older_than
    horizon, first_minute = to_text(moment, argument="now"), minute_of(moment)
    with read() as conn:
        last_entry, entries, last_refusal, refusals = conn.execute(
            _BOUNDS, (horizon, horizon, first_minute, first_minute)
        ).fetchone()
    ageing = AuditAgeing(moment, entries, refusals, dry_run=dry_run)
    if dry_run or not (entries or refusals):
        return ageing
    writer = ArchiveWriter(archive_path)
    try:
        entry_ids, refusal_ids = array("q"), array("q")
        for entry_id, at, who, role, action, target, note, detail, result in _rows(
            read, _ENTRY_BATCH, last_entry or 0, horizon, batch
        ):
            writer.write(
                "audit_log", entry_id, at, b"", who=who, role=role, action=action,
                target=target, note=note, detail=detail, result=result,
            )  # fmt: skip
            entry_ids.append(int(entry_id))
        for refusal_id, minute, who, role, action, code, times, target, last_at in _rows(
            read, _REFUSAL_BATCH, last_refusal or 0, first_minute, batch
        ):
            writer.write(
                "audit_refusals", refusal_id, minute, b"", who=who, role=role, action=action,
                code=code, times=times, first_target=target, last_at=last_at,
            )  # fmt: skip
            refusal_ids.append(int(refusal_id))
        digest = writer.commit()
    except BaseException:
        writer.discard()
        raise
    detail = {
        "entries": len(entry_ids),
        "refusals": len(refusal_ids),
        "horizon": horizon,
        "up_to_id": last_entry or 0,
        "archive": archive_path.name,
        "archive_sha256": digest,
    }
    result = f"archived and deleted {len(entry_ids)} entries and {len(refusal_ids)} refusal counts"
    with write() as conn:
        conn.execute(
            _PERMIT,
            (to_text(now), last_entry or 0, horizon, archive_path.name, digest, len(entry_ids)),
        )
        conn.execute(
            _ENTRY,
            (to_text(now), PRUNE_WHO, PRUNE_ACTION, json.dumps(detail, sort_keys=True), result),
        )
    _delete(write, "audit_log", entry_ids, batch)
    _delete(write, "audit_refusals", refusal_ids, batch)
    return AuditAgeing(
        moment,
        len(entry_ids),
        len(refusal_ids),
        archive=archive_path,
        archive_sha256=digest,
    )


def _delete(write: Context, table: str, ids: array[int], batch: int) -> None:
    """Delete the rows of ``table`` with ``ids``, ``batch`` per write transaction."""
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        marks = ", ".join("?" for _ in chunk)
        with write() as conn:
            conn.execute(f"DELETE FROM {table} WHERE id IN ({marks})", tuple(chunk))  # noqa: S608


def check_prune(older_than: object, audit_older_than: object, batch: object) -> timedelta:
    """The audit log's horizon for a prune of ``older_than``: ``audit_older_than`` when given,
    else the longer of :data:`DEFAULT_AUDIT_HORIZON` and
    ``older_than`` (the audit log never ages faster than the bodies it speaks of).

    :raises ValueError: ``older_than`` not positive, ``audit_older_than`` shorter than it,
        ``batch`` outside 1 to 10000.
    """
    if not isinstance(older_than, timedelta) or older_than <= timedelta(0):
        raise ValueError(f"older_than must be a positive timedelta; got {older_than!r}")
    horizon = max(older_than, DEFAULT_AUDIT_HORIZON)
    if audit_older_than is not None:
        if not isinstance(audit_older_than, timedelta) or audit_older_than < older_than:
            raise ValueError(
                "audit_older_than must be a timedelta no shorter than older_than; "
                f"got {audit_older_than!r}"
            )
        horizon = audit_older_than
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 10000:
        raise ValueError(f"batch must be an int from 1 to 10000; got {batch!r}")
    return horizon
