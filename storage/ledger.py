"""The ledger: expected payments, deliveries, outcomes and returns, behind one face.

:class:`Ledger` checks arguments (:mod:`~payhooks.storage.checks`) and delegates: the engine
(:mod:`~payhooks.storage.engines`) opens the database and makes every write; each table's SQL
lives with that table's functions. Idempotency comes from unique keys, never read-then-write.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlite_utils import Database

import payhooks.storage.deliveries as deliveries
import payhooks.storage.outcomes as outcomes
import payhooks.storage.payment_states as payment_states
import payhooks.storage.payments as payments
import payhooks.storage.reconciliation as reconciliation
import payhooks.storage.rejected_deliveries as rejected_deliveries
import payhooks.storage.returns as returns
from payhooks.storage.checks import (
    SYNCHRONOUS_MODES,
    check_amount,
    check_delivery,
    check_options,
    enum_member,
    markable_status,
    payment_values,
)
from payhooks.storage.engines import Engine, open_engine
from payhooks.storage.errors import ConflictError, UnknownDeliveryError
from payhooks.storage.limits import DEFAULT_MAX_REJECTED, DEFAULT_MAX_RETURNS
from payhooks.storage.records import Outcome, ReconciliationState
from payhooks.storage.rows import (
    Delivery,
    DeliveryStatus,
    PaymentKind,
    ReconciliationRow,
    RecordedOutcome,
    ReturnKind,
    SummaryRow,
)
from payhooks.storage.service_records import ServiceRecords
from payhooks.storage.signal_book import SignalBook
from payhooks.storage.times import Clock, system_clock, to_text

__all__ = ["DEFAULT_MAX_REJECTED", "DEFAULT_MAX_RETURNS", "SYNCHRONOUS_MODES", "Ledger"]


class Ledger:
    """The ledger (docs/reconciliation.md, docs/deployment.md), on SQLite or PostgreSQL; the
    signals owed are :attr:`signals`, the service's side (creation failures, the sync's
    records) :attr:`service`.

    Every write that changes what a payment's state depends on (a registration, an outcome, a
    refused delivery, a listed transaction) stores the payment's new reconciliation row and the
    signals it owes in the same transaction (:mod:`payhooks.storage.payment_states`).

    :param path_or_database: a file path (opened and owned: :meth:`close` closes it), or a
        ``sqlite_utils.Database`` the caller owns and closes (when it is already inside a
        transaction, the ledger's writes join it as savepoints), or a ``postgresql://`` URL
        (docs/postgresql.md: the process's pool, no migration on open).
    :param busy_timeout_ms: how long a write waits for another writer's lock before it gives
        up with :class:`~payhooks.storage.StorageUnavailableError`.
    :param max_rejected: how many rejected deliveries to keep (the newest); bounds the table
        however many forged requests arrive.
    :param max_returns: how many customer returns to keep per ``external_identifier`` (the
        newest): anyone holding a valid return URL can visit it as often as they like, for as
        long as its token lives.
    :param clock: returns the current aware time; for tests. Defaults to the system's, in UTC.
    :param synchronous: ``"FULL"`` (the default) or ``"NORMAL"``: the price of each is
        :data:`SYNCHRONOUS_MODES`'s; how ``FULL`` syncs, :mod:`payhooks.storage.sqlite.wal_sync`.
        A caller's database opened inside a transaction keeps its own setting.
    :param write_lock: take the file's :class:`~payhooks.storage.sqlite.WriteLock`
        (``<file>.lock``) before each write, so a waiting writer wakes as soon as the other
        commits; without it (or without ``fcntl``, or in memory) SQLite's busy handler alone.
    :param check_same_thread: ``sqlite3``'s guard; False lets another thread close the file.
    :param create: False to open only an existing SQLite ledger: any other file is refused with
        :class:`~payhooks.storage.NotALedgerError`, untouched.

    Opening migrates a SQLite file forward when it is behind; a PostgreSQL database behind is
    refused with :class:`~payhooks.storage.StorageUnavailableError` until ``payhooks migrate``.
    Every driver error is raised as a :class:`~payhooks.storage.StorageError`. A SQLite ledger
    holds one connection: use one per thread. Several processes may open one file at once.
    """

    def __init__(
        self,
        path_or_database: str | os.PathLike[str] | Database,
        *,
        busy_timeout_ms: int = 5000,
        max_rejected: int = DEFAULT_MAX_REJECTED,
        max_returns: int = DEFAULT_MAX_RETURNS,
        clock: Clock | None = None,
        synchronous: str = "FULL",
        write_lock: bool = True,
        check_same_thread: bool = True,
        create: bool = True,
    ) -> None:
        sync_mode = check_options(busy_timeout_ms, max_rejected, max_returns, synchronous)
        #: ``"FULL"`` or ``"NORMAL"``: how durable each write is when it returns.
        self.synchronous: str = sync_mode
        self._max_rejected = max_rejected
        self._max_returns = max_returns
        self._clock: Clock = clock or system_clock
        self._engine: Engine = open_engine(
            path_or_database,
            busy_timeout_ms=busy_timeout_ms,
            synchronous=sync_mode,
            write_lock=write_lock,
            check_same_thread=check_same_thread,
            create=create,
        )
        #: How many schema migrations the database has (:data:`~payhooks.storage.SCHEMA_VERSION`).
        self.schema_version: int = self._engine.schema_version
        # Every write: a transaction, or a savepoint of the open one (the write protocol).
        self._write = self._engine.writer.write
        self._read = self._engine.read
        #: The signals owed to the merchant's code: listed, claimed, marked sent.
        self.signals = SignalBook(self._read, self._write, self._clock)
        #: What the service says: creation failures, the sync's runs and drift.
        self.service = ServiceRecords(self._engine, self._write, self._clock, self._refresh)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def database(self) -> Database:
        """SQLite's ``sqlite_utils.Database``, for reading, tools and tests (writes through it
        bypass the ledger's checks); an ``AttributeError`` on PostgreSQL."""
        database: Database = self._engine.database
        return database

    @property
    def engine(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._engine.kind

    def close(self) -> None:
        """Close the connection if the ledger opened it (never a PostgreSQL pool, which is the
        process's). Safe to call twice."""
        self._engine.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Ledger {self._engine.name!r}>"

    @contextmanager
    def transaction(self, *, savepoints: bool = True) -> Iterator[Ledger]:
        """Run several of the ledger's writes as one transaction: one lock, one commit.

        The writes made inside the block join it and commit together at its end: one wait for
        the write lock, one sync to disk, and after a crash all of them or none. An exception
        that leaves the block rolls all of them back; each write inside is a savepoint, so one
        that raises undoes only its own part, unless ``savepoints=False`` (the receiver's): then
        none (on PostgreSQL each is two round trips), and after one raises the block ends in a
        rollback. Inside a transaction already open, the block is a savepoint of it.

        :raises StorageUnavailableError: the write lock was not free within the busy timeout,
            or the commit failed; nothing of the block is stored.
        """
        with self._write(savepoints=savepoints):
            yield self

    def _now(self, moment: datetime | None, argument: str) -> str:
        return to_text(self._clock() if moment is None else moment, argument=argument)

    # -- expected payments -----------------------------------------------------------------

    def expect_transaction(
        self,
        external_identifier: str,
        amount_minor: int,
        currency: str,
        *,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Register a one-off payment the merchant expects.

        :returns: True when newly registered; False when the same payment was already (the
            same data again is a no-op).
        :raises ConflictError: it is registered with different data (any of kind, amount,
            currency, plan amount, description, metadata).
        :raises ValueError: an identifier outside 1 to 64 characters, an amount that is not an
            int from 0 to :data:`~payhooks.storage.MAX_AMOUNT_MINOR`, a currency that is not an
            ISO 4217 code with minor units.
        """
        kind = PaymentKind.TRANSACTION
        values = payment_values(
            external_identifier, kind, amount_minor, currency, None, description, metadata
        )
        return self._register(external_identifier, values)

    def expect_subscription(
        self,
        external_identifier: str,
        amount_minor: int,
        currency: str,
        plan_amount_minor: int,
        *,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Register a subscription: the first period costs ``amount_minor``, later ones
        ``plan_amount_minor``. Same return and errors as :meth:`expect_transaction`."""
        kind, plan = PaymentKind.SUBSCRIPTION, check_amount(plan_amount_minor, "plan_amount_minor")
        values = payment_values(
            external_identifier, kind, amount_minor, currency, plan, description, metadata
        )
        return self._register(external_identifier, values)

    def _refresh(
        self, conn: Any, external_identifier: str, now: str, new_outcome_id: int | None = None
    ) -> ReconciliationState | None:
        """Store one payment's row anew and owe what its change owes, in ``conn``'s transaction."""
        lock = self._engine.lock_payment
        row = payment_states.refresh(
            conn, external_identifier, now=now, lock=lock, new_outcome_id=new_outcome_id
        )
        return None if row is None else row.state

    def _register(self, external_identifier: str, values: tuple[Any, ...]) -> bool:
        now = self._now(None, "clock()")
        with self._write() as conn:
            stored = payments.insert(conn, external_identifier, now, values)
            if stored is None:
                self._refresh(conn, external_identifier, now)
        differing = None if stored is None else payments.differing(stored, values)
        if differing:
            raise ConflictError(external_identifier, differing)
        return stored is None

    # -- deliveries ------------------------------------------------------------------------

    def record_delivery(
        self,
        *,
        dedupe_key: str,
        body: bytes,
        headers: Mapping[str, str],
        received_at: datetime | None = None,
        key_names_content: bool = False,
    ) -> Delivery:
        """Store an authenticated delivery, committed at once or with its :meth:`transaction`.

        A new ``dedupe_key`` gives a row ``received`` with ``is_new=True``; a known one with the
        same bytes counts one more attempt and returns the stored row with ``is_new=False``, so
        a retry can finish what the first try began. A known key with *other* bytes (a
        ``webhook-id`` reused) is a delivery of its own, stored under
        ``"<dedupe_key>#<body_sha256>"`` with ``reused_key_of`` naming the first: bytes are
        never answered for by a row holding other bytes, unless ``key_names_content`` (the key
        is a digest of what was signed, which determines the body: the sorted-fields schemes,
        :mod:`payhooks.verify.notification_shape`), when they count an attempt on it.

        :raises StorageError: even the derived key is taken by other bytes (only a sender
            that chooses such ids can cause it); nothing is stored.
        """
        check_delivery(dedupe_key, body)
        now = self._clock()
        arrived = now if received_at is None else received_at
        raw, digest, stored_headers, row = deliveries.to_values(body, headers, arrived, now)
        with self._write() as conn:
            found = deliveries.insert(
                conn, dedupe_key, digest, row, key_names_content=key_names_content
            )
        if isinstance(found, Delivery):
            return found
        return deliveries.new_delivery(
            found, received_at=arrived, headers=stored_headers, body=raw, digest=digest, now=now
        )

    def mark_delivery(
        self,
        delivery_id: int,
        status: DeliveryStatus | str,
        error: str | None = None,
        *,
        external_identifier: str | None = None,
    ) -> bool:
        """Record that a stored delivery could not be processed, and why.

        A delivery that already finished (``processed``, ``duplicate``,
        ``conflicting_outcome``) is left as it is: two copies of one delivery can be in
        flight at once, and the one that fails after the other finished must not turn a
        recorded outcome into an error.

        :param status: ``malformed_json``, ``invalid_payload`` or ``processing_error``.
        :param external_identifier: the payment the refused body names, when it names one: its
            reconciliation row then counts the refusal.
        :returns: True when marked; False when the delivery had already finished.
        :raises UnknownDeliveryError: no such delivery.
        """
        marked = markable_status(status)
        now = self._now(None, "clock()")
        with self._write() as conn:
            if deliveries.mark(conn, delivery_id, marked.value, error, now, external_identifier):
                if external_identifier is not None:
                    self._refresh(conn, external_identifier, now)
                return True
            if deliveries.exists(conn, delivery_id):
                return False
            raise UnknownDeliveryError(delivery_id)

    def delivery(self, delivery_id: int) -> Delivery | None:
        """The stored delivery with this id, or None."""
        with self._read() as conn:
            return deliveries.select(conn, delivery_id)

    def outcome_identifier(self, outcome_id: int) -> str | None:
        """The ``external_identifier`` of the stored outcome ``outcome_id``, or None: the payment
        a finished delivery's redelivery is answered about, without parsing its body again."""
        with self._read() as conn:
            return outcomes.identifier(conn, outcome_id)

    def deliveries(self, status: DeliveryStatus | str | None = None) -> Iterator[Delivery]:
        """Stored deliveries as they arrived, or those with ``status``; streamed (reprocess)."""
        wanted = None if status is None else enum_member(DeliveryStatus, status, "status").value
        return self._engine.stream(
            lambda conn: deliveries.select_all(conn, wanted), deliveries.to_delivery
        )

    def record_rejected(
        self,
        *,
        reason: str,
        body: bytes,
        remote_addr: str | None,
        received_at: datetime | None = None,
    ) -> int:
        """Keep a trace of a delivery that failed verification: its first 4 KiB and why; the
        newest ``max_rejected`` are kept (older ones deleted in the same transaction). Returns
        the new row's id.

        Committed but not synced (the next synced write takes it to disk): a trace that
        acknowledges nothing, which anyone without a key can send, must not cost a sync.
        """
        at = self._now(received_at, "received_at")
        with self._write(durable=False) as conn:
            return rejected_deliveries.insert(
                conn, at, remote_addr, reason, body, keep=self._max_rejected
            )

    # -- outcomes and returns --------------------------------------------------------------

    def record_outcome(self, outcome: Outcome, *, delivery_id: int) -> RecordedOutcome:
        """Record an outcome, mark its delivery and reconcile, all in one transaction.

        The outcome is stored once per (``transaction_id``, ``payment_status``); the delivery
        becomes ``processed`` (again, for ``payhooks reprocess``). When another delivery had
        already recorded it, the stored one stands and this delivery is marked ``duplicate``
        when it says the same (equal ``external_identifier``, ``state``, ``amount_minor``,
        ``currency`` and ``provider_reference``: a resent notification may be stamped anew),
        else ``conflicting_outcome``, its ``error`` naming the fields that differ. The state
        returned is that of the payment the stored outcome names.

        :raises UnknownDeliveryError: ``delivery_id`` is not stored.
        :raises ValueError: an amount outside 0 to :data:`~payhooks.storage.MAX_AMOUNT_MINOR`
            (the parser refuses those first).
        """
        check_amount(outcome.amount_minor, "outcome.amount_minor")
        now = self._now(None, "clock()")
        # Everything is made ready before the write lock is taken, so it is held only for SQL.
        values = outcomes.to_values(outcome, delivery_id, now)
        with self._write() as conn:
            outcome_id, is_new, status, identifier = outcomes.record(conn, outcome, values, now)
            state = self._refresh(conn, identifier, now, outcome_id if is_new else None)
        if state is None:  # pragma: no cover - the outcome is stored, so it has a row
            raise AssertionError("a recorded outcome has no reconciliation row")
        return RecordedOutcome(
            outcome_id=outcome_id, is_new=is_new, reconciliation=state, delivery_status=status
        )

    def record_return(
        self,
        external_identifier: str,
        kind: ReturnKind | str,
        result_code: str | None,
        *,
        returned_at: datetime | None = None,
    ) -> int:
        """Record a customer's return (``return``) or cancel (``cancel``) visit.

        It never changes a payment's state: the query string comes from the browser. Only the
        newest ``max_returns`` visits of one identifier are kept (by ``returned_at``, then
        arrival); older ones are deleted in the same transaction. Returns the new row's id.
        """
        visit = enum_member(ReturnKind, kind, "kind")
        at = self._now(returned_at, "returned_at")
        with self._write() as conn:
            return returns.insert(
                conn, external_identifier, at, visit.value, result_code, keep=self._max_returns
            )

    # -- reconciliation --------------------------------------------------------------------

    def state(self, external_identifier: str) -> ReconciliationState | None:
        """The reconciliation state of one payment (or unexpected identifier); None when
        neither a payment nor an outcome names it."""
        with self._read() as conn:
            return reconciliation.state_for(conn, external_identifier)

    def row(self, external_identifier: str) -> ReconciliationRow | None:
        """The full reconciliation row of one identifier, or None."""
        with self._read() as conn:
            return reconciliation.row_for(conn, external_identifier)

    def outcome(self, outcome_id: int) -> Outcome | None:
        """The stored outcome ``outcome_id``, as it was recorded, or None."""
        with self._read() as conn:
            return outcomes.select(conn, outcome_id)

    # -- reconciliation --------------------------------------------------------------------

    def reconcile(
        self,
        *,
        state: ReconciliationState | str | Iterable[ReconciliationState | str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Iterator[ReconciliationRow]:
        """Stream the reconciliation, one row per payment and per unexpected identifier.

        :param state: only rows in this state, or in any of several.
        :param since: only rows opened at or after this aware time (a payment: when it was
            registered; an unexpected identifier: its earliest ``paid_at``).
        :param until: only rows opened before this aware time.

        Rows come from a cursor as they are computed (expected payments by identifier, then
        unexpected ones), so memory stays flat however many there are.
        """
        if state is None:
            wanted = None
        elif isinstance(state, str):
            wanted = frozenset({enum_member(ReconciliationState, state, "state")})
        else:
            wanted = frozenset(enum_member(ReconciliationState, s, "state") for s in state)
        return self._engine.stream(
            lambda conn: reconciliation.select_rows(conn, states=wanted, since=since, until=until),
            reconciliation.to_row,
        )

    def summary(self) -> list[SummaryRow]:
        """Counts and Decimal totals per currency and state, grouped in SQL."""
        with self._read() as conn:
            return reconciliation.summary(conn)
