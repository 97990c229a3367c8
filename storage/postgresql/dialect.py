"""The table modules' SQL, as psycopg reads it.

The table modules (:mod:`payhooks.storage.payments` and its siblings) write each statement
once, in SQL both engines run as written, with ``?`` placeholders, the DB-API's ``qmark`` style
that ``sqlite3`` takes. psycopg takes ``%s``, so here each ``?`` becomes ``%s`` (and a literal
``%`` becomes ``%%``), once per statement text (cached). Nothing else is changed: a statement
that needs more than its placeholders is written out per engine in its module.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["to_postgres"]


@lru_cache(maxsize=512)
def to_postgres(sql: str) -> str:
    """``sql`` (a table module's statement, ``?`` placeholders) with psycopg's placeholders."""
    return sql.replace("%", "%%").replace("?", "%s")
