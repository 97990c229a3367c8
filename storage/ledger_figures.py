"""The ledger's figures for monitoring, read in one short read: what a scrape of the metrics
endpoint shows beside the receiver's own counters.

They are read from the tables when asked (a scrape every 15 seconds or so), never counted per
delivery, so they are right whichever process or command wrote the rows and cost the receiver
nothing. Each query is one of a handful of small ones: the unsent signals through their partial
index, the newest accepted delivery from the end of the table, the sync runs (a few rows a day),
the ``sync_drift`` view, and the mismatched payments' states.

Another change is adding ``Ledger.vitals(now)`` with the same figures; until it lands, these
reads are the metrics' own, kept in this one module so that they can be pointed at it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from payhooks.storage.ledger import Ledger
from payhooks.storage.records import MISMATCH_STATES
from payhooks.storage.rows import FINISHED_DELIVERY_STATUSES
from payhooks.storage.sql import Connection
from payhooks.storage.sync_rows import DriftKind
from payhooks.storage.times import from_text

__all__ = ["LedgerFigures", "read_ledger_figures"]

_MISMATCHES = tuple(sorted(state.value for state in MISMATCH_STATES))
_ACCEPTED = tuple(sorted(status.value for status in FINISHED_DELIVERY_STATUSES))


@dataclass(frozen=True, slots=True)
class LedgerFigures:
    """What the ledger holds that an operator watches, as of one read."""

    #: Signals owed and not yet sent (claimed or not).
    owed_signals: int
    #: When the oldest of them was owed; None when none is.
    oldest_owed_at: datetime | None
    #: When the newest delivery that was accepted (processed, duplicate or conflicting
    #: outcome) arrived; None before the first.
    last_accepted_at: datetime | None
    #: When the last complete ``payhooks sync`` finished; None before the first.
    last_sync_at: datetime | None
    #: Rows of the ``sync_drift`` view by kind, every :class:`DriftKind` present (zero or not).
    drift: Mapping[str, int]
    #: Payments in each mismatch state (:data:`MISMATCH_STATES`), every state present.
    mismatches: Mapping[str, int]


def read_ledger_figures(ledger: Ledger) -> LedgerFigures:
    """The figures as committed now (each query sees what is committed when it runs)."""
    with ledger._read() as conn:
        return _read(conn)


def _time(text: str | None) -> datetime | None:
    return None if text is None else from_text(text)


def _counts(rows: list[tuple[str, int]], names: tuple[str, ...]) -> Mapping[str, int]:
    counts = dict.fromkeys(names, 0)
    for name, count in rows:
        counts[name] = int(count)
    return MappingProxyType(counts)


def _read(conn: Connection) -> LedgerFigures:
    owed, oldest = conn.execute(
        "SELECT COUNT(*), MIN(owed_at) FROM owed_signals WHERE sent_at IS NULL"
    ).fetchone()
    accepted = conn.execute(
        "SELECT received_at FROM deliveries WHERE status IN (?, ?, ?) ORDER BY id DESC LIMIT 1",
        _ACCEPTED,
    ).fetchone()
    (last_sync,) = conn.execute(
        "SELECT MAX(finished_at) FROM sync_runs WHERE status = 'complete'"
    ).fetchone()
    drift = conn.execute("SELECT kind, COUNT(*) FROM sync_drift GROUP BY kind").fetchall()
    placeholders = ", ".join("?" * len(_MISMATCHES))
    mismatches = conn.execute(
        f"SELECT state, COUNT(*) FROM payment_states WHERE state IN ({placeholders}) "  # noqa: S608 - placeholders only
        "GROUP BY state",
        _MISMATCHES,
    ).fetchall()
    return LedgerFigures(
        owed_signals=int(owed),
        oldest_owed_at=_time(oldest),
        last_accepted_at=None if accepted is None else _time(accepted[0]),
        last_sync_at=_time(last_sync),
        drift=_counts(drift, tuple(kind.value for kind in DriftKind)),
        mismatches=_counts(mismatches, _MISMATCHES),
    )
