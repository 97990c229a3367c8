"""The signals the merchant's code is owed for each new outcome, kept on the row of the delivery
that recorded it.

The commit that records a new outcome also records, on that delivery's ``deliveries`` row, the
names of the signals it owes (``signals``, a JSON array in sending order) and the reconciliation
state they were decided on (``signals_reconciliation``); the receiver sets ``signals_sent_at``
once its receivers have run. A worker that dies between the two leaves the signals owed, and the
next redelivery or ``flask payhooks signals --send`` sends them: delivery to receivers is at
least once. Marks are committed without waiting for the disk under ``FULL``: a mark lost to a
power cut only means one more sending, never a lost one. The receiver does not even commit
them alone: they wait for the worker's next delivery, whose commit writes them first
(:mod:`payhooks.receiver.pipeline.sent_marks`).

Why on the delivery (migration 0009, issue 17): the names depend on the payment's state once
the outcome is recorded, so they are known only after the outcome's row is written; the
delivery's row is written after it (:mod:`payhooks.storage.arrivals`), so it can carry them and
each row is written once. (From 0007 to 0009 they were on the outcome's row, written a second
time to hold them; before 0007, in a table of their own, three more b-trees per delivery.) What
is still owed is found through one small partial index, ``deliveries_signals_owed`` (on
``outcome_id``, which marking them sent names), that holds only the deliveries whose signals
are not sent yet: it stays as small as the backlog, and marking them sent removes them.

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
    "VIEW_SQL",
    "from_names",
    "mark_sent",
    "owe",
    "to_names",
    "unsent",
]

#: The columns that hold them (on ``outcomes`` from 0007, on ``deliveries`` from 0009), all
#: nullable: NULL ``signals`` owes none.
COLUMNS: Final = ("signals", "signals_reconciliation", "signals_sent_at")

#: One row per owed signal (sent or not), as the ``owed_signals`` table had them; ``position``
#: is the signal's place in its outcome's sending order (from 0), ``owed_at`` the outcome's
#: ``recorded_at`` (the signals are owed in the commit that records it). PostgreSQL's spelling
#: is :func:`payhooks.storage.postgresql.schema.to_postgres_view`'s.
VIEW_SQL: Final = """CREATE VIEW owed_signals AS
SELECT d.outcome_id AS outcome_id, d.id AS delivery_id, s.value AS signal, s.key AS position,
    d.signals_reconciliation AS reconciliation, o.recorded_at AS owed_at,
    d.signals_sent_at AS sent_at
FROM deliveries AS d JOIN outcomes AS o ON o.id = d.outcome_id, json_each(d.signals) AS s
WHERE d.signals IS NOT NULL"""

_OWE = (
    "UPDATE deliveries SET signals = ?, signals_reconciliation = ? "
    "WHERE id = ? AND outcome_id = ? AND status = 'processed' AND signals IS NULL"
)
_OWED = "d.signals IS NOT NULL AND d.signals_sent_at IS NULL"
_UNSENT = (
    "SELECT d.outcome_id, d.id, d.signals, d.signals_reconciliation, o.recorded_at "  # noqa: S608
    f"FROM deliveries AS d JOIN outcomes AS o ON o.id = d.outcome_id WHERE {_OWED}"
)
_MARK_SENT = (
    "UPDATE deliveries SET signals_sent_at = ? WHERE outcome_id = ? "
    "AND signals IS NOT NULL AND signals_sent_at IS NULL RETURNING signals"
)


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
    """Record the signals an outcome owes, on the row of the delivery that recorded it; one that
    owes some already keeps them (owing again changes nothing). The receiver's new deliveries
    carry them in their one insert instead (:mod:`payhooks.storage.arrivals`).

    :raises StorageError: no outcome ``outcome_id`` was recorded by delivery ``delivery_id``.
    """
    names = to_names(signals)
    if names is None:
        return
    if conn.execute(_OWE, (names, reconciliation, delivery_id, outcome_id)).rowcount:
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
        rows = conn.execute(f"{_UNSENT} ORDER BY d.outcome_id").fetchall()
    else:
        rows = conn.execute(f"{_UNSENT} AND d.id = ?", (delivery_id,)).fetchall()
    return [
        OwedSignal(outcome_id, owed_by, name, position, reconciliation, owed_at, None)
        for outcome_id, owed_by, stored, reconciliation, owed_at in rows
        for position, name in enumerate(from_names(stored))
    ]


def mark_sent(conn: Connection, outcome_id: int, sent_at: str) -> int:
    """Mark an outcome's owed signals sent; how many were still owed."""
    row = conn.execute(_MARK_SENT, (sent_at, outcome_id)).fetchone()
    return 0 if row is None else len(from_names(row[0]))
