"""What the table modules need of a connection, whichever engine's it is.

Each table module's functions take a connection and call ``execute`` (or ``executemany``), then
read the cursor. ``sqlite3.Connection`` offers exactly this, and so does
:class:`payhooks.storage.postgresql.connection.PostgresConnection` over psycopg; these protocols
name the common ground, so that a table module can be checked against both without importing
either driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

__all__ = ["Connection", "Cursor"]


class Cursor(Protocol):
    """A statement's result: its rows, and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Any:
        """Per column of a read, a sequence whose first item is the column's name."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """Runs the table modules' statements (``?`` placeholders; each engine's spelling is its
    own business)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...
