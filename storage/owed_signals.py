"""The ``owed_signals`` table: what the merchant's code is owed for each new outcome.

The commit that records a new outcome also records, here, each signal it owes (by name, with
the reconciliation state it was decided on); the receiver marks them sent once its receivers
have run. A worker that dies between the two leaves the signal owed, and the next redelivery
or ``flask payhooks signals --send`` sends it: delivery to receivers is at least once. Marks
are committed without waiting for the disk under ``FULL``: a mark lost to a power cut only
means one more sending, never a lost one.
"""

from __future__ import annotations

from collections.abc import Iterable

from payhooks.storage.rows import OwedSignal
from payhooks.storage.sql import Connection

__all__ = ["TABLE_SQL", "UNSENT_INDEX_SQL", "mark_sent", "owe", "unsent"]

TABLE_SQL = """
    CREATE TABLE owed_signals (
        id INTEGER PRIMARY KEY,
        outcome_id INTEGER NOT NULL REFERENCES outcomes(id),
        delivery_id INTEGER NOT NULL REFERENCES deliveries(id),
        signal TEXT NOT NULL,
        reconciliation TEXT NOT NULL,
        owed_at TEXT NOT NULL,
        sent_at TEXT,
        UNIQUE (outcome_id, signal)
    )"""

#: Finding what is still owed reads only the unsent rows.
UNSENT_INDEX_SQL = (
    "CREATE INDEX owed_signals_unsent ON owed_signals (delivery_id) WHERE sent_at IS NULL"
)

_COLUMNS = "id, outcome_id, delivery_id, signal, reconciliation, owed_at, sent_at"
_INSERT = (
    "INSERT INTO owed_signals (outcome_id, delivery_id, signal, reconciliation, owed_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (outcome_id, signal) DO NOTHING"
)


def owe(
    conn: Connection,
    outcome_id: int,
    delivery_id: int,
    signals: Iterable[str],
    reconciliation: str,
    owed_at: str,
) -> None:
    """Record the signals an outcome owes; owing one again changes nothing."""
    conn.executemany(
        _INSERT,
        [(outcome_id, delivery_id, signal, reconciliation, owed_at) for signal in signals],
    )


def unsent(conn: Connection, delivery_id: int | None) -> list[OwedSignal]:
    """The signals still owed, oldest first: for one delivery, or all of them."""
    where = "sent_at IS NULL" + ("" if delivery_id is None else " AND delivery_id = ?")
    params = () if delivery_id is None else (delivery_id,)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM owed_signals WHERE {where} ORDER BY id",  # noqa: S608
        params,
    ).fetchall()
    return [OwedSignal(*row) for row in rows]


def mark_sent(conn: Connection, outcome_id: int, sent_at: str) -> int:
    """Mark an outcome's owed signals sent; how many were still owed."""
    cursor = conn.execute(
        "UPDATE owed_signals SET sent_at = ? WHERE outcome_id = ? AND sent_at IS NULL",
        (sent_at, outcome_id),
    )
    count: int = cursor.rowcount
    return count
