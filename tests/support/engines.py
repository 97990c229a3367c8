"""Reading (and, as a SQL tool would, writing) a ledger's tables directly in tests, on either
engine.

Tests check what was stored the way finance's SQL sees it. ``tables(ledger).execute(sql,
params)`` runs one statement (``?`` placeholders) through the ledger's own engine, committed
at once, and returns its rows already fetched; test code may reach into the engine, since the
engine is what it checks. So one assertion holds on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from payhooks.storage import Ledger


class Result:
    """A statement's rows (tuples) and ``rowcount``, fetched."""

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self.rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows)


class Tables:
    """``execute`` on the ledger's engine; see the module docstring."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        with self.ledger._engine.writer.write() as conn:
            cursor = conn.execute(sql, tuple(params))
            fetched = [tuple(row) for row in cursor.fetchall()] if cursor.description else []
            return Result(fetched, cursor.rowcount)

    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        with self.ledger._engine.writer.write() as conn:
            conn.executemany(sql, [tuple(row) for row in params])


def tables(ledger: Ledger) -> Tables:
    return Tables(ledger)
