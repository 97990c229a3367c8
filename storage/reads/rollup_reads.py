"""What the finance book reads of the rollup: a period's grouped rows, as finance's own SQL
would give them, so that the same folds (:func:`~payhooks.storage.reads.finance._figures`,
``_buckets``, ``_totals``) make the figures from either.

The rollup answers a period whose ends are local hours of its zone, and filters within its
columns (state, currency, kind, what needs a person, the period); everything else is read live.
A day with an hour the build has not computed yet is read live too; any other day with an hour
marked since it was computed (or, empty, never was) is answered "as of" its oldest waiting
change.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, NamedTuple

from payhooks.storage.reads.finance_rows import UNEXPECTED_KIND, FinanceFilter
from payhooks.storage.reads.finance_sql import Group, Paid, PaidBucket
from payhooks.storage.reads.local_hours import day_bounds, is_hour_start, local_day
from payhooks.storage.reads.rollup import Rollup
from payhooks.storage.reads.rollup_sql import DAYS, SPAN, opened_sums, paid_sums
from payhooks.storage.records import MISMATCH_STATES
from payhooks.storage.times import to_text

__all__ = ["RollupPeriod", "read_period", "read_totals"]

#: The period's days with an hour the build marked and nobody computed yet (another hour never
#: computed was empty: it counts as computed). Marks are keyed by day first: a range.
_UNCOMPUTED = (
    "SELECT COUNT(*) FROM finance_rollup_dirty WHERE day >= ? AND day <= ? AND cause = 'build'"
)
#: The filter fields the rollup has no column for.
_LIVE_ONLY = ("paid_since", "paid_until", "amount_min_minor", "amount_max_minor")


class RollupPeriod(NamedTuple):
    """A period's grouped rows from the rollup, and the time they hold (None: current)."""

    groups: list[Group]
    by_bucket: list[PaidBucket]
    paid: list[Paid]
    as_of: datetime | None


def _days(rollup: Rollup, since: datetime | None, until: datetime | None) -> tuple[date, date]:
    first = date.min if since is None else local_day(since, rollup.zone)
    last = date.max if until is None else local_day(until - timedelta(microseconds=1), rollup.zone)
    return first, last


def _servable(
    rollup: Rollup, conn: Any, since: datetime | None, until: datetime | None
) -> tuple[bool, datetime | None]:
    """Whether the rollup can answer ``[since, until)``, and the time its answer holds."""
    zone = rollup.zone
    if not rollup.enabled or any(
        end is not None and not is_hour_start(end, zone) for end in (since, until)
    ):
        return False, None
    state = conn.execute("SELECT zone FROM finance_rollup_state").fetchone()
    if state is None or state[0] != zone.key:
        return False, None
    first, last = _days(rollup, since, until)
    (never,) = conn.execute(_UNCOMPUTED, (first.isoformat(), last.isoformat())).fetchone()
    if never:
        return False, None
    return True, rollup.waiting_since(conn, first, last)


def read_period(
    rollup: Rollup,
    conn: Any,
    since: datetime,
    until: datetime,
    bucket: str,
    *,
    with_paid: bool,
    current_only: bool,
) -> RollupPeriod | None:
    """``[since, until)`` from the rollup by ``bucket`` (``hour``, ``day`` or ``''``), or None
    when it cannot answer (or, ``current_only``, cannot answer with current figures)."""
    servable, as_of = _servable(rollup, conn, since, until)
    if not servable or (current_only and as_of is not None):
        return None
    by_day = bucket != "hour" and _whole_days(rollup, since, until)
    if by_day:
        first, last = _days(rollup, since, until)
        span: tuple[str, ...] = (first.isoformat(), last.isoformat())
    else:
        span = (to_text(since), to_text(until))
    opened = opened_sums(bucket, [DAYS if by_day else SPAN], by_day=by_day)
    groups = [Group._make(r) for r in conn.execute(opened, span)]
    paid_sql = paid_sums(bucket, by_day=by_day)
    by_bucket = [PaidBucket._make(r) for r in conn.execute(paid_sql, span)]
    paid: list[Paid] = []
    if with_paid:
        paid_sql = paid_sums(None, paid_only=True, by_day=by_day)
        paid = [Paid._make(r) for r in conn.execute(paid_sql, span)]
    return RollupPeriod(groups, by_bucket, paid, as_of)


def _whole_days(rollup: Rollup, since: datetime | None, until: datetime | None) -> bool:
    """Whether each end given is where a local day starts (its days' rows answer then)."""
    return all(
        end is None or day_bounds(local_day(end, rollup.zone), rollup.zone)[0] == end
        for end in (since, until)
    )


def read_totals(
    rollup: Rollup, conn: Any, wanted: FinanceFilter, *, as_of_ok: bool = False
) -> list[Group] | None:
    """A filter's grouped rows from the rollup, when it has the columns and is current (or,
    ``as_of_ok``, whatever changes still wait)."""
    if wanted.identifier_prefix or any(getattr(wanted, name) is not None for name in _LIVE_ONLY):
        return None
    since, until = wanted.registered_since, wanted.registered_until
    servable, as_of = _servable(rollup, conn, since, until)
    if not servable or (as_of is not None and not as_of_ok):
        return None
    conditions: list[str] = []
    params: list[Any] = []
    by_day = _whole_days(rollup, since, until)
    if by_day:
        first, last = _days(rollup, since, until)
        conditions += ["day >= ?", "day <= ?"] if since or until else []
        params += [first.isoformat(), last.isoformat()] if since or until else []
    if not by_day and since is not None:
        conditions.append("hour >= ?")
        params.append(to_text(since))
    if not by_day and until is not None:
        conditions.append("hour < ?")
        params.append(to_text(until))
    if wanted.states:
        conditions.append(f"state IN ({', '.join('?' for _ in wanted.states)})")
        params.extend(sorted(state.value for state in wanted.states))
    if wanted.needs_person:
        names = ", ".join(f"'{state.value}'" for state in sorted(MISMATCH_STATES))
        conditions.append(f"(state IN ({names}) OR drifting = 1)")
    if wanted.currency is not None:
        conditions.append("currency = ?")
        params.append(wanted.currency)
    if wanted.kind is not None:
        conditions.append("kind = ?")
        params.append("" if wanted.kind == UNEXPECTED_KIND else wanted.kind)
    sql = opened_sums("''", conditions, by_day=by_day)
    return [Group._make(r) for r in conn.execute(sql, params)]
