"""Time windows over ``received_at``: the delivery log's and the refused requests' (pages and
counts) and the health figures' (``Ledger.vitals``), exact at their edges on each engine,
whatever order the rows were stored in, and read through the indexes ``deliveries_received``
and ``rejected_deliveries_received``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from payhooks.storage import Ledger
from payhooks.storage.reads import DeliveryFilter
from payhooks.storage.times import to_text
from tests.support.factories import T0

INDEXES = {
    "deliveries": "deliveries_received",
    "rejected_deliveries": "rejected_deliveries_received",
}


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _store(ledger: Ledger, minutes: Sequence[float]) -> None:
    """A delivery and a refused request received at each of ``minutes`` after T0, stored in
    that order (so ids follow the list, whatever the times)."""
    for n, minute in enumerate(minutes):
        ledger.receiver.record_delivery(
            dedupe_key=f"msg_{n}", body=b"{}", headers={}, received_at=_at(minute)
        )
        ledger.receiver.record_rejected(
            reason="invalid_signature", body=b"{}", remote_addr=None, received_at=_at(minute)
        )


def _windowed(ledger: Ledger, since: datetime | None, until: datetime | None) -> list[int]:
    """The positions (in storing order) of the rows the delivery log shows for the window,
    after checking that the refused requests' log and both counts show the same."""
    page = ledger.receiver.delivery_log(DeliveryFilter(since=since, until=until), limit=1000)
    shown = sorted(row.id for row in page.rows)
    refused = ledger.receiver.rejected_log(since=since, until=until, limit=1000)
    assert sorted(row.received_at for row in refused.rows) == sorted(
        row.received_at for row in page.rows
    )
    assert ledger.receiver.count_deliveries(DeliveryFilter(since=since, until=until)) == len(shown)
    assert ledger.receiver.count_rejected(since=since, until=until) == len(shown)
    first = min((row.id for row in ledger.receiver.delivery_log(limit=1000).rows), default=1)
    return [each - first for each in shown]


def _expected(
    minutes: Sequence[float], since: datetime | None, until: datetime | None
) -> list[int]:
    """The positions of the rows received in the window: ``since`` in, ``until`` out."""
    return [
        n
        for n, minute in enumerate(minutes)
        if (since is None or _at(minute) >= since) and (until is None or _at(minute) < until)
    ]


IN_ORDER = [0, 1, 1, 2, 5, 8, 8, 13]

# Rows stored out of time order (an explicit ``received_at``, a clock stepped back): the fourth
# was received before every other, the seventh between the second and the third.
OUT_OF_ORDER = [1, 2, 3, -10, 5, 6, 2.5, 7]


@pytest.mark.parametrize(
    ("since", "until"),
    [
        (None, None),
        (_at(1), None),  # exactly at a time two rows share: both in
        (_at(1.5), None),  # between two rows
        (_at(-1), None),  # before every row
        (_at(13), None),  # exactly at the last row
        (_at(14), None),  # after every row: none
        (None, _at(8)),  # until is excluded: the two rows exactly at 8 are out
        (None, _at(0)),  # exactly at the first row: none
        (None, _at(20)),
        (_at(1), _at(8)),  # both edges on rows
        (_at(2), _at(2.5)),
        (_at(3), _at(4)),  # between two rows: none
        (_at(8), _at(1)),  # backwards: none
    ],
)
@pytest.mark.parametrize("minutes", [IN_ORDER, OUT_OF_ORDER], ids=["in-order", "out-of-order"])
def test_a_window_shows_exactly_the_rows_received_in_it(
    ledger: Ledger, minutes: list[float], since: datetime | None, until: datetime | None
) -> None:
    _store(ledger, minutes)
    assert _windowed(ledger, since, until) == _expected(minutes, since, until)


@pytest.mark.parametrize(
    ("since", "until"),
    [(_at(2.5), None), (None, _at(0)), (_at(-10), _at(-9)), (_at(2.5), _at(3)), (_at(-20), None)],
)
def test_a_row_stored_out_of_time_order_is_in_its_window_at_its_edge(
    ledger: Ledger, since: datetime | None, until: datetime | None
) -> None:
    """The stray rows (stored after rows received later) sit exactly on these edges; a search
    over ids, which assumes ids follow time, left them out or let them in wrongly."""
    _store(ledger, OUT_OF_ORDER)
    shown = _windowed(ledger, since, until)
    assert shown == _expected(OUT_OF_ORDER, since, until)
    assert {3, 6} & set(shown), shown  # each window holds a stray row


@pytest.mark.parametrize(("since", "until"), [(None, None), (_at(0), None), (None, _at(0))])
def test_an_empty_ledger_shows_an_empty_window(
    ledger: Ledger, since: datetime | None, until: datetime | None
) -> None:
    assert _windowed(ledger, since, until) == []


@pytest.mark.parametrize("minutes", [IN_ORDER, OUT_OF_ORDER], ids=["in-order", "out-of-order"])
@pytest.mark.parametrize("hour_from", [-10, 1, 2, 2.5, 5, 13, 14])
def test_the_health_figures_count_exactly_the_rows_received_in_their_window(
    ledger: Ledger, minutes: list[float], hour_from: float
) -> None:
    """``now`` puts the last hour's start exactly on a row (or between rows): that row is in."""
    _store(ledger, minutes)
    vitals = ledger.vitals(_at(hour_from) + timedelta(hours=1))
    expected = len(_expected(minutes, _at(hour_from), None))
    assert (vitals.last_hour.deliveries, vitals.last_hour.refused) == (expected, expected)
    assert vitals.last_day.deliveries == len(minutes)


#: A window's statements, by what they read: the log's page and count, the refused requests'.
LOG_WINDOW = DeliveryFilter(since=_at(1), until=_at(5))


def _window_statements(conn: Any) -> list[tuple[str, str, list[Any]]]:
    """Each windowed statement the ledger runs, with the table whose index it should read."""
    from payhooks.storage.deliveries import LISTED
    from payhooks.storage.reads.delivery_log import _REJECTED_LISTED, _rejected_where, _where

    where, params = _where(conn, LOG_WINDOW)
    refused_where, refused_params = _rejected_where(LOG_WINDOW.since, LOG_WINDOW.until)
    since = [to_text(_at(1))]
    return [
        (
            "deliveries",
            f"SELECT {LISTED}{where} ORDER BY d.id DESC LIMIT 51",
            params,
        ),
        ("deliveries", f"SELECT count(*) FROM deliveries d{where}", params),  # noqa: S608
        (
            "rejected_deliveries",
            f"SELECT {_REJECTED_LISTED}{refused_where} ORDER BY id DESC LIMIT 51",
            refused_params,
        ),
        (
            "rejected_deliveries",
            f"SELECT count(*) FROM rejected_deliveries{refused_where}",  # noqa: S608
            refused_params,
        ),
        # The health figures' (storage/vitals.py), the window's start alone.
        ("deliveries", "SELECT count(*) FROM deliveries WHERE received_at >= ?", since),
        (
            "rejected_deliveries",
            "SELECT reason, count(*) FROM rejected_deliveries WHERE received_at >= ? "
            "GROUP BY reason",
            since,
        ),
    ]


@pytest.mark.sqlite_only  # SQLite's query plans; PostgreSQL's are the test below
def test_every_window_reads_its_received_at_index_on_sqlite(ledger: Ledger) -> None:
    _store(ledger, IN_ORDER)
    conn = ledger.database.conn
    for table, sql, params in _window_statements(conn):
        plan = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
        assert f"INDEX {INDEXES[table]}" in plan, (sql, plan)
        assert f"SCAN {table}" not in plan.replace(" d ", f" {table} "), (sql, plan)


@pytest.mark.postgresql_only
def test_every_window_reads_its_received_at_index_on_postgresql(ledger: Ledger) -> None:
    """With sequential scans priced out, PostgreSQL finds its path through the index (the
    column's ``C`` collation and the index's agree)."""
    _store(ledger, IN_ORDER)
    with ledger._engine.writer.write() as conn:
        conn.execute("SET LOCAL enable_seqscan = off")
        for table, sql, params in _window_statements(conn):
            plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + sql, params).fetchall())
            assert INDEXES[table] in plan, (sql, plan)


def test_each_engine_indexes_both_tables_by_received_at(
    ledger: Ledger, engine: str, db_rows: Callable[..., list[dict[str, Any]]]
) -> None:
    for table, index in INDEXES.items():
        if engine == "postgresql":
            rows = db_rows("SELECT indexdef AS sql FROM pg_indexes WHERE indexname = ?", index)
        else:
            rows = db_rows("SELECT sql FROM sqlite_schema WHERE name = ?", index)
        assert [row["sql"].replace(" USING btree", "") for row in rows] == [
            f"CREATE INDEX {index} ON {'public.' if engine == 'postgresql' else ''}{table} "
            "(received_at)"
        ], rows
