"""Time windows found by id (``payhooks.storage.id_windows``), through the delivery log's
filters on each engine: exact when ids follow time, never showing a row received outside the
window when they do not."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from datetime import datetime, timedelta

import pytest

from payhooks.storage import Ledger
from payhooks.storage.id_windows import EMPTY_RANGE, id_range
from payhooks.storage.reads import DeliveryFilter
from tests.support.factories import T0


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _store(ledger: Ledger, minutes: Sequence[float]) -> list[int]:
    """A delivery and a refused request received at each of ``minutes`` after T0, stored in
    that order (so ids follow the list, whatever the times); the deliveries' ids."""
    ids = []
    for n, minute in enumerate(minutes):
        delivery = ledger.receiver.record_delivery(
            dedupe_key=f"msg_{n}", body=b"{}", headers={}, received_at=_at(minute)
        )
        ledger.receiver.record_rejected(
            reason="invalid_signature", body=b"{}", remote_addr=None, received_at=_at(minute)
        )
        ids.append(delivery.id)
    return ids


def _windowed(ledger: Ledger, since: datetime | None, until: datetime | None) -> list[int]:
    """The positions (in storing order) of the rows each log shows for the window, after
    checking that both logs, and their counts, agree."""
    page = ledger.receiver.delivery_log(DeliveryFilter(since=since, until=until), limit=1000)
    shown = sorted(row.id for row in page.rows)
    refused = ledger.receiver.rejected_log(since=since, until=until, limit=1000)
    assert len(refused.rows) == len(shown)
    assert ledger.receiver.count_deliveries(DeliveryFilter(since=since, until=until)) == len(shown)
    assert ledger.receiver.count_rejected(since=since, until=until) == len(shown)
    first = min((row.id for row in ledger.receiver.delivery_log(limit=1000).rows), default=1)
    return [each - first for each in shown]


IN_ORDER = [0, 1, 1, 2, 5, 8, 8, 13]


@pytest.mark.parametrize(
    ("since", "until"),
    [
        (None, None),
        (_at(1), None),  # at a time two rows share: both in
        (_at(1.5), None),  # between two rows
        (_at(-1), None),  # before every row
        (_at(13), None),  # at the last row
        (_at(14), None),  # after every row: none
        (None, _at(8)),  # until is excluded: the two rows at 8 are out
        (None, _at(0)),  # before every row: none
        (None, _at(20)),
        (_at(1), _at(8)),
        (_at(2), _at(2.5)),
        (_at(3), _at(4)),  # between two rows: none
        (_at(8), _at(1)),  # backwards: none
    ],
)
def test_a_window_over_rows_stored_in_time_order_is_exact(
    ledger: Ledger, since: datetime | None, until: datetime | None
) -> None:
    _store(ledger, IN_ORDER)
    expected = [
        n
        for n, minute in enumerate(IN_ORDER)
        if (since is None or _at(minute) >= since) and (until is None or _at(minute) < until)
    ]
    assert _windowed(ledger, since, until) == expected


# The fourth row was stored with a time before every other's (an explicit ``received_at``).
OUT_OF_ORDER = [1, 2, 3, -10, 5, 6]


@pytest.mark.parametrize(
    ("since", "until", "expected"),
    [
        # The search lands past the stray row; its time keeps it out of a later window.
        (_at(2.5), None, [2, 4, 5]),
        (_at(4), None, [4, 5]),
        (None, _at(4), [0, 1, 2, 3]),
        (_at(-20), None, [0, 1, 2, 3, 4, 5]),
        # Received inside the window, stored after rows received after it: left out.
        (None, _at(0), []),
        (_at(-20), _at(0), []),
    ],
)
def test_a_row_stored_out_of_time_order_is_never_shown_outside_its_window(
    ledger: Ledger, since: datetime | None, until: datetime | None, expected: list[int]
) -> None:
    _store(ledger, OUT_OF_ORDER)
    shown = _windowed(ledger, since, until)
    assert shown == expected
    for n in shown:
        assert since is None or _at(OUT_OF_ORDER[n]) >= since
        assert until is None or _at(OUT_OF_ORDER[n]) < until


@pytest.mark.parametrize(("since", "until"), [(None, None), (_at(0), None), (None, _at(0))])
def test_an_empty_ledger_shows_an_empty_window(
    ledger: Ledger, since: datetime | None, until: datetime | None
) -> None:
    assert _windowed(ledger, since, until) == []


def test_only_the_tables_ordered_by_time_are_searched() -> None:
    with closing(sqlite3.connect(":memory:")) as conn, pytest.raises(ValueError, match="table"):
        id_range(conn, "payments", None, None)
    assert EMPTY_RANGE[0] > EMPTY_RANGE[1]


@pytest.mark.sqlite_only  # SQLite's query plans
@pytest.mark.parametrize("until", [None, _at(5)])
def test_a_windowed_log_reads_a_primary_key_range(ledger: Ledger, until: datetime | None) -> None:
    from payhooks.storage.reads.delivery_log import _ENTRY_COLUMNS, _FROM, _where

    _store(ledger, IN_ORDER)
    conn = ledger.database.conn
    where, params = _where(conn, DeliveryFilter(since=_at(1), until=until))
    for sql in (
        f"SELECT {_ENTRY_COLUMNS} {_FROM}{where} ORDER BY d.id DESC LIMIT 5",
        f"SELECT count(*) FROM deliveries d{where}",  # noqa: S608 - constant fragments
    ):
        plan = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
        assert "INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in plan, plan
