"""The ``owed_signals`` table: what the merchant's code is owed, who is sending it, what was sent.

A row per (outcome, signal), written in the commit that makes it owed
(:mod:`payhooks.storage.payment_states`), so nothing owed is lost to a crash after the commit.
Sending is claimed first, in a commit of its own or the delivery's: a claim is a lease
(``claimed_until``), taken only when the signal is not sent and no live lease holds it. So two
copies of one delivery, two workers or two hosts never run one outcome's receivers at the same
time, and a process that dies holding a claim leaves the signals to be claimed again once the
lease has passed (at least once, never twice at once).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from payhooks.storage.rows import OwedSignal
from payhooks.storage.signal_rules import SIGNAL_ORDER
from payhooks.storage.sql import Connection

__all__ = ["claim", "claimable", "mark_sent", "owe", "unsent"]

_POSITION: Final = {name: position for position, name in enumerate(SIGNAL_ORDER)}

_OWE = """
    INSERT INTO owed_signals (outcome_id, delivery_id, signal, position, reconciliation, owed_at)
    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (outcome_id, signal) DO NOTHING"""

_COLUMNS = "outcome_id, delivery_id, signal, position, reconciliation, owed_at, sent_at"
_FREE = "sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= ?)"
# No signal of the outcome is held by a live claim: one outcome, one sender at a time, even when
# a later change owed it one more signal (a registration's payment-succeeded).
_NONE_HELD = (
    "NOT EXISTS (SELECT 1 FROM owed_signals AS held WHERE held.outcome_id = {outcome} "
    "AND held.sent_at IS NULL AND held.claimed_until > ?)"
)
_CLAIM = (
    f"UPDATE owed_signals SET claimed_until = ? WHERE outcome_id = ? AND {_FREE} "  # noqa: S608
    f"AND {_NONE_HELD.format(outcome='?')} RETURNING {_COLUMNS}"
)


def owe(
    conn: Connection,
    owed: Sequence[tuple[int, str]],
    delivery_of: Mapping[int, int],
    reconciliation: str,
    now: str,
) -> None:
    """Owe each (outcome id, signal name) pair once; a pair owed before is left as it is."""
    conn.executemany(
        _OWE,
        [
            (outcome_id, delivery_of[outcome_id], name, _POSITION[name], reconciliation, now)
            for outcome_id, name in owed
        ],
    )


def _signal(row: tuple[Any, ...]) -> OwedSignal:
    return OwedSignal(*row)


def claim(
    conn: Connection, outcome_ids: Iterable[int], *, now: str, until: str
) -> list[OwedSignal]:
    """Claim the unsent, unclaimed (or lease-expired) signals of these outcomes until
    ``until``; what was claimed, by outcome then sending order. A signal another sender holds
    is not returned."""
    claimed: list[OwedSignal] = []
    for outcome_id in sorted(set(outcome_ids)):
        rows = conn.execute(_CLAIM, (until, outcome_id, now, outcome_id, now)).fetchall()
        claimed.extend(sorted(map(_signal, rows), key=lambda s: s.position))
    return claimed


def claimable(conn: Connection, *, now: str, limit: int) -> list[int]:
    """Up to ``limit`` outcomes, oldest first, with owed signals nobody holds: a sender died
    holding them past its lease, or nobody was there to send them (a registration owed them)."""
    none_held = _NONE_HELD.format(outcome="owed_signals.outcome_id")
    rows = conn.execute(
        f"SELECT DISTINCT outcome_id FROM owed_signals WHERE {_FREE} AND {none_held} "  # noqa: S608
        "ORDER BY outcome_id LIMIT ?",
        (now, now, limit),
    ).fetchall()
    return [row[0] for row in rows]


def mark_sent(
    conn: Connection, signals: Iterable[OwedSignal], sent_at: str, errors: Mapping[str, str]
) -> int:
    """Mark claimed signals sent (their receivers ran), with the error a receiver raised for
    a signal, by name; how many."""
    params = [(sent_at, errors.get(s.signal), s.outcome_id, s.signal) for s in signals]
    conn.executemany(
        "UPDATE owed_signals SET sent_at = ?, error = ?, claimed_until = NULL "
        "WHERE outcome_id = ? AND signal = ? AND sent_at IS NULL",
        params,
    )
    return len(params)


def unsent(conn: Connection, delivery_id: int | None) -> list[OwedSignal]:
    """The signals still owed (claimed or not), oldest outcome first, each outcome's in sending
    order: for one delivery, or all of them."""
    where = "sent_at IS NULL" + ("" if delivery_id is None else " AND delivery_id = ?")
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM owed_signals WHERE {where} "  # noqa: S608
        "ORDER BY outcome_id, position",
        () if delivery_id is None else (delivery_id,),
    ).fetchall()
    return [_signal(row) for row in rows]
