"""One refresh's turn at the finance rollup: its read snapshots and its short writes, per
engine (:mod:`payhooks.storage.reads.rollup`).

SQLite: a snapshot is a deferred read transaction on the ledger's connection; a write goes
through the ledger's writer (the write lock, ``BEGIN IMMEDIATE``), so the receiver waits only
for that write. Two refreshes at once are safe without a lock of their own: the watermark is
moved by compare-and-set and a day's rows are stored only while its dirty mark is the version
computed.

PostgreSQL: one refresh at a time, under the session advisory lock :data:`ROLLUP_LOCK`
(``pg_try_advisory_lock``: a second refresh skips rather than waits); its snapshots
(``REPEATABLE READ``) and writes run on the connection that holds the lock, so a refresh needs
one connection of the pool, never two.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from payhooks.storage.engines import Engine
from payhooks.storage.reads.rollup_sql import HORIZON_SQL

__all__ = ["ROLLUP_LOCK", "Turn", "take_turn"]

#: The key of the advisory lock a refresh holds on PostgreSQL ("rollup" in ASCII, as a number).
ROLLUP_LOCK = 0x726F6C6C7570


class Turn:
    """A refresh's snapshots and writes (SQLite's; see :class:`_PostgresTurn`)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @contextmanager
    def snapshot(self) -> Iterator[Any]:
        """A connection whose reads all see one snapshot."""
        with self._engine.session() as conn:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    @contextmanager
    def write(self) -> Iterator[Any]:
        """One short write transaction."""
        with self._engine.writer.write(durable=False) as conn:
            yield conn

    def horizon(self, conn: Any) -> tuple[int, int] | None:
        """PostgreSQL's ``(xmin, xmax)`` of ``conn``'s snapshot; None: ids commit in order."""
        del conn
        return None


class _PostgresTurn(Turn):
    def __init__(self, engine: Engine, conn: Any) -> None:
        super().__init__(engine)
        self._conn = conn

    @contextmanager
    def snapshot(self) -> Iterator[Any]:
        self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield self._conn
        finally:
            self._conn.execute("ROLLBACK")

    @contextmanager
    def write(self) -> Iterator[Any]:
        self._conn.execute("BEGIN")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def horizon(self, conn: Any) -> tuple[int, int] | None:
        xmin, xmax = conn.execute(HORIZON_SQL).fetchone()
        return int(xmin), int(xmax)


@contextmanager
def take_turn(engine: Engine) -> Iterator[Turn | None]:
    """The refresh's turn, or None when another refresh holds it (PostgreSQL)."""
    if engine.kind != "postgresql":
        yield Turn(engine)
        return
    with engine.session() as conn:
        (mine,) = conn.execute("SELECT pg_try_advisory_lock(?)", (ROLLUP_LOCK,)).fetchone()
        if not mine:
            yield None
            return
        try:
            yield _PostgresTurn(engine, conn)
        finally:
            conn.execute("SELECT pg_advisory_unlock(?)", (ROLLUP_LOCK,))
