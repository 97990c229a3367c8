"""The ``outcomes`` table: what each notification said happened to a payment, stored once per
(``transaction_id``, ``payment_status``).

Recording an outcome is one unit: insert it (``ON CONFLICT DO NOTHING``), and when one was
stored before, compare the two; then point the delivery at the outcome that stands
(:func:`payhooks.storage.deliveries.mark_recorded`) and read the payment's reconciliation state.
The statements are plain SQL that PostgreSQL runs as well (its ``%s`` placeholders are
:mod:`payhooks.storage.postgresql.dialect`'s); the one engine-specific step is telling a missing
delivery (a foreign-key violation) from other integrity errors, in :func:`_insert`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from payhooks.storage.deliveries import mark_recorded
from payhooks.storage.encoding import to_json
from payhooks.storage.errors import UnknownDeliveryError
from payhooks.storage.records import STATE_RANK, Flow, Outcome, PaymentState
from payhooks.storage.rows import DeliveryStatus
from payhooks.storage.sql import Connection
from payhooks.storage.times import from_text, to_text

__all__ = ["COMPARED_FIELDS", "identifier", "record", "select", "to_values"]

_INSERT = """
    INSERT INTO outcomes (delivery_id, transaction_id, external_identifier, flow, provider,
        provider_reference, provider_status, payment_status, state, state_rank, amount,
        currency, amount_minor, paid_at, extra, recorded_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (transaction_id, payment_status) DO NOTHING RETURNING id"""

#: What recording compares when an outcome is already stored: the fields that change who was
#: paid, how much, or what happened. Not ``paid_at``: see ``Ledger.receiver.record_outcome``.
COMPARED_FIELDS: Final = (
    "external_identifier",
    "state",
    "amount_minor",
    "currency",
    "provider_reference",
)
# Fields whose values may appear in a delivery's error text; the others are named only.
_SHOWN_FIELDS = frozenset({"state", "amount_minor", "currency"})

_SELECT_STORED = f"""
    SELECT id, delivery_id, {", ".join(COMPARED_FIELDS)}
    FROM outcomes WHERE transaction_id = ? AND payment_status = ?"""  # noqa: S608 - constants


def to_values(outcome: Outcome, delivery_id: int, recorded_at: str) -> tuple[Any, ...]:
    """The row :func:`record` inserts, made ready before the write lock is taken, so that it
    is held only for SQL."""
    return (
        delivery_id,
        outcome.transaction_id,
        outcome.external_identifier,
        str(outcome.flow),
        outcome.provider,
        outcome.provider_reference,
        outcome.provider_status,
        outcome.payment_status,
        str(outcome.state),
        STATE_RANK[outcome.state],
        str(outcome.amount),
        outcome.currency,
        outcome.amount_minor,
        to_text(outcome.paid_at, argument="paid_at"),
        to_json(outcome.extra),
        recorded_at,
    )


def _conflict(outcome: Outcome, first_delivery: int, stored: Mapping[str, Any]) -> str | None:
    """What a delivery's error says when its outcome differs from the one stored; None when
    it says the same (a duplicate)."""
    new = {name: getattr(outcome, name) for name in COMPARED_FIELDS}  # state: a StrEnum
    differing = [
        f"{name} (stored {stored[name]}, here {new[name]})" if name in _SHOWN_FIELDS else name
        for name in COMPARED_FIELDS
        if stored[name] != new[name]
    ]
    if not differing:
        return None
    return (
        f"The outcome of transaction {outcome.transaction_id!r} with payment_status "
        f"{outcome.payment_status!r} was already recorded from delivery {first_delivery}, "
        f"and this one differs in {', '.join(differing)}. The first one stands."
    )


def _is_foreign_key_violation(err: Exception) -> bool:
    """Whether ``err`` is a foreign-key violation: SQLite's extended result name, PostgreSQL's
    SQLSTATE 23503 (psycopg's ``sqlstate``). Read by attribute, so no driver is imported."""
    return (
        getattr(err, "sqlite_errorname", "") == "SQLITE_CONSTRAINT_FOREIGNKEY"
        or getattr(err, "sqlstate", "") == "23503"
    )


def _insert(conn: Connection, values: tuple[Any, ...]) -> int | None:
    """The new outcome's id, or None when one was stored for its transaction and status."""
    try:
        inserted = conn.execute(_INSERT, values).fetchone()
    except Exception as err:
        if _is_foreign_key_violation(err):
            raise UnknownDeliveryError(values[0]) from err
        raise
    return None if inserted is None else int(inserted[0])


def record(
    conn: Connection, outcome: Outcome, values: tuple[Any, ...], now: str
) -> tuple[int, bool, DeliveryStatus, str]:
    """Record ``outcome`` (``values`` from :func:`to_values`) unless its transaction and status
    are stored, else compare it with the one stored, and mark its delivery, inside the
    caller's write transaction; the caller then refreshes the payment's row.

    :returns: the id of the outcome that stands, whether it is the one just inserted, the
        status its delivery was given, and the ``external_identifier`` of the payment that
        outcome names.
    :raises UnknownDeliveryError: the delivery is not stored (the caller's transaction is then
        undone).
    """
    delivery_id: int = values[0]
    status, identifier = DeliveryStatus.PROCESSED, outcome.external_identifier
    error: str | None = None
    # An unknown delivery_id: the foreign key refuses a new outcome (or, deferred, fails the
    # commit), and the update below finds no delivery to mark; either way the write is undone.
    outcome_id = _insert(conn, values)
    is_new = outcome_id is not None
    if outcome_id is None:
        # The stored outcome stands, and so does the payment it names: a later delivery of the
        # same transaction and status under another external_identifier must not look up a
        # payment that has no outcome.
        outcome_id, first_delivery, *stored_values = conn.execute(
            _SELECT_STORED, (outcome.transaction_id, outcome.payment_status)
        ).fetchone()
        stored = dict(zip(COMPARED_FIELDS, stored_values, strict=True))
        identifier = stored["external_identifier"]
        if first_delivery != delivery_id:
            error = _conflict(outcome, first_delivery, stored)
            status = DeliveryStatus.CONFLICTING_OUTCOME if error else DeliveryStatus.DUPLICATE
    if not mark_recorded(conn, delivery_id, status.value, error, outcome_id, identifier, now):
        raise UnknownDeliveryError(delivery_id)
    return outcome_id, is_new, status, identifier


def identifier(conn: Connection, outcome_id: int) -> str | None:
    """The ``external_identifier`` of the stored outcome ``outcome_id``, or None."""
    row = conn.execute(
        "SELECT external_identifier FROM outcomes WHERE id = ?", (outcome_id,)
    ).fetchone()
    return None if row is None else str(row[0])


_SELECT_OUTCOME = """
    SELECT transaction_id, external_identifier, flow, provider, provider_reference,
        provider_status, payment_status, state, amount, currency, amount_minor, paid_at, extra
    FROM outcomes WHERE id = ?"""


def select(conn: Connection, outcome_id: int) -> Outcome | None:
    """The stored outcome ``outcome_id`` as an :class:`Outcome`, or None: what its signals are
    sent with, without parsing its delivery's body again."""
    row = conn.execute(_SELECT_OUTCOME, (outcome_id,)).fetchone()
    if row is None:
        return None
    (transaction_id, identifier, flow, provider, reference, provider_status, payment_status,
     state, amount, currency, amount_minor, paid_at, extra) = row  # fmt: skip
    return Outcome(
        transaction_id=transaction_id,
        external_identifier=identifier,
        flow=Flow(flow),
        provider=provider,
        provider_reference=reference,
        provider_status=provider_status,
        payment_status=payment_status,
        state=PaymentState(state),
        amount=Decimal(amount),
        currency=currency,
        amount_minor=amount_minor,
        paid_at=from_text(paid_at),
        extra=json.loads(extra),
    )
