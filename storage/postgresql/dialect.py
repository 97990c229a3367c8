"""The table modules' SQL, as PostgreSQL reads it.

The table modules (:mod:`payhooks.storage.payments` and its siblings) write their statements
once, in the SQL both engines share, with SQLite's ``?`` placeholders. PostgreSQL differs in
a handful of spellings, each turned here, once per statement text (cached): ``?`` is ``%s``
(and a literal ``%`` is ``%%``), SQLite's unbounded ``LIMIT -1`` is ``LIMIT ALL``, ``char(10)``
is ``chr(10)``, and ``SUM`` of integers is cast back to ``BIGINT`` (PostgreSQL sums them as
``numeric``, which would reach Python as ``Decimal``; amounts are integer minor units).
Nothing else is rewritten: a statement that needs more than spelling is given per engine in its
module.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["cast_sums", "to_postgres"]

_SUM = re.compile(r"\bSUM\(", re.IGNORECASE)


def cast_sums(sql: str) -> str:
    """Every ``SUM(...)`` in ``sql`` as ``CAST(SUM(...) AS BIGINT)``."""
    out: list[str] = []
    position = 0
    for match in _SUM.finditer(sql):
        if match.start() < position:  # nested inside a sum already wrapped
            continue
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(sql)):
            depth += {"(": 1, ")": -1}.get(sql[end], 0)
            if depth == 0:
                break
        out.append(sql[position : match.start()])
        out.append(f"CAST({sql[match.start() : end + 1]} AS BIGINT)")
        position = end + 1
    out.append(sql[position:])
    return "".join(out)


@lru_cache(maxsize=512)
def to_postgres(sql: str) -> str:
    """``sql`` (a table module's statement, ``?`` placeholders) as psycopg runs it."""
    converted = sql.replace("%", "%%").replace("?", "%s")
    converted = converted.replace("LIMIT -1", "LIMIT ALL").replace("char(10)", "chr(10)")
    return cast_sums(converted)
