"""The ``payments`` table: the payments the merchant expects, one per ``external_identifier``.

Registering is idempotent through the primary key: ``INSERT ... ON CONFLICT DO NOTHING``, and
only when nothing was inserted is the stored row read back (in the same transaction) to tell
the same registration again from a conflicting one. Both statements are plain SQL that
PostgreSQL runs as well, but for its ``%s`` placeholders.
"""

from __future__ import annotations

from typing import Any, Final

from payhooks.storage.sql import Connection

__all__ = ["FIELDS", "differing", "insert"]

#: Fields compared when a payment is registered again, in the order :func:`insert` takes and
#: returns them.
FIELDS: Final = (
    "kind",
    "amount_minor",
    "currency",
    "plan_amount_minor",
    "description",
    "metadata",
)

_INSERT = f"""
    INSERT INTO payments (external_identifier, created_at, {", ".join(FIELDS)})
    VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (external_identifier) DO NOTHING"""  # noqa: S608
_SELECT = f"SELECT {', '.join(FIELDS)} FROM payments WHERE external_identifier = ?"  # noqa: S608


def insert(
    conn: Connection,
    external_identifier: str,
    created_at: str,
    values: tuple[Any, ...],
) -> tuple[Any, ...] | None:
    """Register a payment with ``values`` (in :data:`FIELDS` order).

    :returns: None when it is new; otherwise the stored values, for :func:`differing`.
    """
    if conn.execute(_INSERT, (external_identifier, created_at, *values)).rowcount:
        return None
    stored: tuple[Any, ...] = conn.execute(_SELECT, (external_identifier,)).fetchone()
    return stored


def differing(stored: tuple[Any, ...], values: tuple[Any, ...]) -> tuple[str, ...]:
    """The names of the fields whose stored value is not the one registered again."""
    return tuple(name for name, old, new in zip(FIELDS, stored, values, strict=True) if old != new)
