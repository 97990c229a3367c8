"""The finance rollup built anew (:meth:`payhooks.storage.reads.rollup.Rollup.refresh`'s first
step when it holds nothing in the configured zone): every local hour that holds a row marked
to compute, and the watermarks set at the newest rows, in one write."""

from __future__ import annotations

import time
from zoneinfo import ZoneInfo

from payhooks.storage.reads.local_hours import hours_between
from payhooks.storage.reads.rollup_sql import BUILD_HOURS, MARK_DIRTY, PAYMENTS_ID
from payhooks.storage.reads.rollup_turn import Turn
from payhooks.storage.times import Clock, to_text

__all__ = ["build", "built"]

#: How long a build on PostgreSQL waits for the transactions running at its snapshot to end.
_SETTLE_SECONDS = 5.0


def built(turn: Turn, zone: ZoneInfo) -> bool:
    """Whether the rollup is built, in ``zone``."""
    with turn.snapshot() as conn:
        found = conn.execute("SELECT zone FROM finance_rollup_state").fetchone()
    return found is not None and found[0] == zone.key


def build(turn: Turn, engine: str, zone: ZoneInfo, clock: Clock) -> int:
    """Start over in ``zone``: every local hour that holds a row marked (the UTC hours
    of the indexes finance reads, scanned once), the watermarks at the newest rows. On
    PostgreSQL the transactions running at the snapshot are waited for (at most
    :data:`_SETTLE_SECONDS`), so no id below the watermarks can commit later."""
    with turn.snapshot() as conn:
        horizon = turn.horizon(conn)
        ids = (("outcomes", "id"), ("payments", PAYMENTS_ID[engine]), ("creation_attempts", "id"))
        tops = {
            source: conn.execute(f"SELECT MAX({column}) FROM {source}").fetchone()[0]  # noqa: S608
            for source, column in ids
        }
        sending = [
            i for (i,) in conn.execute("SELECT id FROM creation_attempts WHERE state = 'sending'")
        ]
        runs = conn.execute("SELECT id, pages, status FROM sync_runs ORDER BY id").fetchall()
        latest = conn.execute(
            "SELECT expected_before FROM sync_runs WHERE status = 'complete' "
            "ORDER BY id DESC LIMIT 1"
        ).fetchone()
        utc_hours = [utc for (utc,) in conn.execute(BUILD_HOURS)]
    if horizon is not None:
        _settle(turn, horizon[1])
    hours = {h for utc in utc_hours for h in hours_between(f"{utc}:00", f"{utc}:59", zone)}
    sync_seen = {run: f"{pages} {status}" for run, pages, status in runs}
    done = 0
    for run, _pages, status in runs:
        if run != done + 1 or status != "complete":
            break
        done = run
        del sync_seen[run]
    now = to_text(clock())
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
            MARK_DIRTY, [(hour, day, now, now, "build", "", now) for hour, day in sorted(hours)]
        )
    return len(hours)


def _settle(turn: Turn, xmax: int) -> None:
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
