"""``payhooks prune``: archive, then drop, the raw bodies of old finished deliveries and old
refused requests, then age the audit log (:mod:`payhooks.storage.audit_ageing`); and put
archived bodies back.

A delivery is *finished* for pruning when it is ``processed`` or ``duplicate`` and no signal
its outcome owes is unsent: nothing will parse its body again (``payhooks reprocess`` takes the
unfinished ones), and the merchant's code has heard of it. A ``conflicting_outcome`` delivery
keeps its body: it is a problem somebody has to read. Pruning empties the body and the headers
and sets ``pruned_at`` and ``pruned_into`` (the archive's file name); ``body_sha256``, the
status, the outcome and everything a payment's story reads stay. A refused request past the
age is deleted (its row holds nothing else).

The work goes in batches, each one short read or one short write transaction, so a receiver
writing at the same time waits at most one batch (SQLite has one writer). The archive is
written whole first; rows are emptied only when it and its checksum are on disk, and a row
that stopped being finished in between (a signal owed anew) is left as it is: the check and
the emptying are one statement. Before anything, a prune sweeps its archive folder of what a
prune stopped before it left there (:mod:`payhooks.storage.archive_leftovers`), and every
archive's name is its own (:func:`archive_name`), so a retry in the same second never finds its
name taken. (On PostgreSQL, at READ COMMITTED, a signal owed by a
transaction committing at that very instant can slip past the check; that costs nothing, for
sending a signal reads the outcome, never the body.) The SQL is plain and runs on both engines.
"""

from __future__ import annotations

import json
import re
import secrets
from array import array
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from payhooks.storage.archive_leftovers import ArchiveLeftovers, sweep_leftovers
from payhooks.storage.archives import (
    ARCHIVE_PREFIX,
    ARCHIVE_SUFFIX,
    ArchivedRow,
    ArchiveError,
    ArchiveWriter,
    read_archive,
)
from payhooks.storage.audit_ageing import AuditAgeing, age_audit
from payhooks.storage.encoding import to_json
from payhooks.storage.sql import Connection
from payhooks.storage.times import to_text

__all__ = ["DEFAULT_PRUNE_BATCH", "PruneReport", "archive_name", "prune", "restore"]

#: Rows per transaction, read or write.
DEFAULT_PRUNE_BATCH: Final = 1000

_PRUNABLE: Final = "('processed', 'duplicate')"
# Through owed_signals_unsent (outcome_id) WHERE sent_at IS NULL.
_FINISHED: Final = f"""d.status IN {_PRUNABLE} AND d.pruned_at IS NULL
    AND NOT EXISTS (
        SELECT 1 FROM owed_signals AS s WHERE s.outcome_id = d.outcome_id AND s.sent_at IS NULL
    )"""  # noqa: S608 - constants only
_DELIVERY_COLUMNS: Final = (
    "d.id, d.received_at, d.body, d.dedupe_key, d.status, d.external_identifier, d.outcome_id, "
    "d.attempts, d.headers"
)
_DELIVERY_SELECT: Final = f"""
    SELECT {{columns}} FROM deliveries AS d
    WHERE d.id > ? AND d.id <= ? AND d.received_at < ? AND {_FINISHED}
    ORDER BY d.id LIMIT ?"""  # noqa: S608 - constants only
_DELIVERY_BATCH: Final = _DELIVERY_SELECT.format(columns=_DELIVERY_COLUMNS)
_DELIVERY_COUNT: Final = _DELIVERY_SELECT.format(columns="d.id, d.received_at, length(d.body)")
_REJECTED_SELECT: Final = """
    SELECT {columns} FROM rejected_deliveries
    WHERE id > ? AND id <= ? AND received_at < ? ORDER BY id LIMIT ?"""
_REJECTED_BATCH: Final = _REJECTED_SELECT.format(
    columns="id, received_at, body, reason, remote_addr, body_size"
)
_REJECTED_COUNT: Final = _REJECTED_SELECT.format(columns="id, received_at, length(body)")
_MAX_IDS: Final = (
    "SELECT (SELECT COALESCE(MAX(id), 0) FROM deliveries), "
    "(SELECT COALESCE(MAX(id), 0) FROM rejected_deliveries)"
)
# Only the rows archived, and only while still finished; "(:ids)" becomes their placeholders.
_PRUNE: Final = (
    "UPDATE deliveries AS d SET body = ?, headers = '{}', pruned_at = ?, pruned_into = ? "  # noqa: S608
    f"WHERE d.id IN (:ids) AND {_FINISHED}"
)
_RESTORE: Final = (
    "UPDATE deliveries SET body = ?, headers = ?, pruned_at = NULL, pruned_into = NULL "
    "WHERE id = ? AND body_sha256 = ? AND pruned_at IS NOT NULL"
)

# What the receiver stores: a few headers (the scheme's and STORED_HEADERS), lower-case names.
_MAX_HEADERS: Final = 16
_MAX_HEADER_VALUE: Final = 4096
_HEADER_NAME: Final = re.compile(r"[a-z0-9!#$%&'*+.^_`|~-]{1,64}")

Read = Callable[[], AbstractContextManager[Connection]]
Write = Callable[[], AbstractContextManager[Connection]]


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What a prune archived and dropped (or, dry, would have)."""

    #: The archive written; None when nothing was old enough, or on a dry run.
    archive: Path | None
    #: Deliveries whose body and headers were archived (dry: would be).
    archived_deliveries: int
    #: Of those, how many were emptied (the others stopped being finished meanwhile).
    pruned_deliveries: int
    #: Refused requests archived and deleted (dry: would be).
    rejected: int
    #: The bodies' bytes archived (dry: would be).
    body_bytes: int
    dry_run: bool
    #: What prunes stopped before this one left in the archive folder, and what became of it
    #: (dry: what would).
    leftovers: ArchiveLeftovers = field(default_factory=ArchiveLeftovers)
    #: What became of the audit log's old entries (dry: what would); None before it ran.
    audit: AuditAgeing | None = None


def archive_name(now: datetime, token: str | None = None) -> str:
    """The file name of an archive written at ``now`` (UTC), its own:
    ``payhooks-prune-20260501T120000.123456Z-9f86d081.jsonl.gz``. The time (to the
    microsecond, fixed width) sorts the names by when they were written; ``token``, eight
    random hex digits when None, makes two prunes in the same instant (two processes, a fixed
    clock) write two files."""
    token = secrets.token_hex(4) if token is None else token
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return f"{ARCHIVE_PREFIX}{stamp}-{token}{ARCHIVE_SUFFIX}"


def _batches(
    read: Read, sql: str, last_id: int, cutoff: str, batch: int
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows ``sql`` selects, ``batch`` at a time, each batch one short read."""
    after = 0
    while True:
        with read() as conn:
            rows = [tuple(row) for row in conn.execute(sql, (after, last_id, cutoff, batch))]
        if not rows:
            return
        yield rows
        after = rows[-1][0]


def _in(ids: array[int]) -> str:
    return ", ".join("?" for _ in ids)


def prune(
    read: Read,
    write: Write,
    *,
    now: datetime,
    older_than: timedelta,
    audit_older_than: timedelta,
    archive_dir: Path,
    dry_run: bool = False,
    batch: int = DEFAULT_PRUNE_BATCH,
) -> PruneReport:
    """Archive, then drop, what was received before ``now - older_than`` (see the module);
    then age the audit log past ``now - audit_older_than`` into an archive of its own
    (:mod:`payhooks.storage.audit_ageing`).

    :raises ArchiveError: an archive could not be written; nothing it would hold was dropped.
    :raises StorageError: a batch could not be written; the batches before it stay pruned,
        and their rows are in the archive.
    """
    leftovers = sweep_leftovers(archive_dir, dry_run=dry_run)
    report = _prune_bodies(
        read, write, now=now, older_than=older_than, archive_dir=archive_dir,
        dry_run=dry_run, batch=batch, leftovers=leftovers,
    )  # fmt: skip
    ageing = age_audit(
        read, write, now=now, older_than=audit_older_than,
        archive_path=archive_dir / archive_name(now), dry_run=dry_run, batch=batch,
    )  # fmt: skip
    return replace(report, audit=ageing)


def _prune_bodies(
    read: Read,
    write: Write,
    *,
    now: datetime,
    older_than: timedelta,
    archive_dir: Path,
    dry_run: bool,
    batch: int,
    leftovers: ArchiveLeftovers,
) -> PruneReport:
    """The bodies' part of :func:`prune`."""
    cutoff = to_text(now - older_than, argument="now")
    with read() as conn:
        last_delivery, last_rejected = conn.execute(_MAX_IDS).fetchone()
    if dry_run:
        return _count(read, last_delivery, last_rejected, cutoff, batch, leftovers)
    delivery_ids, rejected_ids = array("q"), array("q")
    body_bytes = 0
    writer = ArchiveWriter(archive_dir / archive_name(now))
    try:
        for rows in _batches(read, _DELIVERY_BATCH, last_delivery, cutoff, batch):
            for row_id, received_at, body, key, status, ident, outcome, attempts, headers in rows:
                raw = bytes(body)
                writer.write(
                    "deliveries",
                    row_id,
                    received_at,
                    raw,
                    dedupe_key=key,
                    status=status,
                    external_identifier=ident,
                    outcome_id=outcome,
                    attempts=attempts,
                    headers=headers,
                )
                delivery_ids.append(row_id)
                body_bytes += len(raw)
        for rows in _batches(read, _REJECTED_BATCH, last_rejected, cutoff, batch):
            for row_id, received_at, body, reason, remote_addr, body_size in rows:
                raw = bytes(body)
                writer.write(
                    "rejected_deliveries",
                    row_id,
                    received_at,
                    raw,
                    reason=reason,
                    remote_addr=remote_addr,
                    body_size=body_size,
                )
                rejected_ids.append(row_id)
                body_bytes += len(raw)
        if not writer.records:
            writer.discard()
            return PruneReport(None, 0, 0, 0, 0, dry_run=False, leftovers=leftovers)
        writer.commit()
    except BaseException:
        writer.discard()
        raise
    pruned = _drop(write, delivery_ids, rejected_ids, writer.path.name, to_text(now), batch)
    return PruneReport(
        writer.path,
        len(delivery_ids),
        pruned,
        len(rejected_ids),
        body_bytes,
        dry_run=False,
        leftovers=leftovers,
    )


def _drop(
    write: Write,
    delivery_ids: array[int],
    rejected_ids: array[int],
    name: str,
    now: str,
    batch: int,
) -> int:
    """Empty the archived deliveries still finished and delete the archived refused requests,
    ``batch`` rows per write; how many deliveries were emptied."""
    pruned = 0
    for start in range(0, len(delivery_ids), batch):
        ids = delivery_ids[start : start + batch]
        sql = _PRUNE.replace("(:ids)", f"({_in(ids)})")
        with write() as conn:
            pruned += conn.execute(sql, (b"", now, name, *ids)).rowcount
    for start in range(0, len(rejected_ids), batch):
        ids = rejected_ids[start : start + batch]
        with write() as conn:
            conn.execute(f"DELETE FROM rejected_deliveries WHERE id IN ({_in(ids)})", tuple(ids))  # noqa: S608
    return pruned


def _count(
    read: Read,
    last_delivery: int,
    last_rejected: int,
    cutoff: str,
    batch: int,
    leftovers: ArchiveLeftovers,
) -> PruneReport:
    """A dry run: what :func:`prune` would archive, read in the same batches; nothing written."""
    counts = []
    body_bytes = 0
    for sql, last_id in ((_DELIVERY_COUNT, last_delivery), (_REJECTED_COUNT, last_rejected)):
        count = 0
        for rows in _batches(read, sql, last_id, cutoff, batch):
            count += len(rows)
            body_bytes += sum(size for _, _, size in rows)
        counts.append(count)
    return PruneReport(
        None, counts[0], counts[0], counts[1], body_bytes, dry_run=True, leftovers=leftovers
    )


def _checked_headers(row: ArchivedRow, path: Path, names: Collection[str] | None) -> str:
    """A delivery's archived headers, if they are what the receiver stores: a JSON object of
    at most a few lower-case header names (``names`` only, when given) to short strings.
    Restored unchecked, anything else would break every later read of the delivery.

    :raises ArchiveError: naming the delivery.
    """
    text = row.columns.get("headers")
    try:
        headers = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        headers = None
    if (
        isinstance(headers, dict)
        and len(headers) <= _MAX_HEADERS
        and all(
            _HEADER_NAME.fullmatch(name)
            and (names is None or name in names)
            and isinstance(value, str)
            and len(value) <= _MAX_HEADER_VALUE
            for name, value in headers.items()
        )
    ):
        return to_json(headers)
    raise ArchiveError(
        f"The archive {path}: delivery {row.id}'s headers are not the few short headers a "
        "receiver stores."
    )


def restore(
    write: Write,
    path: Path,
    batch: int = DEFAULT_PRUNE_BATCH,
    *,
    header_names: Collection[str] | None = None,
) -> tuple[int, int]:
    """Put the archived bodies and headers back into the deliveries still pruned with the same
    ``body_sha256``, ``batch`` rows per write; every body is checked against its SHA-256 first
    (:func:`~payhooks.storage.archives.read_archive`), and every delivery's headers against
    what a receiver stores (names among ``header_names``, when given). Refused requests are not
    put back (a bounded trace). Returns (deliveries restored, rows in the archive).

    :raises ArchiveError: the archive is damaged; what was restored before the bad line stays.
    """
    restored = total = 0
    pending: list[tuple[Any, ...]] = []

    def flush() -> int:
        with write() as conn:
            done = sum(conn.execute(_RESTORE, values).rowcount for values in pending)
        pending.clear()
        return done

    for row in read_archive(path):
        total += 1
        if row.table == "deliveries":
            headers = _checked_headers(row, path, header_names)
            pending.append((row.body, headers, row.id, row.body_sha256))
        if len(pending) >= batch:
            restored += flush()
    if pending:
        restored += flush()
    return restored, total
