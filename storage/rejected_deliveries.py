"""The ``rejected_deliveries`` table: a bounded trace of deliveries that failed verification.

Anyone without a key can send these, so the table keeps only the newest rows (pruned in the
same transaction as each insert) and only the start of each body.
"""

from __future__ import annotations

from typing import Final

from payhooks.storage.sql import Connection

__all__ = ["REJECTED_BODY_BYTES", "insert"]

#: How much of a rejected body is kept.
REJECTED_BODY_BYTES: Final = 4096

_INSERT = (
    "INSERT INTO rejected_deliveries (received_at, remote_addr, reason, body, body_size) "
    "VALUES (?, ?, ?, ?, ?) RETURNING id"
)
_PRUNE = "DELETE FROM rejected_deliveries WHERE id <= ?"


def insert(
    conn: Connection,
    received_at: str,
    remote_addr: str | None,
    reason: str,
    body: bytes,
    *,
    keep: int,
) -> int:
    """Store one rejection (the first :data:`REJECTED_BODY_BYTES` of its body) and keep only
    the newest ``keep`` rows; the new row's id."""
    rejected_id: int = conn.execute(
        _INSERT, (received_at, remote_addr, reason, bytes(body[:REJECTED_BODY_BYTES]), len(body))
    ).fetchone()[0]
    # Ids only grow (the newest row is never deleted), so the oldest are a key range.
    conn.execute(_PRUNE, (rejected_id - keep,))
    return rejected_id
