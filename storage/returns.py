"""The ``returns`` table: customers' return and cancel visits, a bounded number per payment.

Anyone holding a valid return URL can visit it as often as they like, so each insert prunes
the identifier's oldest visits in the same transaction.
"""

from __future__ import annotations

from payhooks.storage.sql import Connection

__all__ = ["insert"]

_INSERT = (
    "INSERT INTO returns (external_identifier, returned_at, kind, result_code) "
    "VALUES (?, ?, ?, ?) RETURNING id"
)

# Everything of one identifier but its newest visits; walks returns_external_identifier
# backwards, so no sort. (A limit both engines read as "no limit" would be spelt two ways: the
# bound is the most a table can hold.)
_PRUNE = """
    DELETE FROM returns WHERE id IN (
        SELECT id FROM returns WHERE external_identifier = ?
        ORDER BY returned_at DESC, id DESC LIMIT 9223372036854775807 OFFSET ?
    )"""


def insert(
    conn: Connection,
    external_identifier: str,
    returned_at: str,
    kind: str,
    result_code: str | None,
    *,
    keep: int,
) -> int:
    """Store one visit and keep only the identifier's newest ``keep``; the new row's id."""
    returned_id: int = conn.execute(
        _INSERT, (external_identifier, returned_at, kind, result_code)
    ).fetchone()[0]
    conn.execute(_PRUNE, (external_identifier, keep))
    return returned_id
