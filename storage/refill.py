"""The statements that make a stored rollup table its view again, whole or for some rows.

Every rollup (:mod:`payhooks.storage.rollup`, :mod:`payhooks.storage.listed_identifiers`) is a
view stored as a table; its triggers refill the rows a write changes, and migrations refill
the whole table. Delete, then insert: a ``REPLACE`` in a trigger would take the conflict policy
of the statement that fired it (an upsert's ``DO NOTHING``), not its own.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["refill_sql"]


def refill_sql(
    table: str, view: str, columns: Sequence[str], where: str | None = None
) -> tuple[str, str]:
    """``DELETE`` the rows of ``table`` (those ``where`` selects; all without it), then
    ``INSERT`` the same rows of ``view``. Constants only, never user input."""
    listed = ", ".join(columns)
    condition = "" if where is None else f" WHERE {where}"
    return (
        f"DELETE FROM {table}{condition}",  # noqa: S608 - constants only
        f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {view}{condition}",  # noqa: S608
    )
