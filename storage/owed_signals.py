"""The signals the merchant's code is owed for each new outcome, kept on the outcome's own row.

The commit that records a new outcome also records, on its ``outcomes`` row, the names of the
signals it owes (``signals``, a JSON array in sending order) and the reconciliation state they
were decided on (``signals_reconciliation``); the receiver sets ``signals_sent_at`` once its
receivers have run. A worker that dies between the two leaves the signals owed, and the next
redelivery or ``flask payhooks signals --send`` sends them: delivery to receivers is at least
once. Marks are committed without waiting for the disk under ``FULL``: a mark lost to a power
cut only means one more sending, never a lost one.

Why on the outcome rather than in a table of their own (migration 0007, issue 17): the row is
written in the same transaction anyway, so owing the signals costs SQLite no page of the
table's b-tree beyond the outcome's own; a table of its own cost three b-trees (the table, its
unique key, its index of unsent rows). What is still owed is found through one small partial
index (:data:`OWED_INDEX_SQL`) that holds only the outcomes whose signals are not sent yet.

The ``owed_signals`` view (:data:`VIEW_SQL`) keeps one row per owed signal, with the column
names the table had, for the merchant's SQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Final

from payhooks.storage.errors import StorageError
from payhooks.storage.rows import OwedSignal
from payhooks.storage.sql import Connection

__all__ = [
    "COLUMNS",
    "OWED_INDEX_SQL",
    "VIEW_SQL",
    "from_names",
    "mark_sent",
    "owe",
    "to_names",
    "unsent",
]

#: The columns migration 0007 adds to ``outcomes``, all nullable: NULL ``signals`` owes none.
COLUMNS: Final = ("signals", "signals_reconciliation", "signals_sent_at")

#: Finding what is still owed reads only the outcomes whose signals are not sent: the index
#: holds those alone, so it stays as small as the backlog, and marking them sent removes them.
OWED_INDEX_SQL: Final = (
    "CREATE INDEX outcomes_signals_owed ON outcomes (delivery_id) "
    "WHERE signals IS NOT NULL AND signals_sent_at IS NULL"
)

#: One row per owed signal (sent or not), as the ``owed_signals`` table had them; ``position``
#: is the signal's place in its outcome's sending order (from 0), ``owed_at`` the outcome's
#: ``recorded_at`` (the signals are owed in the commit that records it). PostgreSQL's spelling
#: is :func:`payhooks.storage.postgresql.schema.to_postgres_view`'s.
VIEW_SQL: Final = """CREATE VIEW owed_signals AS
SELECT o.id AS outcome_id, o.delivery_id AS delivery_id, s.value AS signal, s.key AS position,
    o.signals_reconciliation AS reconciliation, o.recorded_at AS owed_at,
    o.signals_sent_at AS sent_at
FROM outcomes AS o, json_each(o.signals) AS s
WHERE o.signals IS NOT NULL"""

_OWE = (
    "UPDATE outcomes SET signals = ?, signals_reconciliation = ? "
    "WHERE id = ? AND delivery_id = ? AND signals IS NULL"
)
_OWED = "signals IS NOT NULL AND signals_sent_at IS NULL"
_UNSENT = (
    "SELECT id, delivery_id, signals, signals_reconciliation, recorded_at "  # noqa: S608
    f"FROM outcomes WHERE {_OWED}"
)
_MARK_SENT = f"UPDATE outcomes SET signals_sent_at = ? WHERE id = ? AND {_OWED} RETURNING signals"  # noqa: S608


def to_names(signals: Iterable[str]) -> str | None:
    """The ``signals`` column for these names: a compact JSON array in sending order, each
    name once (the table's unique key did that); None when there are none."""
    names = list(dict.fromkeys(signals))
    return json.dumps(names, separators=(",", ":"), ensure_ascii=False) if names else None


def from_names(stored: str) -> list[str]:
    """The names a ``signals`` column holds."""
    names: list[str] = json.loads(stored)
    return names


def owe(
    conn: Connection,
    outcome_id: int,
    delivery_id: int,
    signals: Iterable[str],
    reconciliation: str,
) -> None:
    """Record the signals an outcome owes, on its row; an outcome that owes some already keeps
    them (owing again changes nothing).

    :raises StorageError: no outcome ``outcome_id`` was recorded by delivery ``delivery_id``.
    """
    names = to_names(signals)
    if names is None:
        return
    if conn.execute(_OWE, (names, reconciliation, outcome_id, delivery_id)).rowcount:
        return
    found = conn.execute(
        "SELECT 1 FROM outcomes WHERE id = ? AND delivery_id = ?", (outcome_id, delivery_id)
    ).fetchone()
    if found is None:
        raise StorageError(
            f"There is no outcome {outcome_id} recorded by delivery {delivery_id} to owe signals."
        )


def unsent(conn: Connection, delivery_id: int | None) -> list[OwedSignal]:
    """The signals still owed, oldest outcome first, each outcome's in sending order: for one
    delivery, or all of them."""
    if delivery_id is None:
        rows = conn.execute(f"{_UNSENT} ORDER BY id").fetchall()
    else:
        rows = conn.execute(f"{_UNSENT} AND delivery_id = ? ORDER BY id", (delivery_id,)).fetchall()
    return [
        OwedSignal(outcome_id, owed_by, name, position, reconciliation, owed_at, None)
        for outcome_id, owed_by, stored, reconciliation, owed_at in rows
        for position, name in enumerate(from_names(stored))
    ]


def mark_sent(conn: Connection, outcome_id: int, sent_at: str) -> int:
    """Mark an outcome's owed signals sent; how many were still owed."""
    row = conn.execute(_MARK_SENT, (sent_at, outcome_id)).fetchone()
    return 0 if row is None else len(from_names(row[0]))
