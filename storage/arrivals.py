"""A new delivery stored with what came of it, in fewer writes than the general way (issue 17).

The receiver's usual delivery is new: its ``dedupe_key`` was never seen. Stored the general way
(:func:`payhooks.storage.deliveries.insert` as ``received``, then the outcome, then the delivery
marked and its signals owed), the delivery's row is written three times in one transaction; on
PostgreSQL each write is a new row version with new entries in the table's indexes, and on
SQLite each is a statement and an index change more. Here, on PostgreSQL, each row is written
once, the delivery last, already finished:

1. its id is allotted (the identity's sequence on PostgreSQL, the table's next id under SQLite's
   write lock), in the statement that looks its key up;
2. the outcome is inserted naming it, its reference to the delivery checked at commit (a
   constraint deferred since migration 0009);
3. the payment's state is read and the signals the outcome owes decided
   (:mod:`payhooks.storage.owed_signals`);
4. the delivery is inserted with its status, its error, its outcome and those signals.

A body that is not a notification is one insert of the delivery with its error. A key already
stored (a retry, a reused ``webhook-id``) takes the general way, which counts the attempt or
stores the delivery under a derived key: :func:`store` returns None, having written nothing.
On PostgreSQL another transaction can store the same key between the look and the insert; the
insert then finds it taken, and :class:`KeyTakenError` undoes the transaction for the caller to
take the general way. (On SQLite the write lock, held from ``BEGIN IMMEDIATE``, rules that out.)

**On SQLite the delivery is inserted first**, as ``processed`` (so it writes no entry in the
partial ``deliveries_status``), and updated once with its outcome, status and signals after the
outcome is recorded: a second write of its row, in the same page of the same commit. SQLite
cannot defer the outcome's key check cheaply: with checks deferred, inserting a parent row
scans each child table for rows naming it (``outcomes`` by ``delivery_id``, ``deliveries`` by
``reused_key_of``), and neither has an index for that, so each delivery read every outcome and
every delivery. Measured in process: 1,000 µs per delivery growing to 3,500 µs over 6,000
deliveries, against a steady 250 µs this way. PostgreSQL checks a deferred key at commit by the
parent's primary key, so there each row is written once."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from payhooks.storage.errors import StorageError
from payhooks.storage.outcomes import settle
from payhooks.storage.owed_signals import to_names
from payhooks.storage.reconciliation import state_for
from payhooks.storage.records import Outcome, ReconciliationState
from payhooks.storage.rows import DeliveryStatus, RecordedOutcome
from payhooks.storage.sql import Connection

__all__ = ["Arrival", "DecideSignals", "KeyTakenError", "store"]

#: Decides the signals a new outcome owes, from the payment's state once it is recorded.
DecideSignals = Callable[[Outcome, ReconciliationState], Iterable[str]]

# The id the delivery will have, and the delivery already stored under its key, if any.
_LOOK: Final = {
    "sqlite": (
        "SELECT COALESCE(MAX(id), 0) + 1, (SELECT id FROM deliveries WHERE dedupe_key = ?) "
        "FROM deliveries"
    ),
    "postgresql": (
        "SELECT nextval(pg_get_serial_sequence('deliveries', 'id')), "
        "(SELECT id FROM deliveries WHERE dedupe_key = ?)"
    ),
}
_INSERT = """
    INSERT INTO deliveries (id, dedupe_key, received_at, headers, body, body_sha256, updated_at,
        status, error, outcome_id, signals, signals_reconciliation)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (dedupe_key) DO NOTHING RETURNING id"""
# SQLite's delivery, inserted before its outcome, finished once the outcome is recorded.
_FINISH = (
    "UPDATE deliveries SET status = ?, error = ?, outcome_id = ?, signals = ?, "
    "signals_reconciliation = ? WHERE id = ?"
)


class KeyTakenError(StorageError):
    """Another transaction stored the same ``dedupe_key`` meanwhile (PostgreSQL only): this
    one must be undone and the delivery stored the general way."""

    def __init__(self, dedupe_key: str) -> None:
        super().__init__("Another transaction stored a delivery under the same key meanwhile.")
        self.dedupe_key = dedupe_key


@dataclass(frozen=True, slots=True)
class Arrival:
    """A new delivery as :func:`store` wrote it."""

    delivery_id: int
    #: ``processed``, ``duplicate`` or ``conflicting_outcome`` for an outcome; the error's
    #: status (``malformed_json``, ``invalid_payload``, ``processing_error``) otherwise.
    status: DeliveryStatus
    #: What recording the outcome did; None for a body that is not a notification.
    recorded: RecordedOutcome | None
    #: The signals the delivery owes, in sending order: those of a new outcome, else none.
    signals: tuple[str, ...]


def store(
    conn: Connection,
    engine: str,
    dedupe_key: str,
    row: tuple[Any, ...],
    *,
    outcome: Outcome | None,
    outcome_values: tuple[Any, ...] | None,
    error: tuple[DeliveryStatus, str | None] | None,
    decide: DecideSignals,
) -> Arrival | None:
    """Store a delivery under a new ``dedupe_key`` with its outcome (``outcome_values`` from
    :func:`payhooks.storage.outcomes.to_values`, its delivery id left to fill in) or its
    ``error``, in the caller's write transaction; None, with nothing written, when the key is
    stored already.

    :param engine: ``"sqlite"`` or ``"postgresql"``.
    :param row: ``received_at``, ``headers`` (JSON), ``body``, ``body_sha256`` and
        ``updated_at``, as :func:`payhooks.storage.deliveries.to_values` makes them.
    :raises KeyTakenError: another transaction stored the key after the look (PostgreSQL).
    """
    delivery_id, known = conn.execute(_LOOK[engine], (dedupe_key,)).fetchone()
    if known is not None:
        return None
    received_at, headers, body, body_sha256, updated_at = row
    stored = (delivery_id, dedupe_key, received_at, headers, body, body_sha256, updated_at)
    if outcome is None or outcome_values is None:
        status, error_text = error or (DeliveryStatus.PROCESSING_ERROR, None)
        _insert_delivery(conn, (*stored, status.value, error_text, None, None, None), dedupe_key)
        return Arrival(delivery_id, status, None, ())
    delivery_first = engine == "sqlite"
    if delivery_first:  # see the module docstring: SQLite cannot defer the key check cheaply
        _insert_delivery(conn, (*stored, "processed", None, None, None, None), dedupe_key)
    values = (delivery_id, *outcome_values[1:])
    outcome_id, is_new, status, error_text, identifier = settle(conn, outcome, values)
    reconciliation = state_for(conn, identifier)
    if reconciliation is None:  # pragma: no cover - the outcome is stored, so it has a row
        raise AssertionError("a recorded outcome has no reconciliation row")
    names: tuple[str, ...] = ()
    if is_new:
        names = tuple(dict.fromkeys(decide(outcome, reconciliation)))
    state = reconciliation.value if names else None
    finished = (status.value, error_text, outcome_id, to_names(names), state)
    if delivery_first:
        conn.execute(_FINISH, (*finished, delivery_id))
    else:
        _insert_delivery(conn, (*stored, *finished), dedupe_key)
    recorded = RecordedOutcome(outcome_id, is_new, reconciliation, status)
    return Arrival(delivery_id, status, recorded, names)


def _insert_delivery(conn: Connection, values: tuple[Any, ...], dedupe_key: str) -> None:
    if conn.execute(_INSERT, values).fetchone() is None:
        raise KeyTakenError(dedupe_key)
