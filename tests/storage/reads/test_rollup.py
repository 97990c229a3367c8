"""The finance rollup against the live computation: random histories, every period, three
zones, both engines (payhooks.storage.reads.rollup)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import payhooks.storage.reads.rollup as rollup_module
from payhooks.storage import ConflictError, Ledger, ReconciliationState
from payhooks.storage.reads import BucketSize, FinanceFilter
from payhooks.storage.reads.local_hours import (
    day_bounds,
    hour_end,
    hour_of,
    hours_between,
    is_hour_start,
)
from payhooks.storage.reads.rollup_reads import read_period
from tests.support.factories import FixedClock, make_outcome, record
from tests.support.ledger_ops import CODES, apply_listing

#: Histories run around the night New York leaves summer time (a day of 25 hours).
BASE = datetime(2026, 10, 31, 0, 0, tzinfo=UTC)
ZONES = [ZoneInfo("UTC"), ZoneInfo("Asia/Kathmandu"), ZoneInfo("America/New_York")]
#: Minutes after BASE a time falls at: hour and day edges in each zone, and between.
MINUTES = [
    0,
    14,
    15,
    59,
    60,
    200,
    239,
    240,
    300,
    1079,
    1080,
    1439,
    1440,
    1800,
    1875,
    2160,
    2400,
    2879,
    2880,
    3000,
    3299,
    3300,
    3400,
    4320,
    4500,
]
IDENTIFIERS = [f"order-{n}" for n in range(8)]

operations = st.one_of(
    st.tuples(
        st.just("expect"),
        st.sampled_from(IDENTIFIERS),
        st.booleans(),
        st.sampled_from(["CNY", "USD"]),
    ),
    st.tuples(
        st.just("outcome"),
        st.sampled_from(IDENTIFIERS),
        st.sampled_from(["t1", "t2"]),
        st.sampled_from(sorted(CODES)),
        st.sampled_from([999, 1999, 2500]),
        st.sampled_from(["CNY", "USD"]),
        st.sampled_from(MINUTES),
    ),
    st.tuples(
        st.just("listed"),
        st.sampled_from(IDENTIFIERS),
        st.sampled_from(IDENTIFIERS),
        st.sampled_from(["t1", "t2", "t3"]),
        st.sampled_from(["succeeded", "failed", "unknown"]),
    ),
    st.tuples(st.just("refused"), st.sampled_from(IDENTIFIERS)),
    st.tuples(st.just("refresh"), st.booleans()),
    st.tuples(st.just("prune")),
)


def apply(ledger: Ledger, clock: FixedClock, op: tuple[Any, ...], prefix: str, tmp: Path) -> None:
    """Apply one operation, the clock moved forward a few hours first (registrations and
    syncs happen at the clock's time)."""
    clock.advance(3 * 3600 + 7 * 60)
    kind = op[0]
    if kind == "expect":
        _, ident, subscription, currency = op
        try:
            if subscription:
                ledger.expect_subscription(prefix + ident, 999, currency, 1999)
            else:
                ledger.expect_transaction(prefix + ident, 1999, currency)
        except ConflictError:
            pass
    elif kind == "outcome":
        _, ident, tx, code, amount, currency, minute = op
        outcome = make_outcome(
            external_identifier=prefix + ident,
            transaction_id=f"{prefix}{ident}-{tx}",
            payment_status=code,
            state=CODES[code],
            amount_minor=amount,
            currency=currency,
            paid_at=BASE + timedelta(minutes=minute),
        )
        record(ledger, outcome)
    elif kind == "listed":
        _, ident, other, tx, state = op
        apply_listing(ledger, ("listed", prefix + ident, prefix + other, tx, state))
    elif kind == "refused":
        ledger.service.mark_creation_failed(prefix + op[1], reason="refused", certain=True)
    elif kind == "refresh":
        ledger.finance.rollup.refresh(budget=0 if op[1] else None)
    else:
        (tmp / "archives").mkdir(exist_ok=True)
        ledger.prune(timedelta(hours=1), tmp / "archives")


def periods(zone: ZoneInfo) -> list[tuple[datetime, datetime]]:
    """Each local day of the history, runs of several days, and some local hours."""
    days = [date(2026, 10, 30) + timedelta(days=n) for n in range(6)]
    found = [day_bounds(day, zone) for day in days]
    found.append((day_bounds(days[0], zone)[0], day_bounds(days[-1], zone)[1]))
    found.append((day_bounds(days[1], zone)[0], day_bounds(days[3], zone)[1]))
    for minute in (0, 240, 1080, 1875, 2880):
        start = datetime.fromisoformat(
            hour_of((BASE + timedelta(minutes=minute)).isoformat()[:16], zone)[0]
        )
        found.append((start, start + timedelta(hours=1)))
        found.append((start, start + timedelta(hours=5)))
    return found


def figures(ledger: Ledger, zone: ZoneInfo, *, rollup: bool) -> list[Any]:
    finance = ledger.finance
    finance.rollup.enabled = rollup
    seen: list[Any] = []
    for since, until in periods(zone):
        assert is_hour_start(since, zone)
        assert is_hour_start(until, zone)
        overview = finance.overview(since, until, zone=zone)
        seen.append((overview.figures, overview.totals, overview.as_of, overview.buckets))
        # The chart by each width in the merchant's zone: the rollup's hours and days fall
        # into the buckets the live reads compute.
        seen += [finance.buckets(since, until, size, zone) for size in BucketSize]
        for wanted in (
            FinanceFilter(registered_since=since, registered_until=until, kind="transaction"),
            FinanceFilter(registered_since=since, registered_until=until, kind="unexpected"),
            FinanceFilter(
                registered_since=since,
                registered_until=until,
                currency="USD",
                states=frozenset({ReconciliationState.PAID, ReconciliationState.PENDING}),
            ),
            FinanceFilter(registered_since=since, registered_until=until, needs_person=True),
        ):
            seen.append(finance.totals(wanted))
    finance.rollup.enabled = True
    return seen


_examples = iter(range(10**6))


@pytest.mark.slow
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(zone=st.sampled_from(ZONES), history=st.lists(operations, min_size=1, max_size=25))
@example(  # a sync moves a transaction to another identifier: the one it left changes too
    zone=ZONES[0],
    history=[
        ("outcome", "order-3", "t1", "CB", 999, "CNY", 0),
        ("listed", "order-3", "order-7", "t1", "succeeded"),
        ("refresh", False),
        ("listed", "order-1", "order-7", "t1", "succeeded"),
    ],
)
def test_after_a_refresh_the_rollup_gives_the_live_figures_for_every_period(
    ledger: Ledger, clock: FixedClock, tmp_path: Path, zone: ZoneInfo, history: list[Any]
) -> None:
    """Histories accumulate in one ledger (each example's payments under a prefix of its
    own), so later examples meet a rollup already built, and a zone changed rebuilds it."""
    prefix = f"e{next(_examples)}-"
    ledger.finance.rollup.zone = zone
    for op in history:
        apply(ledger, clock, op, prefix, tmp_path)
    report = ledger.finance.rollup.refresh()
    assert report.done, report
    assert ledger.vitals().rollup_lag == timedelta(0)
    with ledger._engine.read() as conn:
        for since, until in periods(zone):
            assert (
                read_period(
                    ledger.finance.rollup,
                    conn,
                    since,
                    until,
                    "''",
                    with_paid=True,
                    current_only=True,
                )
                is not None
            )
    assert figures(ledger, zone, rollup=True) == figures(ledger, zone, rollup=False)
    assert ledger.finance.rollup.verify(days=60) == []


# -- the watermark's premises, revised days, "as of" -----------------------------------------


def test_pruning_never_deletes_a_row_the_rollup_reads_by_id(
    ledger: Ledger, clock: FixedClock, tmp_path: Path
) -> None:
    """SQLite's watermark is ``max(id)``: safe only while no id is ever reused, so nothing may
    delete from the tables it reads (their newest row least of all)."""
    ledger.expect_transaction("order-1", 1999, "CNY")
    record(ledger, make_outcome(external_identifier="order-1", amount_minor=1999))
    ledger.service.mark_creation_failed("order-1", reason="refused", certain=True)
    apply_listing(ledger, ("listed", "order-1", "order-1", "t1", "succeeded"))
    tables = ("payments", "outcomes", "creation_attempts", "sync_runs", "service_transactions")

    def counts() -> list[int]:
        with ledger._engine.read() as conn:
            return [conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables]  # noqa: S608

    before = counts()
    clock.advance(400 * 86400)
    (tmp_path / "archive").mkdir()
    ledger.prune(timedelta(days=1), tmp_path / "archive", audit_older_than=timedelta(days=1))
    assert counts() == before


def test_a_late_delivery_marks_its_closed_day_revised_by_that_delivery(
    ledger: Ledger, clock: FixedClock
) -> None:
    day = date(2026, 11, 21)
    ledger.expect_transaction("order-1", 1999, "CNY")
    assert ledger.finance.rollup.refresh().done
    clock.advance(2 * 86400)  # the day has ended
    late = ledger.receiver.record_delivery(dedupe_key="late", body=b"late", headers={})
    outcome = make_outcome(external_identifier="order-1", amount_minor=1999)
    ledger.receiver.record_outcome(outcome, delivery_id=late.id)
    assert ledger.finance.rollup.revised(day, day) == []
    report = ledger.finance.rollup.refresh()
    assert (report.done, report.revised) == (True, 1)
    [revised] = ledger.finance.rollup.revised(day, day)
    assert (revised.day, revised.cause, revised.revised_at) == (day, "delivery", clock.now)
    assert revised.ref == str(late.id)


def test_a_day_computed_while_open_is_not_revised_by_a_change_on_time(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("order-1", 1999, "CNY")
    ledger.finance.rollup.refresh()
    record(ledger, make_outcome(external_identifier="order-1", amount_minor=1999))
    clock.advance(86400)
    assert ledger.finance.rollup.refresh().revised == 0
    assert ledger.finance.rollup.revised(date(2026, 11, 1), date(2026, 11, 30)) == []


@pytest.mark.parametrize(
    ("zone", "day", "count"),
    [
        ("America/New_York", date(2026, 11, 1), 25),
        ("America/New_York", date(2026, 3, 8), 23),
        ("Asia/Kathmandu", date(2026, 11, 21), 24),
    ],
)
def test_the_hours_marked_between_two_times_are_a_day_s_23_24_or_25_local_hours(
    zone: str, day: date, count: int
) -> None:
    """What a sync horizon's move and the build mark (hours_between), and each hour's end as
    a refresh computes it (hour_end): every local hour once, each ending where the next
    starts, the last where the day ends."""
    where = ZoneInfo(zone)
    start, end = day_bounds(day, where)
    hours = hours_between(start.isoformat(), (end - timedelta(minutes=1)).isoformat(), where)
    assert len(hours) == count
    assert {found for _, found in hours} == {day.isoformat()}
    starts = [datetime.fromisoformat(hour) for hour, _ in hours]
    assert starts[0] == start
    assert [hour_end(one, where) for one in starts] == [*starts[1:], end]


def dirty_hours(ledger: Ledger) -> set[tuple[str, str]]:
    with ledger._engine.read() as conn:
        return {tuple(r) for r in conn.execute("SELECT hour, day FROM finance_rollup_dirty")}


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        (
            "UTC",
            {
                ("2026-11-21T12:00:00+00:00", "2026-11-21"),
                ("2026-11-20T08:00:00+00:00", "2026-11-20"),
            },
        ),
        (  # +05:45: a local hour starts at a quarter past a UTC hour
            "Asia/Kathmandu",
            {
                ("2026-11-21T11:15:00+00:00", "2026-11-21"),
                ("2026-11-20T08:15:00+00:00", "2026-11-20"),
            },
        ),
    ],
)
def test_a_late_delivery_marks_its_payment_s_hours_not_their_whole_days(
    ledger: Ledger, clock: FixedClock, zone: str, expected: set[tuple[str, str]]
) -> None:
    """The payment's registration hour and its payment's hour: two hours to compute again,
    though another payment sits in another hour of the registration's day."""
    ledger.finance.rollup.zone = ZoneInfo(zone)
    ledger.expect_transaction("order-1", 1999, "CNY")  # 12:00 UTC
    clock.advance(5 * 3600)
    ledger.expect_transaction("order-2", 1999, "CNY")  # 17:00 UTC, the same local day
    assert ledger.finance.rollup.refresh().done
    paid_at = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
    record(ledger, make_outcome(external_identifier="order-1", amount_minor=1999, paid_at=paid_at))
    report = ledger.finance.rollup.refresh(budget=0)
    assert (report.marked, report.computed) == (2, 0)
    assert dirty_hours(ledger) == expected
    report = ledger.finance.rollup.refresh()
    assert (report.computed, report.done) == (2, True)
    assert ledger.finance.rollup.verify(days=3) == []


class _TickingTime:
    """The rollup's ``time`` whose monotonic clock is 10 ms later at each reading: a budget
    runs out after a known number of checks, whatever the machine's speed."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 0.01
        return self.now


def test_a_refresh_whose_budget_runs_out_stops_after_an_hour_not_a_day(
    ledger: Ledger, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(12):  # a payment in each hour from 12:00 to 23:00 of one day
        ledger.expect_transaction(f"order-{n}", 1999, "CNY")
        clock.advance(3600)
    built = ledger.finance.rollup.refresh(budget=0)
    assert (built.marked, built.computed) == (12, 0)
    monkeypatch.setattr(rollup_module, "time", _TickingTime())
    # the budget has time left to start computing, and none after the first hour
    report = ledger.finance.rollup.refresh(budget=0.015)
    assert (report.computed, report.dirty_left) == (1, 11)
    assert ("2026-11-21T12:00:00+00:00", "2026-11-21") not in dirty_hours(ledger)
    monkeypatch.undo()
    assert ledger.finance.rollup.refresh().done
    assert ledger.finance.rollup.verify(days=2) == []


def test_changes_the_budget_left_waiting_make_the_page_say_as_of(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("order-1", 1999, "CNY")
    assert ledger.finance.rollup.refresh().done
    since, until = day_bounds(date(2026, 11, 21), UTC)
    current = ledger.finance.overview(since, until)
    assert current.as_of is None
    clock.advance(60)
    changed_at = clock.now
    record(ledger, make_outcome(external_identifier="order-1", amount_minor=1999))
    clock.advance(60)
    report = ledger.finance.rollup.refresh(budget=0)
    assert (report.marked, report.computed, report.dirty_left) == (1, 0, 1)
    stale = ledger.finance.overview(since, until)
    assert stale.as_of == changed_at
    # the figures as they held, said to be so
    assert stale.figures == dataclasses.replace(current.figures, as_of=changed_at)
    assert ledger.vitals().rollup_lag == timedelta(seconds=60)
    # the tiles and totals alone are never stale unless asked: they are read from the rows
    live = ledger.finance.figures(since, until)
    assert (live.received["CNY"].count, live.as_of) == (1, None)
    opened = FinanceFilter(registered_since=since, registered_until=until)
    [total] = ledger.finance.totals(opened)
    assert total.received == Decimal("19.99")
    # asked (the page, which says "as of"), the rollup answers as it held
    held = ledger.finance.figures(since, until, as_of_ok=True)
    assert (held.as_of, held.received) == (changed_at, current.figures.received)
    [held_total] = ledger.finance.totals(opened, as_of_ok=True)
    assert held_total.received == 0
    assert ledger.finance.rollup.refresh().done
    assert ledger.finance.overview(since, until).as_of is None
    assert ledger.finance.overview(since, until).figures.received["CNY"].count == 1


def test_a_rollup_in_another_zone_is_read_live_until_rebuilt(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.expect_transaction("order-1", 1999, "CNY")
    ledger.finance.rollup.refresh()
    zone = ZoneInfo("Asia/Kathmandu")
    ledger.finance.rollup.zone = zone
    since, until = day_bounds(date(2026, 11, 21), zone)
    with ledger._engine.read() as conn:
        assert (
            read_period(
                ledger.finance.rollup, conn, since, until, "''", with_paid=False, current_only=False
            )
            is None
        )
    assert ledger.finance.overview(since, until).figures.expected["CNY"].count == 1
    assert ledger.finance.rollup.refresh().done
    with ledger._engine.read() as conn:
        found = read_period(
            ledger.finance.rollup, conn, since, until, "''", with_paid=False, current_only=True
        )
    assert found is not None
    assert sum(g.rows for g in found.groups) == 1


@pytest.mark.postgresql_only  # ids that commit out of order
@pytest.mark.parametrize("commits", [True, False], ids=["committed", "rolled-back"])
def test_an_outcome_committed_after_a_higher_id_is_counted_by_the_next_refresh(
    ledger: Ledger, database: str, clock: FixedClock, commits: bool
) -> None:
    """Its id was below the watermark when the refresh ran: a hole, read again until it
    commits, or dropped once every transaction that could commit it has ended."""
    import contextlib
    import threading

    ledger.finance.rollup.refresh()
    held, release = threading.Event(), threading.Event()

    def slow_writer() -> None:
        with Ledger(database, clock=clock) as other, other.transaction():
            record(other, make_outcome(external_identifier="slow-1", transaction_id="s-1"))
            held.set()
            release.wait(30)
            if not commits:
                raise RuntimeError("rolled back")

    def run() -> None:
        with contextlib.suppress(RuntimeError):
            slow_writer()

    writer = threading.Thread(target=run)
    writer.start()
    try:
        assert held.wait(30)
        record(ledger, make_outcome(external_identifier="fast-1", transaction_id="f-1"))
        ledger.finance.rollup.refresh()
        with ledger._engine.read() as conn:
            holes = conn.execute(
                "SELECT id, seen FROM finance_rollup_pending WHERE source = 'outcomes'"
            ).fetchall()
        assert len(holes) == 1
    finally:
        release.set()
        writer.join()
    assert ledger.finance.rollup.refresh().done
    since, until = day_bounds(date(2026, 11, 21), UTC)
    assert ledger.finance.overview(since, until).figures.received["CNY"].count == 1 + commits
    assert ledger.finance.rollup.verify(days=3) == []
    with ledger._engine.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM finance_rollup_pending").fetchone() == (0,)


def test_changes_beyond_one_chunk_are_read_over_several_passes(
    ledger: Ledger, clock: FixedClock
) -> None:
    ledger.finance.rollup.refresh()
    with ledger.transaction():
        for n in range(2_100):  # more than a budgeted pass reads
            ledger.expect_transaction(f"order-{n}", 100 + n, "CNY")
    first = ledger.finance.rollup.refresh(budget=0)
    assert (first.marked, first.unread_left) == (1, True)
    since, until = day_bounds(date(2026, 11, 21), UTC)
    assert ledger.finance.overview(since, until).as_of == clock.now
    assert ledger.finance.rollup.refresh().done
    assert ledger.finance.overview(since, until).figures.expected["CNY"].count == 2_100
    assert ledger.finance.rollup.verify(days=2) == []


def test_payments_at_the_calendar_s_edges_are_counted_and_the_build_reads_only_their_days(
    ledger: Ledger, clock: FixedClock
) -> None:
    """A signed notification may carry any payment time: the build marks the days that hold
    a row (not every day between), and the first and last days of the calendar compute."""
    for n, at in enumerate(
        [datetime(1, 1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, tzinfo=UTC)]
    ):
        record(
            ledger,
            make_outcome(external_identifier=f"edge-{n}", transaction_id=f"e-{n}", paid_at=at),
        )
    report = ledger.finance.rollup.refresh()
    assert (report.marked, report.done) == (2, True)
    since, until = datetime(1, 1, 1, tzinfo=UTC), datetime(1, 1, 2, tzinfo=UTC)
    assert ledger.finance.figures(since, until).received["CNY"].count == 1
