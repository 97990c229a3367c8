"""The ``owed_signals`` table: what the merchant's code is owed, who is sending it, what ran.

A row per (outcome, signal), written in the commit that makes it owed
(:mod:`payhooks.storage.payment_states`), so nothing owed is lost to a crash after the commit.
Sending is claimed first, in a commit of its own or the delivery's: a claim is a lease
(``claimed_until``), taken only when the signal is not sent and no live lease holds it. So two
copies of one delivery, two workers or two hosts never run one outcome's receivers at the same
time, and a process that dies holding a claim leaves the signals to be claimed again once the
lease has passed (at least once, never twice at once).

A signal is owed until every receiver returned. A round in which one raised leaves it owed with
its ``attempts``, its ``error`` and the time its next round is due (``next_attempt_at``), or
parked (``parked_at``): then only a person's re-run claims it. The runs of such rounds are rows
of ``signal_runs``, so a retry runs only the receivers that have not returned.

A payment's signals keep their order: no signal of an outcome is claimed while an earlier
outcome of the same payment has a signal owed after a raise (waiting or parked).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from payhooks.storage.rows import OwedSignal
from payhooks.storage.signal_rows import FailingSignal, SignalRound, SignalRun
from payhooks.storage.signal_rules import SIGNAL_ORDER
from payhooks.storage.sql import Connection
from payhooks.storage.times import from_text, to_text

__all__ = [
    "Selection",
    "claim",
    "claimable",
    "dismiss",
    "failing",
    "failing_counts",
    "finish",
    "owe",
    "receiver_errors",
    "receiver_ids",
    "returned_receivers",
    "runs_of_deliveries",
    "unsent",
]

_POSITION: Final = {name: position for position, name in enumerate(SIGNAL_ORDER)}

_OWE = """
    INSERT INTO owed_signals (outcome_id, delivery_id, signal, position, reconciliation, owed_at)
    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (outcome_id, signal) DO NOTHING"""

_COLUMNS = (
    "s.outcome_id, s.delivery_id, s.signal, s.position, s.reconciliation, s.owed_at, s.sent_at, "
    "s.id, s.attempts, s.next_attempt_at, s.parked_at, s.error, s.claimed_until"
)
#: One delivery's signals, through the unique (outcome_id, signal) index: the delivery that
#: recorded an outcome is the one its signals name, and no index holds delivery_id (the
#: receiver would pay for it on every delivery).
_OF_DELIVERY = (
    "s.outcome_id = (SELECT outcome_id FROM deliveries WHERE id = ?) AND s.delivery_id = ?"
)
_RETURNING = _COLUMNS.replace("s.", "")
_FREE = "s.sent_at IS NULL AND (s.claimed_until IS NULL OR s.claimed_until <= ?)"
# No signal of the outcome is held by a live claim: one outcome, one sender at a time, even when
# a later change owed it one more signal (a registration's payment-succeeded).
_NONE_HELD = (
    "NOT EXISTS (SELECT 1 FROM owed_signals AS held WHERE held.outcome_id = s.outcome_id "
    "AND held.sent_at IS NULL AND held.claimed_until > ?)"
)
# An earlier outcome of the same payment owes a signal one of whose receivers raised: this
# outcome waits until a person or a retry has dealt with it. A signal merely in flight does not
# hold the next back (two outcomes arriving together are sent as they come).
_NOT_BLOCKED = (
    "NOT EXISTS (SELECT 1 FROM outcomes AS mine JOIN outcomes AS earlier "
    "ON earlier.external_identifier = mine.external_identifier AND earlier.id < mine.id "
    "JOIN owed_signals AS e ON e.outcome_id = earlier.id "
    "WHERE mine.id = s.outcome_id AND e.sent_at IS NULL AND e.attempts > 0)"
)


@dataclass(frozen=True, slots=True)
class Selection:
    """Which owed signals a claim may take, beyond those free and not held back.

    By default only what is due: never claimed, or a lease passed, or a retry whose backoff is
    over. ``waiting`` adds those still in their backoff, ``parked`` the parked ones;
    ``tried_before`` leaves out what had a round since then (one command claims each once).
    """

    waiting: bool = False
    parked: bool = False
    delivery_id: int | None = None
    identifier: str | None = None
    tried_before: str | None = None

    def where(self, now: str) -> tuple[str, list[Any]]:
        """The clauses and their parameters."""
        clauses, params = [_FREE, _NONE_HELD, _NOT_BLOCKED], list[Any]([now, now])
        if not self.waiting:
            clauses.append("(s.next_attempt_at IS NULL OR s.next_attempt_at <= ?)")
            params.append(now)
        if not self.parked:
            clauses.append("s.parked_at IS NULL")
        if self.tried_before is not None:
            clauses.append("(s.attempted_at IS NULL OR s.attempted_at < ?)")
            params.append(self.tried_before)
        _narrow(clauses, params, self.delivery_id, self.identifier)
        return " AND ".join(clauses), params


def _narrow(
    clauses: list[str], params: list[Any], delivery_id: int | None, identifier: str | None
) -> None:
    """Add the clauses that keep one delivery's signals, or one payment's, when named."""
    if delivery_id is not None:
        clauses.append(_OF_DELIVERY)
        params.extend((delivery_id, delivery_id))
    if identifier is not None:
        clauses.append("s.outcome_id IN (SELECT id FROM outcomes WHERE external_identifier = ?)")
        params.append(identifier)


DUE: Final = Selection()


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


def _signal(row: Sequence[Any]) -> OwedSignal:
    return OwedSignal(*row)


def claim(
    conn: Connection,
    outcome_ids: Iterable[int],
    *,
    now: str,
    until: str,
    selection: Selection = DUE,
) -> list[OwedSignal]:
    """Claim the owed signals of these outcomes that ``selection`` allows, until ``until``;
    what was claimed, by outcome then sending order. A signal another sender holds, or one an
    earlier outcome of its payment holds back, is not returned."""
    where, params = selection.where(now)
    sql = (
        f"UPDATE owed_signals AS s SET claimed_until = ? WHERE s.outcome_id = ? AND {where} "  # noqa: S608
        f"RETURNING {_RETURNING}"
    )
    claimed: list[OwedSignal] = []
    for outcome_id in sorted(set(outcome_ids)):
        rows = conn.execute(sql, (until, outcome_id, *params)).fetchall()
        claimed.extend(sorted(map(_signal, rows), key=lambda s: s.position))
    return claimed


def claimable(conn: Connection, *, now: str, limit: int, selection: Selection = DUE) -> list[int]:
    """Up to ``limit`` outcomes, oldest first, with owed signals ``selection`` lets a sender
    claim: nobody was there to send them (a registration owed them), a sender died holding them
    past its lease, or a retry is due."""
    where, params = selection.where(now)
    rows = conn.execute(
        f"SELECT DISTINCT s.outcome_id FROM owed_signals AS s WHERE {where} "  # noqa: S608
        "ORDER BY s.outcome_id LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [row[0] for row in rows]


def returned_receivers(conn: Connection, signal_ids: Iterable[int]) -> dict[int, set[str]]:
    """The receivers that have returned for each of these signals (by ``owed_signals.id``)."""
    found: dict[int, set[str]] = {}
    for signal_id in sorted(set(signal_ids)):
        rows = conn.execute(
            "SELECT DISTINCT receiver FROM signal_runs WHERE owed_signal_id = ? AND error IS NULL",
            (signal_id,),
        ).fetchall()
        found[signal_id] = {row[0] for row in rows}
    return found


def _joined_errors(round_: SignalRound) -> str | None:
    errors = [f"{run.receiver}: {run.error}" for run in round_.runs if run.error is not None]
    return "\n".join(errors) if errors else None


#: The row is still owed and still held by the lease the round's sender took.
_HELD_BY_US = "id = ? AND sent_at IS NULL AND claimed_until = ?"
_SENT_CLEAN = (
    "UPDATE owed_signals SET sent_at = ?, attempts = attempts + 1, ran = ?, "  # noqa: S608
    f"claimed_until = NULL WHERE {_HELD_BY_US}"
)
_SENT_AFTER_RETRY = (
    "UPDATE owed_signals SET sent_at = ?, attempts = attempts + 1, attempted_at = ?, "  # noqa: S608
    f"next_attempt_at = NULL, parked_at = NULL, claimed_until = NULL WHERE {_HELD_BY_US}"
)
_RAISED = (
    "UPDATE owed_signals SET attempts = attempts + 1, attempted_at = ?, error = ?, "  # noqa: S608
    f"next_attempt_at = ?, parked_at = ?, claimed_until = NULL WHERE {_HELD_BY_US}"
)


def receiver_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """The numbers of these receiver names in ``signal_receivers``, numbering new ones (a
    read each, an insert only the first time a name is seen)."""
    found: dict[str, int] = {}
    for name in sorted(set(names)):
        row = conn.execute("SELECT id FROM signal_receivers WHERE name = ?", (name,)).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO signal_receivers (name) VALUES (?) ON CONFLICT (name) DO NOTHING",
                (name,),
            )
            row = conn.execute("SELECT id FROM signal_receivers WHERE name = ?", (name,)).fetchone()
        found[name] = row[0]
    return found


def finish(conn: Connection, rounds: Iterable[SignalRound], now: str) -> list[SignalRound]:
    """Record each claimed signal's round; the rounds that were recorded (a round of a signal
    already sent by someone else is not).

    A clean first round (every receiver returned at the first attempt) is kept on the signal's
    row alone, in a few bytes (``ran``: each receiver's number and milliseconds; its time is
    ``sent_at``): the common case writes what marking it sent always did. Any other round's
    runs go to ``signal_runs``. A round that raised leaves the signal owed until ``retry_at``,
    or parked. Each is recorded only while the round's sender still holds the signal's lease
    (its ``claimed_until``): a sender whose lease passed, so that another may be running the
    signal now, records nothing.
    """
    recorded = []
    for round_ in rounds:
        signal, started = round_.signal, to_text(round_.started_at)
        if round_.returned and signal.attempts == 0:
            ids = receiver_ids(conn, (run.receiver for run in round_.runs))
            ran = " ".join(f"{ids[run.receiver]}:{run.duration_ms}" for run in round_.runs) or None
            changed = conn.execute(
                _SENT_CLEAN,
                (now, ran, signal.id, signal.claimed_until),
            ).rowcount
        else:
            conn.executemany(
                "INSERT INTO signal_runs (owed_signal_id, receiver, started_at, duration_ms, "
                "error) VALUES (?, ?, ?, ?, ?)",
                [
                    (signal.id, run.receiver, to_text(run.started_at), run.duration_ms, run.error)
                    for run in round_.runs
                ],
            )
            if round_.returned:
                changed = conn.execute(
                    _SENT_AFTER_RETRY,
                    (now, started, signal.id, signal.claimed_until),
                ).rowcount
            else:
                retry = None if round_.retry_at is None else to_text(round_.retry_at)
                changed = conn.execute(
                    _RAISED,
                    (
                        started,
                        _joined_errors(round_),
                        retry,
                        now if retry is None else None,
                        signal.id,
                        signal.claimed_until,
                    ),
                ).rowcount
        if changed:
            recorded.append(round_)
    return recorded


_FAILING_COLUMNS = f"{_COLUMNS}, o.external_identifier, s.attempted_at"


def _failing(row: Sequence[Any]) -> FailingSignal:
    return FailingSignal(
        signal=_signal(row[:13]), external_identifier=row[13], attempted_at=from_text(row[14])
    )


def failing(
    conn: Connection,
    *,
    limit: int,
    delivery_id: int | None = None,
    identifier: str | None = None,
) -> list[FailingSignal]:
    """Signals still owed after a receiver raised, parked first, then by their next round,
    through the partial index ``owed_signals_failing`` (only such rows are in it)."""
    clauses, params = ["s.sent_at IS NULL", "s.attempts > 0"], list[Any]()
    _narrow(clauses, params, delivery_id, identifier)
    rows = conn.execute(
        f"SELECT {_FAILING_COLUMNS} FROM owed_signals AS s "  # noqa: S608 - constants only
        "JOIN outcomes AS o ON o.id = s.outcome_id "
        f"WHERE {' AND '.join(clauses)} "
        "ORDER BY s.parked_at IS NULL, s.parked_at, s.next_attempt_at, s.id LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [_failing(row) for row in rows]


def _clean_runs(conn: Connection, ran: str) -> list[tuple[str, int]]:
    """A clean first round's ``ran`` as (receiver name, milliseconds) pairs."""
    pairs = [tuple(int(part) for part in item.split(":")) for item in ran.split()]
    names = {}
    for receiver_id, _ in pairs:
        found = conn.execute(
            "SELECT name FROM signal_receivers WHERE id = ?", (receiver_id,)
        ).fetchone()
        names[receiver_id] = f"receiver #{receiver_id}" if found is None else found[0]
    return [(names[receiver_id], ms) for receiver_id, ms in pairs]


def failing_counts(conn: Connection) -> tuple[int, int]:
    """How many signals are owed after a raise, and how many of them are parked (through the
    partial index ``owed_signals_failing``)."""
    failing, parked = conn.execute(
        "SELECT count(*), sum(CASE WHEN parked_at IS NOT NULL THEN 1 ELSE 0 END) "
        "FROM owed_signals WHERE sent_at IS NULL AND attempts > 0"
    ).fetchone()
    return failing, parked or 0


def runs_of_deliveries(conn: Connection, delivery_ids: Sequence[int]) -> list[SignalRun]:
    """Every receiver run recorded for the signals these deliveries owed, oldest first: a
    clean first round from the signal's row (timed by its ``sent_at``), any other from
    ``signal_runs``."""
    found: list[SignalRun] = []
    for delivery_id in sorted(set(delivery_ids)):
        signals = conn.execute(
            "SELECT s.id, s.outcome_id, s.signal, s.sent_at, s.ran FROM owed_signals AS s "  # noqa: S608
            f"WHERE {_OF_DELIVERY} ORDER BY s.outcome_id, s.position",
            (delivery_id, delivery_id),
        ).fetchall()
        for signal_id, outcome_id, name, sent_at, ran in signals:
            if ran and sent_at is not None:
                sent = from_text(sent_at)
                found.extend(
                    SignalRun(outcome_id, delivery_id, name, receiver, sent, ms, None)
                    for receiver, ms in _clean_runs(conn, ran)
                )
            for receiver, started_at, ms, error in conn.execute(
                "SELECT receiver, started_at, duration_ms, error FROM signal_runs "
                "WHERE owed_signal_id = ? ORDER BY id",
                (signal_id,),
            ).fetchall():
                found.append(
                    SignalRun(
                        outcome_id, delivery_id, name, receiver, from_text(started_at), ms, error
                    )
                )
    return sorted(found, key=lambda run: (run.started_at, run.outcome_id))


def dismiss(conn: Connection, signal_id: int, now: str) -> OwedSignal | None:
    """Mark an owed signal handled without running it (a person decided; its receivers will
    never run for it), unless a sender holds it now; the row as it was, or None."""
    row = conn.execute(
        f"UPDATE owed_signals AS s SET sent_at = ?, dismissed_at = ?, claimed_until = NULL "  # noqa: S608
        f"WHERE s.id = ? AND {_FREE} RETURNING {_RETURNING}",
        (now, now, signal_id, now),
    ).fetchone()
    return None if row is None else _signal(row)


def receiver_errors(conn: Connection) -> list[tuple[str, str, int]]:
    """Every receiver run that raised, counted by signal and receiver (through the partial
    index ``signal_runs_errors``, which holds them alone)."""
    rows = conn.execute(
        "SELECT s.signal, r.receiver, count(*) FROM signal_runs AS r "
        "JOIN owed_signals AS s ON s.id = r.owed_signal_id WHERE r.error IS NOT NULL "
        "GROUP BY s.signal, r.receiver ORDER BY s.signal, r.receiver"
    ).fetchall()
    return [(signal, receiver, count) for signal, receiver, count in rows]


def unsent(
    conn: Connection, delivery_id: int | None, identifier: str | None = None
) -> list[OwedSignal]:
    """The signals still owed (claimed or not, waiting or parked), oldest outcome first, each
    outcome's in sending order: for one delivery, one payment, or all of them."""
    clauses, params = ["s.sent_at IS NULL"], list[Any]()
    _narrow(clauses, params, delivery_id, identifier)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM owed_signals AS s WHERE {' AND '.join(clauses)} "  # noqa: S608
        "ORDER BY s.outcome_id, s.position",
        params,
    ).fetchall()
    return [_signal(row) for row in rows]
