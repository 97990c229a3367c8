"""The finance rollup's first step: what changed since its watermark, as the local hours to
compute again (:mod:`payhooks.storage.reads.rollup`).

Only tables that are appended to are read, each from its watermark (an id): ``outcomes``,
``payments`` (a registration), ``creation_attempts`` (a refused creation makes a row
``not_created``; an attempt still sending changes nothing until it ends, so it is looked at
again), the rows ``service_transactions`` each sync run touched (column ``sync_run``) and the
identifiers its transactions left (``service_transaction_moves``), and the
move of the latest complete sync's ``expected_before`` (payments registered between the old and
the new horizon may have become missing at the service). Reviews and refused deliveries change
no finance figure, so they are not read. Each change names a payment; a payment is in the local
hours of every time that places it (:data:`~payhooks.storage.reads.rollup_sql.CHANGED_TIMES`),
which covers where it was counted as well as where it is now, since none of those rows is ever
deleted. Hours, not days: a late delivery makes one opened hour and one paid hour to compute
again, not two whole days.

On PostgreSQL ids can commit out of order: an id below the watermark not seen yet is a *hole*,
kept with the snapshot's ``xmax`` and read again at each refresh until it shows up or
``pg_snapshot_xmin`` passes that ``xmax`` (every transaction that could still commit it has
ended: it was rolled back). SQLite commits ids in order and never reuses one (nothing deletes
from these tables), so it has no holes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from typing import Any, NamedTuple

from payhooks.storage.reads.local_hours import hour_of, hours_between
from payhooks.storage.reads.rollup_sql import CHANGED_TIMES, CHANGES, PAYMENTS_ID

__all__ = ["Change", "HourMark", "Marks", "read_marks", "waiting_since"]

_IDENTIFIERS_PER_READ = 300
_SENDING = "creation_sending"


class Change(NamedTuple):
    """One appended row: the payment it names, when it happened, and what it was (a
    ``delivery``, a ``sync_run``, a ``registration``, a ``creation``) with its reference."""

    identifier: str
    at: str
    cause: str
    ref: str


@dataclass
class HourMark:
    """A local hour to compute again: its oldest waiting change, its newest one and what that
    was."""

    changed_at: str
    cause: str
    ref: str
    cause_at: str

    def add(self, at: str, cause: str, ref: str, cause_at: str) -> None:
        self.changed_at = min(self.changed_at, at)
        if cause_at >= self.cause_at:
            self.cause, self.ref, self.cause_at = cause, ref, cause_at


@dataclass
class Marks:
    """What one pass read: the hours to mark (by key and local date, as
    :func:`~payhooks.storage.reads.local_hours.hour_of` gives them) and the state to store
    with them."""

    sources: dict[str, int]
    pending: dict[str, dict[int, str]]
    horizon: str | None
    hours: dict[tuple[str, str], HourMark] = field(default_factory=dict)
    #: A source had more rows than one pass reads.
    more: bool = False
    changes: int = 0

    def mark(self, hour: tuple[str, str], at: str, cause: str, ref: str, cause_at: str) -> None:
        found = self.hours.get(hour)
        if found is None:
            self.hours[hour] = HourMark(at, cause, ref, cause_at)
        else:
            found.add(at, cause, ref, cause_at)


def _ranges(first: int, last: int, found: Iterable[int]) -> list[tuple[int, int]]:
    """``[first, last]`` less the ids found, as ranges."""
    left: list[tuple[int, int]] = []
    start = first
    for ident in sorted(i for i in found if first <= i <= last):
        if ident > start:
            left.append((start, ident - 1))
        start = max(start, ident + 1)
    if start <= last:
        left.append((start, last))
    return left


def _source(
    conn: Any,
    engine: str,
    source: str,
    marks: Marks,
    chunk: int,
    horizon: tuple[int, int] | None,
) -> list[Change]:
    """The rows appended to one source after its watermark (and in its holes), in id order."""
    up_to = marks.sources.get(source, 0)
    ident = PAYMENTS_ID[engine] if source == "payments" else "id"
    sql = CHANGES[source]
    rows = list(conn.execute(sql.format(id=ident, where=f"t.{ident} > ?"), (up_to, chunk)))
    marks.more = marks.more or len(rows) == chunk
    holes = marks.pending.get(source, {})
    kept: dict[int, str] = {}
    for first, seen in holes.items():
        last, xmax = (int(part) for part in seen.split())
        found = list(
            conn.execute(
                sql.format(id=ident, where=f"t.{ident} BETWEEN ? AND ?"), (first, last, chunk)
            )
        )
        rows.extend(found)
        if horizon is not None and horizon[0] > xmax:
            continue  # every transaction that could commit the rest has ended
        for start, end in _ranges(first, last, (row[0] for row in found)):
            kept[start] = f"{end} {xmax}"
    new = [row for row in rows if row[0] > up_to]
    if new:
        top = max(row[0] for row in new)
        if horizon is not None:  # PostgreSQL: the ids between not seen are holes
            for start, end in _ranges(up_to + 1, top, (row[0] for row in new)):
                kept[start] = f"{end} {horizon[1]}"
        marks.sources[source] = top
    marks.pending[source] = kept
    changes = []
    sending = marks.pending.setdefault(_SENDING, {})
    for ident_value, identifier, at, cause, ref, pending in rows:
        if pending:
            sending[ident_value] = "sending"
        else:
            changes.append(Change(identifier, at, cause, ref))
    return changes


def _finished_attempts(conn: Any, marks: Marks) -> list[Change]:
    """Attempts seen sending that have ended since (one read per pass; few at a time)."""
    sending = marks.pending.get(_SENDING, {})
    if not sending:
        return []
    ids = sorted(sending)
    where = f"t.id IN ({', '.join('?' for _ in ids)})"
    found = conn.execute(
        CHANGES["creation_attempts"].format(id="id", where=where), (*ids, len(ids))
    )
    changes = []
    for ident, identifier, at, cause, ref, pending in found:
        if not pending:
            del sending[ident]
            changes.append(Change(identifier, at, cause, ref))
    return changes


def _sync_runs(conn: Any, marks: Marks) -> list[Change]:
    """The rows of each sync run that committed pages (or ended) since it was last seen. The
    watermark passes a run once it is complete and every run below it is too."""
    up_to = marks.sources.get("sync_runs", 0)
    seen = marks.pending.get("sync_runs", {})
    kept: dict[int, str] = {}
    changes = []
    runs = conn.execute(
        "SELECT id, pages, status, updated_at FROM sync_runs WHERE id > ? ORDER BY id", (up_to,)
    ).fetchall()
    for run, pages, status, updated_at in runs:
        key = f"{pages} {status}"
        if seen.get(run) != key:
            touched = conn.execute(
                "SELECT external_identifier FROM service_transactions WHERE sync_run = ? "
                "UNION SELECT external_identifier FROM service_transaction_moves "
                "WHERE sync_run = ?",
                (run, run),
            )
            changes += [Change(ident, updated_at, "sync_run", str(run)) for (ident,) in touched]
        kept[run] = key
    for run, _pages, status, _at in runs:
        if run != up_to + 1 or status != "complete":
            break
        up_to = run
        del kept[run]
    marks.sources["sync_runs"] = up_to
    marks.pending["sync_runs"] = kept
    return changes


def _horizon(conn: Any, marks: Marks, zone: tzinfo) -> None:
    """When the latest complete sync moved ``expected_before``, every hour between the two
    horizons: the payments registered then may have changed (their drift)."""
    latest = conn.execute(
        "SELECT id, expected_before, COALESCE(finished_at, updated_at) FROM sync_runs "
        "WHERE status = 'complete' ORDER BY id DESC LIMIT 1"
    ).fetchone()
    if latest is None or latest[1] == marks.horizon:
        return
    run, horizon, at = latest
    old = marks.horizon
    if old is None:
        old = conn.execute("SELECT MIN(created_at) FROM payments").fetchone()[0] or horizon
    low, high = sorted((old, horizon))
    for hour in hours_between(low, high, zone):
        marks.mark(hour, at, "sync_run", str(run), at)
    marks.horizon = horizon


def _place(conn: Any, changes: list[Change], marks: Marks, zone: tzinfo) -> None:
    """Mark every local hour each changed payment was or is in."""
    by_payment: dict[str, tuple[str, Change]] = {}
    for change in changes:
        oldest, newest = by_payment.get(change.identifier, (change.at, change))
        if change.at >= newest.at:
            newest = change
        by_payment[change.identifier] = (min(oldest, change.at), newest)
    identifiers = sorted(by_payment)
    for start in range(0, len(identifiers), _IDENTIFIERS_PER_READ):
        part = identifiers[start : start + _IDENTIFIERS_PER_READ]
        placeholders = ", ".join("?" for _ in part)
        sql = CHANGED_TIMES.format(marks=placeholders)
        hours: dict[str, set[tuple[str, str]]] = {}
        for identifier, moment in conn.execute(sql, part * 3):
            hours.setdefault(identifier, set()).add(hour_of(moment[:16], zone))
        for identifier in part:
            oldest, newest = by_payment[identifier]
            for hour in hours.get(identifier, ()):
                marks.mark(hour, oldest, newest.cause, newest.ref, newest.at)


def read_marks(
    conn: Any,
    engine: str,
    zone: tzinfo,
    marks: Marks,
    *,
    chunk: int,
    horizon: tuple[int, int] | None,
) -> Marks:
    """Read, in ``conn``'s snapshot, what changed after ``marks``' watermarks (up to ``chunk``
    rows a source), into ``marks``: the hours and the watermarks to store together.

    :param horizon: PostgreSQL's ``(xmin, xmax)`` of the snapshot; None on SQLite.
    """
    changes: list[Change] = []
    for source in CHANGES:
        changes += _source(conn, engine, source, marks, chunk, horizon)
    changes += _finished_attempts(conn, marks)
    changes += _sync_runs(conn, marks)
    _horizon(conn, marks, zone)
    marks.changes = len(changes)
    _place(conn, changes, marks, zone)
    return marks


def waiting_since(
    conn: Any,
    engine: str,
    first: date | None = None,
    last: date | None = None,
    zone: str | None = None,
) -> datetime | None:
    """When the oldest change not yet in the rollup happened: one not yet marked, or one
    marked in an hour of a day from ``first`` to ``last`` (every day without them). None: up
    to date.

    A rollup kept in another zone than ``zone`` (the configured one: it will be built again)
    holds none of the changes: the oldest change waits."""
    times = []
    state = conn.execute("SELECT zone, sync_horizon FROM finance_rollup_state").fetchone()
    if state is None:
        return None
    dirty = "SELECT MIN(changed_at) FROM finance_rollup_dirty"
    params: tuple[str, ...] = ()
    if first is not None and last is not None:
        dirty += " WHERE day >= ? AND day <= ?"
        params = (first.isoformat(), last.isoformat())
    times.append(conn.execute(dirty, params).fetchone()[0])
    sources = dict(conn.execute("SELECT source, up_to FROM finance_rollup_sources"))
    if zone is not None and state[0] != zone:
        sources = {}
    for source, sql in CHANGES.items():
        ident = PAYMENTS_ID[engine] if source == "payments" else "id"
        row = conn.execute(
            sql.format(id=ident, where=f"t.{ident} > ?"), (sources.get(source, 0), 1)
        ).fetchone()
        times.append(None if row is None else row[2])
    seen = dict(
        conn.execute("SELECT id, seen FROM finance_rollup_pending WHERE source = 'sync_runs'")
    )
    for run, pages, status, at in conn.execute(
        "SELECT id, pages, status, updated_at FROM sync_runs WHERE id > ?",
        (sources.get("sync_runs", 0),),
    ):
        if seen.get(run) != f"{pages} {status}":
            times.append(at)
    times.append(
        conn.execute(
            "SELECT MIN(COALESCE(a.finished_at, a.started_at)) FROM creation_attempts AS a "
            "JOIN finance_rollup_pending AS p ON p.source = 'creation_sending' AND p.id = a.id "
            "WHERE a.state <> 'sending'"
        ).fetchone()[0]
    )
    present = [datetime.fromisoformat(t) for t in times if t is not None]
    return min(present) if present else None
