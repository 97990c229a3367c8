"""The ledger's vital figures: is it receiving, is it failing, is anything owed or adrift.

One read (:func:`read_vitals`, ``Ledger.vitals``) for the console's health strip, ``payhooks
check`` and the metrics: a few small queries in one connection, each bounded so that the cost
follows the last day's traffic, never the size of the ledger.

A window's deliveries, its failures and its refused requests are read through the index on
``received_at`` each table has (``deliveries_received``, ``rejected_deliveries_received``,
shared with the delivery log): exact at the window's edge, whatever order rows were stored in,
and as cheap as the window is small. Refused requests kept (``max_rejected`` bounds them) are
also counted whole by refusal code. The mismatch counts read the partial index
``payment_states_mismatches``, which holds the mismatched rows alone, and the ``sync_drift``
view's rows are found through ``service_transactions_drift`` and ``payment_states_drift``,
which hold only the rows with drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

import payhooks.storage.owed_signals as owed_signals
import payhooks.storage.service_transactions as service_transactions
from payhooks.storage.records import MISMATCH_STATES, ReconciliationState
from payhooks.storage.rows import FINISHED_DELIVERY_STATUSES, DeliveryStatus
from payhooks.storage.service_records import sync_run_from_row
from payhooks.storage.sql import Connection
from payhooks.storage.sync_rows import DriftKind, SyncRun
from payhooks.storage.times import from_text, to_text

if TYPE_CHECKING:
    from payhooks.storage.reads.rollup import Rollup

__all__ = [
    "ACCEPTED_DELIVERY_STATUSES",
    "FAILED_DELIVERY_STATUSES",
    "ErrorCause",
    "Vitals",
    "WindowCounts",
    "read_vitals",
]

#: A delivery stored with one of these failed: its body was no notification, it said something
#: else than the outcome already stored, or processing failed on our side. (``received``, not
#: processed yet, is neither failed nor accepted.)
FAILED_DELIVERY_STATUSES: Final = frozenset(
    {
        DeliveryStatus.MALFORMED_JSON,
        DeliveryStatus.INVALID_PAYLOAD,
        DeliveryStatus.PROCESSING_ERROR,
        DeliveryStatus.CONFLICTING_OUTCOME,
    }
)

#: A delivery stored with one of these was accepted: its outcome is in the ledger.
ACCEPTED_DELIVERY_STATUSES: Final = frozenset({DeliveryStatus.PROCESSED, DeliveryStatus.DUPLICATE})

#: The two windows the figures are counted over.
HOUR: Final = timedelta(hours=1)
DAY: Final = timedelta(hours=24)

_FAILED = ", ".join(f"'{status.value}'" for status in sorted(FAILED_DELIVERY_STATUSES))
_ACCEPTED = ", ".join(f"'{status.value}'" for status in sorted(ACCEPTED_DELIVERY_STATUSES))
_ACCEPTED_VALUES = frozenset(status.value for status in ACCEPTED_DELIVERY_STATUSES)
_FINISHED = ", ".join(f"'{status.value}'" for status in sorted(FINISHED_DELIVERY_STATUSES))
_MISMATCHES = ", ".join(f"'{state.value}'" for state in sorted(MISMATCH_STATES))
_RECEIVED: Final = "deliveries.received_at"


@dataclass(frozen=True, slots=True)
class WindowCounts:
    """What arrived in one window: deliveries stored, those that failed, requests refused."""

    #: Deliveries stored (each once, however many attempts it took).
    deliveries: int
    #: Of those, the ones stored with a status of :data:`FAILED_DELIVERY_STATUSES`.
    failures: int
    #: Requests refused before they were stored (a signature that did not hold), counted apart:
    #: they are not deliveries, and anyone can send them.
    refused: int

    @property
    def failure_percent(self) -> Decimal | None:
        """Failures as a percentage of deliveries, to one decimal; None when none arrived."""
        if self.deliveries == 0:
            return None
        return (Decimal(self.failures * 100) / self.deliveries).quantize(Decimal("0.1"))


@dataclass(frozen=True, slots=True)
class ErrorCause:
    """One cause of errors in the last 24 hours and how many it caused."""

    #: ``"delivery"`` (a delivery stored with a failing status), ``"refused"`` (a refused
    #: request) or ``"receiver"`` (a run of the merchant's receiver that raised).
    origin: str
    #: The failing status (``invalid_payload``...), the refusal's code
    #: (``invalid_signature``...) or the signal whose receiver raised (``payment-succeeded``).
    code: str
    count: int


@dataclass(frozen=True, slots=True)
class Vitals:
    """The ledger's vital figures at :attr:`now` (``Ledger.vitals``)."""

    #: The time the figures are counted back from.
    now: datetime
    #: The newest stored delivery's ``received_at``, whatever became of it; None: never.
    last_delivery_at: datetime | None
    #: The newest accepted delivery's (:data:`ACCEPTED_DELIVERY_STATUSES`); None: never.
    last_accepted_at: datetime | None
    #: The newest finished delivery's (:data:`~payhooks.storage.FINISHED_DELIVERY_STATUSES`:
    #: accepted, or a conflicting outcome; each answered 200, so the service stopped sending
    #: it); None: never. The metrics' last accepted delivery: proof the service still reaches
    #: us, whatever the delivery said.
    last_finished_at: datetime | None
    #: Since ``now`` less one hour, and less 24 hours.
    last_hour: WindowCounts
    last_day: WindowCounts
    #: The last 24 hours' errors by cause, the most frequent first.
    errors: tuple[ErrorCause, ...]
    #: Signals owed to the merchant's code and not sent (waiting for a retry and parked ones
    #: too), and when the oldest became owed.
    unsent_signals: int
    oldest_unsent_at: datetime | None
    #: The newest sync run (started, finished, status...), None before the first.
    last_sync: SyncRun | None
    #: When the newest complete sync run finished; None when none has completed.
    last_complete_sync_at: datetime | None
    #: The ``sync_drift`` view's rows of each kind, as of now (kinds with none left out).
    drift: dict[DriftKind, int] = field(default_factory=dict)
    #: Payments in each of :data:`~payhooks.storage.MISMATCH_STATES` (every one, zeros too).
    mismatches: dict[ReconciliationState, int] = field(default_factory=dict)
    #: Of those, the ones whose reconciliation row changed within the mismatch window.
    recent_mismatches: int = 0
    #: The mismatch window ``recent_mismatches`` counts over.
    mismatch_window: timedelta = DAY
    #: Signals still owed after a receiver raised: all of them, and the parked ones.
    failing_signals: int = 0
    parked_signals: int = 0
    #: The first raise of the oldest of those (a receiver has kept failing since); None when
    #: none is owed after a raise.
    oldest_failing_at: datetime | None = None
    #: Receiver runs that raised in the last 24 hours.
    receiver_errors: int = 0
    #: Every refused request the ledger keeps, whatever its age, by refusal code (the table
    #: keeps the newest ``max_rejected``, and ``payhooks prune`` empties it of old ones): with
    #: no delivery ever accepted, the sign of a wrong key (the ``refusals`` check).
    refused_by_code: dict[str, int] = field(default_factory=dict)
    #: When the oldest change not yet in finance's rollup happened (its lag); None: up to date,
    #: or never built (finance then reads its rows).
    rollup_waiting_since: datetime | None = None
    #: When the newest refused request kept arrived; None: none kept.
    last_refused_at: datetime | None = None
    #: Whether finance's rollup has been built (the finance page or ``payhooks rollup`` builds
    #: it): a lag of zero says nothing before it is.
    rollup_built: bool = False

    @property
    def rollup_lag(self) -> timedelta:
        """How long the oldest change not yet in finance's rollup has waited (zero: none)."""
        waiting = self.rollup_waiting_since
        return timedelta(0) if waiting is None else max(timedelta(0), self.now - waiting)

    @property
    def mismatch_total(self) -> int:
        """Payments in any mismatch state."""
        return sum(self.mismatches.values())

    @property
    def refused_total(self) -> int:
        """Refused requests kept, of every code."""
        return sum(self.refused_by_code.values())

    @property
    def drift_total(self) -> int:
        """Rows of the ``sync_drift`` view."""
        return sum(self.drift.values())


def _window(conn: Connection, since: str) -> tuple[WindowCounts, list[ErrorCause]]:
    """One window's counts and its errors by cause (each a range of a ``received_at`` index)."""
    (deliveries,) = conn.execute(
        "SELECT count(*) FROM deliveries WHERE received_at >= ?", (since,)
    ).fetchone()
    failed = conn.execute(
        "SELECT status, count(*) FROM deliveries "  # noqa: S608 - constants only
        f"WHERE status IN ({_FAILED}) AND received_at >= ? GROUP BY status",
        (since,),
    ).fetchall()
    refused = conn.execute(
        "SELECT reason, count(*) FROM rejected_deliveries WHERE received_at >= ? GROUP BY reason",
        (since,),
    ).fetchall()
    causes = [ErrorCause("delivery", code, count) for code, count in failed]
    causes += [ErrorCause("refused", code, count) for code, count in refused]
    counts = WindowCounts(
        deliveries=deliveries,
        failures=sum(count for _, count in failed),
        refused=sum(count for _, count in refused),
    )
    return counts, causes


def _time(value: Any, column: str) -> datetime | None:
    """A stored time, or None; :class:`~payhooks.storage.UnreadableRowError` naming
    ``column`` when it is not one payhooks wrote."""
    return None if value is None else from_text(value, column=column)


def _last_finished_and_accepted(conn: Connection) -> tuple[str | None, str | None]:
    """When the newest finished delivery and the newest accepted one arrived (as stored).

    Accepted statuses are finished ones, so the newest finished delivery is nearly always the
    newest accepted one too: the second query runs only when it was a conflicting outcome.
    Each walks back from the newest id and stops at the first match.
    """
    finished = conn.execute(
        f"SELECT received_at, status FROM deliveries WHERE status IN ({_FINISHED}) "  # noqa: S608
        "ORDER BY id DESC LIMIT 1"
    ).fetchone()
    if finished is None:
        return None, None
    if finished[1] in _ACCEPTED_VALUES:
        return finished[0], finished[0]
    accepted = conn.execute(
        f"SELECT received_at FROM deliveries WHERE status IN ({_ACCEPTED}) "  # noqa: S608
        "ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return finished[0], None if accepted is None else accepted[0]


def read_vitals(
    conn: Connection, now: datetime, mismatch_window: timedelta = DAY, rollup: Rollup | None = None
) -> Vitals:
    """The figures at ``now``, read in ``conn`` (one read; each query bounded, see above); with
    ``rollup`` (the ledger's, kept in ``PAYHOOKS_TIMEZONE``), how long its changes have waited."""
    last_hour, _ = _window(conn, to_text(now - HOUR, argument="now"))
    last_day, causes = _window(conn, to_text(now - DAY, argument="now"))
    last = conn.execute("SELECT received_at FROM deliveries ORDER BY id DESC LIMIT 1").fetchone()
    finished, accepted = _last_finished_and_accepted(conn)
    unsent, oldest = conn.execute(
        "SELECT count(*), min(owed_at) FROM owed_signals WHERE sent_at IS NULL"
    ).fetchone()
    # Through owed_signals_failing and signal_runs_errors: only such rows are in them.
    failing, parked = owed_signals.failing_counts(conn)
    # Since when a receiver has kept raising: the first raise of a signal still owed.
    (oldest_failing,) = conn.execute(
        "SELECT min(r.started_at) FROM owed_signals AS s "
        "JOIN signal_runs AS r ON r.owed_signal_id = s.id "
        "WHERE s.sent_at IS NULL AND s.attempts > 0 AND r.error IS NOT NULL"
    ).fetchone()
    since = to_text(now - DAY, argument="now")
    receiver_causes = [
        ErrorCause("receiver", signal, count)
        for signal, count in conn.execute(
            "SELECT s.signal, count(*) FROM signal_runs AS r "
            "JOIN owed_signals AS s ON s.id = r.owed_signal_id "
            "WHERE r.error IS NOT NULL AND r.started_at >= ? GROUP BY s.signal",
            (since,),
        )
    ]
    causes += receiver_causes
    (complete,) = conn.execute(
        "SELECT max(finished_at) FROM sync_runs WHERE status = 'complete'"
    ).fetchone()
    drift = {
        DriftKind(kind): count
        for kind, count in conn.execute("SELECT kind, count(*) FROM sync_drift GROUP BY kind")
    }
    mismatches = dict.fromkeys(sorted(MISMATCH_STATES), 0)
    recent = 0
    changed_since = to_text(now - mismatch_window, argument="now")
    for state, count, changed in conn.execute(
        "SELECT state, count(*), "  # noqa: S608 - constants only
        "sum(CASE WHEN updated_at >= ? THEN 1 ELSE 0 END) "
        f"FROM payment_states WHERE state IN ({_MISMATCHES}) GROUP BY state",
        (changed_since,),
    ):
        mismatches[ReconciliationState(state)] = count
        recent += changed
    refusals = conn.execute(
        "SELECT reason, count(*), max(received_at) FROM rejected_deliveries GROUP BY reason"
    ).fetchall()
    return Vitals(
        now=now,
        last_delivery_at=None if last is None else _time(last[0], _RECEIVED),
        last_accepted_at=_time(accepted, _RECEIVED),
        last_finished_at=_time(finished, _RECEIVED),
        last_hour=last_hour,
        last_day=last_day,
        errors=tuple(sorted(causes, key=lambda cause: (-cause.count, cause.origin, cause.code))),
        unsent_signals=unsent,
        oldest_unsent_at=_time(oldest, "owed_signals.owed_at"),
        last_sync=sync_run_from_row(service_transactions.latest_run(conn)),
        last_complete_sync_at=_time(complete, "sync_runs.finished_at"),
        drift=drift,
        mismatches=mismatches,
        recent_mismatches=recent,
        mismatch_window=mismatch_window,
        failing_signals=failing,
        parked_signals=parked,
        oldest_failing_at=_time(oldest_failing, "signal_runs.started_at"),
        receiver_errors=sum(cause.count for cause in receiver_causes),
        rollup_waiting_since=None if rollup is None else rollup.waiting_since(conn),
        rollup_built=conn.execute("SELECT 1 FROM finance_rollup_state").fetchone() is not None,
        refused_by_code={code: count for code, count, _ in refusals},
        last_refused_at=_time(
            max((last for _, _, last in refusals), default=None), "rejected_deliveries.received_at"
        ),
    )
