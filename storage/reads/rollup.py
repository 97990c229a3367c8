"""Finance's period totals kept by local hour, off the receiver's path (``finance.rollup``).

The receiver never writes here. A refresh, run by the console before its finance page reads
(under a time budget) or by ``payhooks rollup``, does two steps:

1. **Mark.** In one read snapshot, what was appended since the watermark
   (:mod:`payhooks.storage.reads.rollup_marks`) becomes the local days to compute again; the
   marks and the new watermark are written in one short transaction, so a refresh interrupted
   anywhere loses nothing: the next one finds either both or neither.
2. **Compute.** Each dirty day is computed from the rows, in a read snapshot, with finance's
   own SQL (:func:`~payhooks.storage.reads.finance_sql.opened_groups` and
   :data:`~payhooks.storage.reads.finance_sql.PAID_BUCKETS_SQL` by minute), folded into the
   zone's local hours here; then one short write replaces the day's rows, records the day in
   ``finance_days`` (revised when it had ended and its figures changed) and clears its mark,
   but only if the mark is still the version computed: a change marked meanwhile keeps it
   dirty for the next pass.

The first refresh (or the first after the zone changed) builds: every day that holds a row is
marked at once (the UTC hours of the indexes finance reads, scanned once). Until the build has
computed a day, the page reads it live; a day marked since it was computed is shown "as of" its
oldest waiting change (:meth:`Rollup.waiting_since`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from payhooks.storage.engines import Engine
from payhooks.storage.reads.local_hours import day_bounds, days_between, hour_days, local_day
from payhooks.storage.reads.rollup_days import (
    Difference,
    compare_day,
    day_sums,
    opened_rows,
    paid_rows,
)
from payhooks.storage.reads.rollup_marks import Marks, read_marks, waiting_since
from payhooks.storage.reads.rollup_sql import (
    BUILD_HOURS,
    DAY_OPENED,
    DAY_PAID,
    INSERT_DAY_OPENED,
    INSERT_DAY_PAID,
    INSERT_OPENED,
    INSERT_PAID,
    MARK_DIRTY,
    PAYMENTS_ID,
)
from payhooks.storage.reads.rollup_turn import Turn, take_turn
from payhooks.storage.times import Clock, to_text

__all__ = ["Difference", "RefreshReport", "RevisedDay", "Rollup"]

#: Rows read per source in one marking pass; days computed per snapshot.
#: Under a budget (the page's), a smaller chunk, so one pass stays near the budget.
_CHUNK, _BUDGET_CHUNK = 20_000, 2_000
_DAYS_PER_SNAPSHOT = 16
#: How long a build on PostgreSQL waits for the transactions running at its snapshot to end.
_SETTLE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """What one :meth:`Rollup.refresh` did, and what it left."""

    #: Days marked to compute again, and days computed (``revised``: of those, closed days
    #: whose figures changed).
    marked: int
    computed: int
    revised: int
    #: Days still to compute, and whether changes were left unread (the budget ran out).
    dirty_left: int
    unread_left: bool
    seconds: float
    #: Another refresh held the turn (PostgreSQL); this one did nothing.
    skipped: bool = False

    @property
    def done(self) -> bool:
        """Everything known when it ran is in the rollup."""
        return not self.skipped and not self.dirty_left and not self.unread_left


@dataclass(frozen=True, slots=True)
class RevisedDay:
    """A local day whose figures changed after it had ended: when, and by what (``cause``:
    ``delivery``, ``sync_run``, ``registration``, ``creation``; ``ref``: its id)."""

    day: date
    revised_at: datetime
    cause: str
    ref: str


@dataclass(frozen=True, slots=True)
class _Day:
    day: date
    version: int
    cause: str
    ref: str
    cause_at: str
    opened: list[tuple[Any, ...]]
    paid: list[tuple[Any, ...]]


class Rollup:
    """The finance rollup of one ledger: :meth:`refresh`, :meth:`verify`, :meth:`lag`, and
    what the finance book reads of it.

    :param engine: the ledger's engine.
    :param clock: the ledger's clock (when a day ended, when it was revised).
    """

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock
        #: The zone whose hours and days the rollup keeps (``PAYHOOKS_TIMEZONE``); when it
        #: differs from the one the rollup was built in, the next refresh builds it again and
        #: until then finance reads live.
        self.zone: ZoneInfo = ZoneInfo("UTC")
        #: False: finance reads every figure from the rows (to compare, to measure).
        self.enabled = True

    # -- refresh -------------------------------------------------------------------------

    def refresh(self, budget: float | None = None) -> RefreshReport:
        """Bring the rollup up to date, or as near as ``budget`` seconds allow (checked
        between steps: one step is one chunk of changes or a few days).

        :raises StorageError: the database failed; what was written before stays, and the next
            refresh goes on from there.
        """
        began = time.monotonic()
        deadline = None if budget is None else began + budget

        def out_of_time() -> bool:
            return deadline is not None and time.monotonic() >= deadline

        marked = computed = revised = 0
        more = False
        with take_turn(self._engine) as turn:
            if turn is None:
                return RefreshReport(0, 0, 0, 0, True, time.monotonic() - began, skipped=True)
            if not self._built(turn):
                marked += self._build(turn)
            while True:
                found, more = self._mark(turn, _CHUNK if budget is None else _BUDGET_CHUNK)
                marked += found
                if not more or out_of_time():
                    break
            while not out_of_time():
                days, changed = self._compute(turn, out_of_time)
                computed, revised = computed + days, revised + changed
                if not days:
                    break
            with turn.snapshot() as conn:
                (left,) = conn.execute("SELECT COUNT(*) FROM finance_rollup_dirty").fetchone()
        return RefreshReport(marked, computed, revised, left, more, time.monotonic() - began)

    def _built(self, turn: Turn) -> bool:
        with turn.snapshot() as conn:
            found = conn.execute("SELECT zone FROM finance_rollup_state").fetchone()
        return found is not None and found[0] == self.zone.key

    def _build(self, turn: Turn) -> int:
        """Start over in :attr:`zone`: every day that holds a row marked (the UTC hours of the
        indexes finance reads, scanned once), the watermarks at the newest rows. On
        PostgreSQL the transactions running at the snapshot are waited for (at most
        :data:`_SETTLE_SECONDS`), so no id below the watermarks can commit later."""
        engine, zone = self._engine.kind, self.zone
        with turn.snapshot() as conn:
            horizon = turn.horizon(conn)
            tops = {
                "outcomes": conn.execute("SELECT MAX(id) FROM outcomes").fetchone()[0],
                "payments": conn.execute(
                    f"SELECT MAX({PAYMENTS_ID[engine]}) FROM payments"  # noqa: S608
                ).fetchone()[0],
                "creation_attempts": conn.execute(
                    "SELECT MAX(id) FROM creation_attempts"
                ).fetchone()[0],
            }
            sending = [
                i
                for (i,) in conn.execute("SELECT id FROM creation_attempts WHERE state = 'sending'")
            ]
            runs = conn.execute("SELECT id, pages, status FROM sync_runs ORDER BY id").fetchall()
            latest = conn.execute(
                "SELECT expected_before FROM sync_runs WHERE status = 'complete' "
                "ORDER BY id DESC LIMIT 1"
            ).fetchone()
            hours = {hour for (hour,) in conn.execute(BUILD_HOURS)}
        if horizon is not None:
            self._settle(turn, horizon[1])
        days = sorted({day for hour in hours for day in hour_days(hour, zone)})
        sync_seen = {run: f"{pages} {status}" for run, pages, status in runs}
        done = 0
        for run, _pages, status in runs:
            if run != done + 1 or status != "complete":
                break
            done = run
            del sync_seen[run]
        now = to_text(self._clock())
        with turn.write() as conn:
            for table in (
                "finance_hours_opened",
                "finance_hours_paid",
                "finance_days_opened",
                "finance_days_paid",
                "finance_days",
                "finance_rollup_dirty",
                "finance_rollup_sources",
                "finance_rollup_pending",
                "finance_rollup_state",
            ):
                conn.execute(f"DELETE FROM {table}")  # noqa: S608 - constants
            conn.execute(
                "INSERT INTO finance_rollup_state (id, zone, sync_horizon) VALUES (1, ?, ?)",
                (zone.key, None if latest is None else latest[0]),
            )
            sources = {**{k: v or 0 for k, v in tops.items()}, "sync_runs": done}
            conn.executemany(
                "INSERT INTO finance_rollup_sources (source, up_to) VALUES (?, ?)",
                sorted(sources.items()),
            )
            pending = [("creation_sending", i, "sending") for i in sending]
            pending += [("sync_runs", run, seen) for run, seen in sync_seen.items()]
            conn.executemany(
                "INSERT INTO finance_rollup_pending (source, id, seen) VALUES (?, ?, ?)", pending
            )
            conn.executemany(
                MARK_DIRTY, [(d.isoformat(), now, now, "build", "", now) for d in days]
            )
        return len(days)

    def _settle(self, turn: Turn, xmax: int) -> None:
        """Wait until every transaction running at a snapshot whose ``xmax`` this was has
        ended (PostgreSQL)."""
        give_up = time.monotonic() + _SETTLE_SECONDS
        while True:
            with turn.snapshot() as conn:
                horizon = turn.horizon(conn)
            if horizon is None or horizon[0] >= xmax:
                return
            if time.monotonic() > give_up:
                raise TimeoutError("a transaction stayed open through the rollup's build")
            time.sleep(0.01)

    def _mark(self, turn: Turn, chunk: int) -> tuple[int, bool]:
        """One marking pass: how many days it marked, and whether changes are left unread."""
        with turn.snapshot() as conn:
            sources = dict(conn.execute("SELECT source, up_to FROM finance_rollup_sources"))
            pending: dict[str, dict[int, str]] = {}
            for source, ident, seen in conn.execute(
                "SELECT source, id, seen FROM finance_rollup_pending"
            ):
                pending.setdefault(source, {})[ident] = seen
            (horizon,) = conn.execute("SELECT sync_horizon FROM finance_rollup_state").fetchone()
            marks = Marks(dict(sources), {k: dict(v) for k, v in pending.items()}, horizon)
            read_marks(
                conn,
                self._engine.kind,
                self.zone,
                marks,
                chunk=chunk,
                horizon=turn.horizon(conn),
            )
        if (marks.sources, marks.pending, marks.horizon) == (
            sources,
            pending,
            horizon,
        ) and not marks.days:
            return 0, False
        now = to_text(self._clock())
        with turn.write() as conn:
            if dict(conn.execute("SELECT source, up_to FROM finance_rollup_sources")) != sources:
                return 0, True  # another refresh marked these changes meanwhile
            conn.executemany(
                MARK_DIRTY,
                [
                    (day.isoformat(), now, m.changed_at, m.cause, m.ref, m.cause_at)
                    for day, m in sorted(marks.days.items())
                ],
            )
            conn.executemany(
                "INSERT INTO finance_rollup_sources (source, up_to) VALUES (?, ?) "
                "ON CONFLICT (source) DO UPDATE SET up_to = excluded.up_to",
                sorted(marks.sources.items()),
            )
            conn.execute("DELETE FROM finance_rollup_pending")
            conn.executemany(
                "INSERT INTO finance_rollup_pending (source, id, seen) VALUES (?, ?, ?)",
                [
                    (s, i, seen)
                    for s, found in sorted(marks.pending.items())
                    for i, seen in found.items()
                ],
            )
            conn.execute("UPDATE finance_rollup_state SET sync_horizon = ?", (marks.horizon,))
        return len(marks.days), marks.more

    def _compute(self, turn: Turn, out_of_time: Callable[[], bool]) -> tuple[int, int]:
        """Compute a few dirty days: how many were stored, and how many of them revised."""
        zone = self.zone
        found: list[_Day] = []
        with turn.snapshot() as conn:
            dirty = conn.execute(
                "SELECT day, version, cause, cause_ref, cause_at FROM finance_rollup_dirty "
                "ORDER BY day LIMIT ?",
                (_DAYS_PER_SNAPSHOT,),
            ).fetchall()
            for day_text, version, cause, ref, cause_at in dirty:
                day = date.fromisoformat(day_text)
                start, end = day_bounds(day, zone)
                opened = opened_rows(conn, start, end, zone)
                paid = paid_rows(conn, start, end, zone)
                found.append(_Day(day, version, cause, ref, cause_at, opened, paid))
                if out_of_time():
                    break
        stored = revised = 0
        for computed in found:
            outcome = self._store(turn, computed)
            stored += outcome is not None
            revised += bool(outcome)
        return stored, revised

    def _store(self, turn: Turn, found: _Day) -> bool | None:
        """Store one computed day, if its mark is still the version computed: None when it was
        not (marked again meanwhile), else whether the day was revised."""
        day = found.day.isoformat()
        start, end = day_bounds(found.day, self.zone)
        span = (to_text(start), to_text(end))
        now = self._clock()
        with turn.write() as conn:
            mark = conn.execute(
                "SELECT version FROM finance_rollup_dirty WHERE day = ?", (day,)
            ).fetchone()
            if mark is None or mark[0] != found.version:
                return None
            old_opened = sorted(tuple(r) for r in conn.execute(DAY_OPENED, span))
            old_paid = sorted(tuple(r) for r in conn.execute(DAY_PAID, span))
            changed = (old_opened, old_paid) != (found.opened, found.paid)
            if changed:
                conn.execute("DELETE FROM finance_hours_opened WHERE hour >= ? AND hour < ?", span)
                conn.execute("DELETE FROM finance_hours_paid WHERE hour >= ? AND hour < ?", span)
                conn.execute("DELETE FROM finance_days_opened WHERE day = ?", (day,))
                conn.execute("DELETE FROM finance_days_paid WHERE day = ?", (day,))
                conn.executemany(INSERT_OPENED, found.opened)
                conn.executemany(INSERT_PAID, found.paid)
                conn.executemany(INSERT_DAY_OPENED, day_sums(found.opened, 6))
                conn.executemany(INSERT_DAY_PAID, day_sums(found.paid, 2))
            before = conn.execute(
                "SELECT closed, revised_at, revised_by, revised_ref FROM finance_days "
                "WHERE day = ?",
                (day,),
            ).fetchone()
            revised = bool(
                changed and before is not None and (before[0] or found.cause_at >= span[1])
            )
            why = (
                (to_text(now), found.cause, found.ref)
                if revised
                else ((None, None, None) if before is None else tuple(before[1:]))
            )
            conn.execute(
                "INSERT INTO finance_days (day, computed_at, closed, revised_at, revised_by, "
                "revised_ref) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (day) DO UPDATE SET "
                "computed_at = excluded.computed_at, closed = excluded.closed, "
                "revised_at = excluded.revised_at, revised_by = excluded.revised_by, "
                "revised_ref = excluded.revised_ref",
                (day, to_text(now), int(end <= now), *why),
            )
            conn.execute(
                "DELETE FROM finance_rollup_dirty WHERE day = ? AND version = ?",
                (day, found.version),
            )
        return revised

    # -- checks --------------------------------------------------------------------------

    def verify(self, days: int) -> list[Difference]:
        """Compute the last ``days`` local days (today included) from the rows, in one
        snapshot, and compare them with the stored buckets; days still dirty are skipped
        (a refresh first leaves few). Every bucket that differs, oldest first.

        :raises ValueError: ``days`` is not an int from 1 to 3660.
        """
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 3660:
            raise ValueError(f"days must be an int from 1 to 3660; got {days!r}")
        zone, today = self.zone, local_day(self._clock(), self.zone)
        found: list[Difference] = []
        with take_turn(self._engine) as turn, (turn or Turn(self._engine)).snapshot() as conn:
            dirty = {d for (d,) in conn.execute("SELECT day FROM finance_rollup_dirty")}
            for day in days_between(today - timedelta(days=days - 1), today):
                if day.isoformat() not in dirty:
                    found += compare_day(conn, day, zone)
        return found

    def waiting_since(
        self, conn: Any, first: date | None = None, last: date | None = None
    ) -> datetime | None:
        """When the oldest change not yet in the rollup happened: one not yet marked, or one
        marked on a day from ``first`` to ``last`` (every day without them). None: up to date."""
        return waiting_since(conn, self._engine.kind, first, last, self.zone.key)

    def lag(self) -> timedelta:
        """How long the oldest change not yet in the rollup has waited (zero when none)."""
        with self._engine.read() as conn:
            waiting = waiting_since(conn, self._engine.kind, zone=self.zone.key)
        if waiting is None:
            return timedelta(0)
        return max(timedelta(0), self._clock() - waiting)

    def revised(self, first: date, last: date) -> list[RevisedDay]:
        """The days from ``first`` to ``last`` revised after they had ended, oldest first."""
        with self._engine.read() as conn:
            rows = conn.execute(
                "SELECT day, revised_at, revised_by, revised_ref FROM finance_days "
                "WHERE day >= ? AND day <= ? AND revised_at IS NOT NULL ORDER BY day",
                (first.isoformat(), last.isoformat()),
            ).fetchall()
        return [
            RevisedDay(date.fromisoformat(d), datetime.fromisoformat(at), by, ref)
            for d, at, by, ref in rows
        ]
