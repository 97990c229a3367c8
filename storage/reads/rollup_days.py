"""The finance rollup's local hours computed from the ledger's rows (a refresh computes one
hour, :meth:`payhooks.storage.reads.rollup.Rollup.verify` a whole day), and a day compared with
what is stored.

Any span ``[start, end)`` is computed with finance's own SQL, the live page's, by minute
(:func:`~payhooks.storage.reads.finance_sql.opened_groups` with a 16-character bucket,
:data:`~payhooks.storage.reads.finance_sql.PAID_BUCKETS_SQL`; by hour, 13, in a zone whose
offset is whole hours all along), and the minutes are folded into the zone's local hours here:
one rule for the figures, whichever way they are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Any

import payhooks.storage.reads.finance_sql as finance_sql
from payhooks.storage.reads.finance_sql import Group
from payhooks.storage.reads.local_hours import day_bounds, hour_of
from payhooks.storage.reads.rollup_sql import (
    DAY_SUMS_OPENED,
    DAY_SUMS_PAID,
    HOURS_OPENED,
    HOURS_PAID,
)
from payhooks.storage.times import to_text

__all__ = ["Difference", "compare_day", "day_sums", "opened_rows", "paid_rows"]


@dataclass(frozen=True, slots=True)
class Difference:
    """A bucket :meth:`Rollup.verify` found stored otherwise than the rows say: the table, the
    hour and key, and the stored and computed sums (None: no such bucket)."""

    table: str
    hour: str
    key: tuple[Any, ...]
    stored: tuple[int, ...] | None
    computed: tuple[int, ...] | None


def _width(start: datetime, end: datetime, zone: tzinfo) -> int:
    """How many characters of a stored time the span's SQL groups by: its UTC hour (13) when
    the zone's offset is whole hours at both ends (its hours are UTC's), else its minute (16)."""
    offsets = (start.astimezone(zone).utcoffset(), end.astimezone(zone).utcoffset())
    whole = all(o is not None and o % timedelta(hours=1) == timedelta(0) for o in offsets)
    return 13 if whole else 16


def _minute(bucket: str) -> str:
    return bucket if len(bucket) == 16 else bucket + ":00"


def opened_rows(conn: Any, start: datetime, end: datetime, zone: tzinfo) -> list[tuple[Any, ...]]:
    """The ``finance_hours_opened`` rows of ``[start, end)``, computed from the ledger's rows."""
    sql, params = finance_sql.opened_groups(start, end, _width(start, end, zone))
    sums: dict[tuple[Any, ...], list[int]] = {}
    for g in (Group._make(values) for values in conn.execute(sql, params)):
        hour, day = hour_of(_minute(g.bucket), zone)
        key = (hour, day, g.currency, g.received_currency or "", g.state, g.drifts, g.kind)
        money = (g.rows, g.expected, g.received, g.home_received, g.refunded, g.charged_back)
        cell = sums.setdefault(key, [0] * 6)
        for n, value in enumerate(money):
            cell[n] += value
    return sorted((*key, *cell) for key, cell in sums.items())


def paid_rows(conn: Any, start: datetime, end: datetime, zone: tzinfo) -> list[tuple[Any, ...]]:
    """The ``finance_hours_paid`` rows of ``[start, end)``, computed from the ledger's rows."""
    params = (_width(start, end, zone), to_text(start), to_text(end))
    sums: dict[tuple[Any, ...], list[int]] = {}
    for minute, currency, state, count, amount in conn.execute(
        finance_sql.PAID_BUCKETS_SQL, params
    ):
        hour, day = hour_of(_minute(minute), zone)
        cell = sums.setdefault((hour, day, currency, state), [0, 0])
        cell[0] += count
        cell[1] += amount
    return sorted((*key, *cell) for key, cell in sums.items())


def day_sums(rows: list[tuple[Any, ...]], width: int) -> list[tuple[Any, ...]]:
    """A day's hour rows (``hour, day, key..., sums``; ``width`` sums) summed by day: ``day,
    key..., sums``."""
    sums: dict[tuple[Any, ...], list[int]] = {}
    for row in rows:
        cell = sums.setdefault(tuple(row[1:-width]), [0] * width)
        for n, value in enumerate(row[-width:]):
            cell[n] += value
    return sorted((*key, *cell) for key, cell in sums.items())


def compare_day(conn: Any, day: date, zone: tzinfo) -> list[Difference]:
    """The buckets of ``day`` stored otherwise than ``conn``'s rows say (by hour and by day)."""
    start, end = day_bounds(day, zone)
    span = (to_text(start), to_text(end))
    opened, paid = opened_rows(conn, start, end, zone), paid_rows(conn, start, end, zone)
    found: list[Difference] = []
    for table, computed, stored, params in (
        ("finance_hours_opened", opened, HOURS_OPENED, span),
        ("finance_hours_paid", paid, HOURS_PAID, span),
        (
            "finance_days_opened",
            [(r[0], *r) for r in day_sums(opened, 6)],
            DAY_SUMS_OPENED,
            (day.isoformat(),),
        ),
        (
            "finance_days_paid",
            [(r[0], *r) for r in day_sums(paid, 2)],
            DAY_SUMS_PAID,
            (day.isoformat(),),
        ),
    ):
        found += _differences(table, [tuple(r) for r in conn.execute(stored, params)], computed)
    return found


def _differences(
    table: str, stored: list[tuple[Any, ...]], computed: list[tuple[Any, ...]]
) -> list[Difference]:
    """The buckets whose sums differ; a bucket is its hour and key (every column but the
    sums: six of ``finance_hours_opened``'s, two of ``finance_hours_paid``'s)."""
    width = 6 if table.endswith("_opened") else 2

    def index(rows: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple[int, ...]]:
        return {tuple(r[:-width]): tuple(r[-width:]) for r in rows}

    old, new = index(stored), index(computed)
    return [
        Difference(table, key[0], key[2:], old.get(key), new.get(key))
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]
