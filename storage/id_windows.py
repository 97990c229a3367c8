"""Time windows found by id, for the tables that hold no index on ``received_at``.

``deliveries`` and ``rejected_deliveries`` are written on the receiver's hot path, and each
index costs every write, so neither indexes ``received_at``. Their ids increase with it,
though (a row is stored with the time it arrived, one writer at a time), so the first row of
a window is found by a search over ids, a few round trips of primary-key lookups, and the window is
read as a primary-key range. The health strip (:mod:`payhooks.storage.reads.vitals`) counts its
windows so, and the delivery log (:mod:`payhooks.storage.reads.delivery_log`) filters by them.

Rows stored out of time order (one stored with an explicit, earlier ``received_at``; a clock
stepped back) break the assumption: the search probes some rows only, so a bound lands on
one side of the disagreement, and rows on the other side are outside the range whatever
their time. A reader that keeps its ``received_at`` condition beside the range never shows a
row received outside its window; it may leave out, near a window's edge, a row received
inside it.
"""

from __future__ import annotations

from typing import Final

from payhooks.storage.sql import Connection

__all__ = ["EMPTY_RANGE", "id_range", "window_ids"]

#: The tables whose ids increase with ``received_at`` (the only names spliced into the SQL).
_TABLES: Final = frozenset({"deliveries", "rejected_deliveries"})

#: An id range no row is in: what a window with nothing in it reads.
EMPTY_RANGE: Final = (1, 0)


def _ends(conn: Connection, table: str) -> tuple[int | None, int | None]:
    """The table's lowest and highest ids (None, None when it is empty)."""
    if table not in _TABLES:
        raise ValueError(f"table must be one of {sorted(_TABLES)}; got {table!r}")
    # Apart: SQLite answers min() or max() alone from the primary key, but scans for both.
    (low,) = conn.execute(f"SELECT min(id) FROM {table}").fetchone()  # noqa: S608
    (high,) = conn.execute(f"SELECT max(id) FROM {table}").fetchone()  # noqa: S608
    return low, high


#: Ids probed per round trip of the search: each round narrows the range 17-fold, so a million
#: ids take five or six round trips (on PostgreSQL a round trip costs more than the sixteen
#: primary-key lookups it carries).
PROBES: Final = 16


def _first_from(conn: Connection, table: str, moment: str, low: int, high: int) -> int | None:
    """The id of the first row between ``low`` and ``high`` received at or after ``moment``
    (UTC text), or None: a search over ids, gaps in them and all, each round trip asking for
    the first row at or after :data:`PROBES` ids spread over the range still open."""
    found: int | None = None
    while low <= high:
        span = high - low + 1
        marks = sorted({low + span * i // (PROBES + 1) for i in range(1, PROBES + 1)})
        # One statement, each probe named by its mark (integers computed here, not input); a
        # probe past the table's last row gives no row at all.
        probes = " UNION ALL ".join(
            f"SELECT {mark} AS mark, p.id, p.received_at FROM (SELECT id, received_at "  # noqa: S608
            f"FROM {table} WHERE id >= {mark} ORDER BY id LIMIT 1) AS p"
            for mark in marks
        )
        by_mark: dict[int, tuple[int, str] | None] = dict.fromkeys(marks)
        for mark, row_id, received_at in conn.execute(probes).fetchall():
            by_mark[mark] = (row_id, received_at)
        for mark in marks:
            row = by_mark[mark]
            if row is None or row[0] > high:
                high = mark - 1
                break
            if row[1] >= moment:
                found, high = row[0], mark - 1
                break
            low = row[0] + 1
    return found


def window_ids(conn: Connection, table: str, since: str) -> tuple[int, int] | None:
    """The ids of the first row of ``table`` received at or after ``since`` and of the last
    row, or None when no row is that recent (see the module's docstring for rows stored out
    of time order)."""
    low, high = _ends(conn, table)
    if low is None or high is None:
        return None
    found = _first_from(conn, table, since, low, high)
    return None if found is None else (found, high)


def id_range(conn: Connection, table: str, since: str | None, until: str | None) -> tuple[int, int]:
    """The lowest and highest id (both included) of the rows of ``table`` received from
    ``since`` up to, not including, ``until`` (UTC text; None: no bound on that side), or
    :data:`EMPTY_RANGE` when none is.

    Both ends are always given, for PostgreSQL's sake: its generic plan for a prepared
    ``id >= $1`` guesses a third of the table and scans it all, where a range guesses a
    sliver and reads the primary key. Callers keep their ``received_at`` condition too (see
    the module's docstring).
    """
    low, high = _ends(conn, table)
    if low is None or high is None:
        return EMPTY_RANGE
    if since is not None:
        first = _first_from(conn, table, since, low, high)
        if first is None:
            return EMPTY_RANGE
        low = first
    if until is not None:
        beyond = _first_from(conn, table, until, low, high)
        if beyond is not None:
            high = beyond - 1
    return (low, high) if low <= high else EMPTY_RANGE
