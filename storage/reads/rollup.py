"""Finance's period totals kept by local hour, off the receiver's path (``finance.rollup``).

The receiver never writes here. A refresh, run by the console before its finance page reads
(under a time budget) or by ``payhooks rollup``, does two steps:

1. **Mark.** In one read snapshot, what was appended since the watermark
   (:mod:`payhooks.storage.reads.rollup_marks`) becomes the local hours to compute again; the
   marks and the new watermark are written in one short transaction, so a refresh interrupted
   anywhere loses nothing: the next one finds either both or neither.
2. **Compute.** Dirty hours, oldest first, are computed from the rows in one read snapshot,
   each with finance's own SQL (:func:`~payhooks.storage.reads.finance_sql.opened_groups` and
   :data:`~payhooks.storage.reads.finance_sql.PAID_BUCKETS_SQL` by minute) folded into the
   zone's local hours; then one short write stores them: each hour's rows replaced and its mark
   cleared, but only if the mark is still the version computed (a change marked meanwhile keeps
   it dirty for the next pass); the days they touched summed again from their hours and
   recorded in ``finance_days`` (revised when an hour of an ended day changed).

Marks are by hour, not by day, so that a step's cost follows an hour's rows whatever the
ledger's size: the page's budget is checked after each hour (a few ms at 10^6 payments, tens at
10^7, where a day was half a second), and a late delivery computes one opened hour and one paid
hour again, not two days.

The first refresh (or the first after the zone changed) builds: every local hour that holds a
row is marked at once (the UTC hours of the indexes finance reads, scanned once). Until the
build has computed a day's hours, the page reads that day live; a day with an hour marked since
it was computed is shown "as of" its oldest waiting change (:meth:`Rollup.waiting_since`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from payhooks.storage.engines import Engine
from payhooks.storage.reads.local_hours import (
    day_bounds,
    days_between,
    hour_end,
    local_day,
)
from payhooks.storage.reads.rollup_build import build, built
from payhooks.storage.reads.rollup_days import Difference, compare_day, opened_rows, paid_rows
from payhooks.storage.reads.rollup_marks import Marks, read_marks, waiting_since
from payhooks.storage.reads.rollup_sql import (
    HOURS_OPENED,
    HOURS_PAID,
    INSERT_OPENED,
    INSERT_PAID,
    MARK_DIRTY,
    SUM_DAY_OPENED,
    SUM_DAY_PAID,
)
from payhooks.storage.reads.rollup_turn import Turn, take_turn
from payhooks.storage.times import Clock, to_text

__all__ = ["Difference", "RefreshReport", "RevisedDay", "Rollup"]

#: Rows read per source in one marking pass.
#: Under a budget (the page's), a smaller chunk, so one pass stays near the budget.
_CHUNK, _BUDGET_CHUNK = 20_000, 2_000
#: Hours computed in one read snapshot at most, then stored in one write: two days, so a
#: build's writes stay short (tens of ms at 10^7 payments).
_HOURS_PER_STEP = 48


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """What one :meth:`Rollup.refresh` did, and what it left."""

    #: Local hours marked to compute again, and hours computed (``revised``: days marked
    #: revised, an hour of theirs changed after they had ended).
    marked: int
    computed: int
    revised: int
    #: Hours still to compute, and whether changes were left unread (the budget ran out).
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


def _runs(dirty: list[tuple[Any, ...]], zone: ZoneInfo) -> list[list[tuple[Any, ...]]]:
    """Dirty marks (ordered by day and hour) in runs of hours of one day, each starting where
    the one before ends."""
    found: list[list[tuple[Any, ...]]] = []
    for row in dirty:
        last = found[-1][-1] if found else None
        if last is not None and last[1] == row[1] and _after(last[0], zone) == row[0]:
            found[-1].append(row)
        else:
            found.append([row])
    return found


def _after(hour: str, zone: ZoneInfo) -> str:
    """The stored text of the start of the local hour after ``hour``."""
    return to_text(hour_end(datetime.fromisoformat(hour), zone))


def _by_hour(rows: list[tuple[Any, ...]]) -> dict[str, list[tuple[Any, ...]]]:
    """A range's hour rows (``hour`` first, sorted) by hour."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        found.setdefault(row[0], []).append(row)
    return found


@dataclass(frozen=True, slots=True)
class _Hour:
    """A dirty hour computed: its key and end, its day, its mark, and its rows."""

    hour: str
    end: str
    day: str
    version: int
    cause: str
    ref: str
    cause_at: str
    opened: list[tuple[Any, ...]]
    paid: list[tuple[Any, ...]]


class Rollup:
    """The finance rollup of one ledger: :meth:`refresh`, :meth:`verify`, and
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
        between steps: one step is one chunk of changes or one local hour computed).

        :raises StorageError: the database failed; what was written before stays, and the next
            refresh goes on from there.
        """
        began = time.monotonic()
        deadline = None if budget is None else began + budget

        def out_of_time() -> bool:
            return deadline is not None and time.monotonic() >= deadline

        marked = computed = 0
        revised: set[str] = set()
        more = False
        with take_turn(self._engine) as turn:
            if turn is None:
                return RefreshReport(0, 0, 0, 0, True, time.monotonic() - began, skipped=True)
            if not built(turn, self.zone):
                marked += build(turn, self._engine.kind, self.zone, self._clock)
            while True:
                found, more = self._mark(turn, _CHUNK if budget is None else _BUDGET_CHUNK)
                marked += found
                if not more or out_of_time():
                    break
            while not out_of_time():
                # Under a budget a step computes for half the time left: its write (each
                # hour's rows compared and replaced: a round trip each on PostgreSQL) takes
                # about as long again, and must fit too.
                halfway = None if deadline is None else (time.monotonic() + deadline) / 2
                hours, changed = self._compute(turn, halfway)
                computed, revised = computed + hours, revised | changed
                if not hours:
                    break
            with turn.snapshot() as conn:
                (left,) = conn.execute("SELECT COUNT(*) FROM finance_rollup_dirty").fetchone()
        return RefreshReport(marked, computed, len(revised), left, more, time.monotonic() - began)

    def _mark(self, turn: Turn, chunk: int) -> tuple[int, bool]:
        """One marking pass: how many hours it marked, and whether changes are left unread."""
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
        ) and not marks.hours:
            return 0, False
        now = to_text(self._clock())
        with turn.write() as conn:
            if dict(conn.execute("SELECT source, up_to FROM finance_rollup_sources")) != sources:
                return 0, True  # another refresh marked these changes meanwhile
            conn.executemany(
                MARK_DIRTY,
                [
                    (hour, day, now, m.changed_at, m.cause, m.ref, m.cause_at)
                    for (hour, day), m in sorted(marks.hours.items())
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
        return len(marks.hours), marks.more

    def _compute(self, turn: Turn, stop_at: float | None) -> tuple[int, set[str]]:
        """Compute dirty hours, oldest first, in one snapshot (:data:`_HOURS_PER_STEP` at
        most), then store them: how many hours were stored, and the days revised.

        :param stop_at: a ``time.monotonic()`` after which no step starts (checked after each),
            and a step is one hour, so that a budget (the page's) is overrun by at most an
            hour's rows. None: no budget, and a step reads a run of consecutive dirty hours of
            one day in one range (a build's day is two statements, not 48).
        """
        zone = self.zone
        found: list[_Hour] = []
        with turn.snapshot() as conn:
            dirty = conn.execute(
                "SELECT hour, day, version, cause, cause_ref, cause_at FROM finance_rollup_dirty "
                "ORDER BY day, hour LIMIT ?",
                (_HOURS_PER_STEP,),
            ).fetchall()
            for run in _runs(dirty, zone) if stop_at is None else [[row] for row in dirty]:
                start = datetime.fromisoformat(run[0][0])
                end = hour_end(datetime.fromisoformat(run[-1][0]), zone)
                opened = _by_hour(opened_rows(conn, start, end, zone))
                paid = _by_hour(paid_rows(conn, start, end, zone))
                for hour, day, version, cause, ref, cause_at in run:
                    found.append(
                        _Hour(
                            hour,
                            _after(hour, zone),
                            day,
                            version,
                            cause,
                            ref,
                            cause_at,
                            opened.get(hour, []),
                            paid.get(hour, []),
                        )
                    )
                if stop_at is not None and time.monotonic() >= stop_at:
                    break
        return self._store(turn, found) if found else (0, set())

    def _store(self, turn: Turn, found: list[_Hour]) -> tuple[int, set[str]]:
        """Store computed hours in one write, each only if its mark is still the version
        computed (else it was marked again meanwhile), then sum their days again and record
        them: how many hours were stored, and the days revised.

        A day is revised when an hour of it changed after the day had ended (it had been
        computed closed, or the change came after its end), by that hour's cause: the newest.
        The build's marks never revise: those hours were never computed."""
        touched: dict[str, list[tuple[_Hour, bool]]] = {}
        with turn.write() as conn:
            for one in found:
                mark = conn.execute(
                    "SELECT version FROM finance_rollup_dirty WHERE day = ? AND hour = ?",
                    (one.day, one.hour),
                ).fetchone()
                if mark is None or mark[0] != one.version:
                    continue
                span = (one.hour, one.end)
                old_opened = sorted(tuple(r) for r in conn.execute(HOURS_OPENED, span))
                old_paid = sorted(tuple(r) for r in conn.execute(HOURS_PAID, span))
                changed = (old_opened, old_paid) != (one.opened, one.paid)
                if changed:
                    for table in ("finance_hours_opened", "finance_hours_paid"):
                        conn.execute(f"DELETE FROM {table} WHERE hour >= ? AND hour < ?", span)  # noqa: S608
                    conn.executemany(INSERT_OPENED, one.opened)
                    conn.executemany(INSERT_PAID, one.paid)
                conn.execute(
                    "DELETE FROM finance_rollup_dirty WHERE day = ? AND hour = ? AND version = ?",
                    (one.day, one.hour, one.version),
                )
                touched.setdefault(one.day, []).append((one, changed))
            revised = {day for day, hours in touched.items() if self._record_day(conn, day, hours)}
        return sum(map(len, touched.values())), revised

    def _record_day(self, conn: Any, day: str, hours: list[tuple[_Hour, bool]]) -> bool:
        """Sum a day whose hours were stored again from its hours, and record it in
        ``finance_days``: whether it was revised."""
        now = self._clock()
        start, end = day_bounds(date.fromisoformat(day), self.zone)
        span = (to_text(start), to_text(end))
        if any(changed for _, changed in hours):
            conn.execute("DELETE FROM finance_days_opened WHERE day = ?", (day,))
            conn.execute("DELETE FROM finance_days_paid WHERE day = ?", (day,))
            conn.execute(SUM_DAY_OPENED, span)
            conn.execute(SUM_DAY_PAID, span)
        before = conn.execute(
            "SELECT closed, revised_at, revised_by, revised_ref FROM finance_days WHERE day = ?",
            (day,),
        ).fetchone()
        revising = [
            one
            for one, changed in hours
            if changed
            and one.cause != "build"
            and before is not None
            and (before[0] or one.cause_at >= span[1])
        ]
        if revising:
            newest = max(revising, key=lambda one: one.cause_at)
            why: tuple[str | None, ...] = (to_text(now), newest.cause, newest.ref)
        else:
            why = (None, None, None) if before is None else tuple(before[1:])
        conn.execute(
            "INSERT INTO finance_days (day, computed_at, closed, revised_at, revised_by, "
            "revised_ref) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (day) DO UPDATE SET "
            "computed_at = excluded.computed_at, closed = excluded.closed, "
            "revised_at = excluded.revised_at, revised_by = excluded.revised_by, "
            "revised_ref = excluded.revised_ref",
            (day, to_text(now), int(end <= now), *why),
        )
        return bool(revising)

    # -- checks --------------------------------------------------------------------------

    def verify(self, days: int) -> list[Difference]:
        """Compute the last ``days`` local days (today included) from the rows, in one
        snapshot, and compare them with the stored buckets; days with an hour still dirty are
        skipped (a refresh first leaves few). Every bucket that differs, oldest first.

        :raises ValueError: ``days`` is not an int from 1 to 3660.
        """
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 3660:
            raise ValueError(f"days must be an int from 1 to 3660; got {days!r}")
        zone, today = self.zone, local_day(self._clock(), self.zone)
        found: list[Difference] = []
        with take_turn(self._engine) as turn, (turn or Turn(self._engine)).snapshot() as conn:
            dirty = {d for (d,) in conn.execute("SELECT DISTINCT day FROM finance_rollup_dirty")}
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
