"""The ledger: merchants' and finance's face, with the receiver's, the signals' and the
service's parts composed behind it.

:class:`Ledger` checks arguments (:mod:`~payhooks.storage.checks`) and delegates: the engine
(:mod:`~payhooks.storage.engines`) opens the database and makes every write; each table's SQL
lives with that table's functions. Idempotency comes from unique keys, never read-then-write.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlite_utils import Database

import payhooks.storage.payment_states as payment_states
import payhooks.storage.payments as payments
import payhooks.storage.reads.story as story
import payhooks.storage.reads.vitals as vitals
import payhooks.storage.reconciliation as reconciliation
import payhooks.storage.retention as retention
from payhooks.storage.audit_ageing import check_prune
from payhooks.storage.checks import (
    SYNCHRONOUS_MODES,
    check_amount,
    check_options,
    enum_member,
    payment_values,
)
from payhooks.storage.engines import Engine, open_engine
from payhooks.storage.errors import ConflictError
from payhooks.storage.health import (
    DEFAULT_HEALTH_LOCK_TIMEOUT_MS,
    DEFAULT_MIN_FREE_BYTES,
    LedgerHealth,
)
from payhooks.storage.limits import (
    DEFAULT_MAX_REJECTED,
    DEFAULT_MAX_RETURNS,
    DEFAULT_POOL_SIZE,
    check_pool_size,
)
from payhooks.storage.read_limits import check_limit_ms
from payhooks.storage.reads.console_book import ConsoleBook
from payhooks.storage.reads.finance import FinanceBook
from payhooks.storage.reads.story import PaymentStory
from payhooks.storage.reads.vitals import Vitals
from payhooks.storage.receiver_records import ReceiverRecords
from payhooks.storage.records import ReconciliationState
from payhooks.storage.retention import DEFAULT_PRUNE_BATCH, PruneReport
from payhooks.storage.rows import PaymentKind, ReconciliationRow, SummaryRow
from payhooks.storage.service_records import ServiceRecords
from payhooks.storage.signal_book import SignalBook
from payhooks.storage.times import Clock, system_clock, to_text

__all__ = ["DEFAULT_MAX_REJECTED", "DEFAULT_MAX_RETURNS", "SYNCHRONOUS_MODES", "Ledger"]


class Ledger:
    """The ledger (docs/reconciliation.md, docs/deployment.md), on SQLite or PostgreSQL; the
    signals owed are :attr:`signals`, the receiver's records (deliveries, outcomes, rejected
    deliveries, returns) :attr:`receiver`, the service's side (creation failures, the sync's
    records) :attr:`service`, the console's audit log and reviews :attr:`console`.

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
    :param read_only: open so that nothing can be written, for people who only read (a
        file made read-only, a PostgreSQL role with only ``SELECT``): SQLite's ``mode=ro`` and
        ``query_only``, never migrated; PostgreSQL's ``default_transaction_read_only``. A schema
        behind is :class:`~payhooks.storage.SchemaBehindError`; a write raises
        :class:`~payhooks.storage.StorageUnavailableError`.
    :param pool_size: PostgreSQL: the most connections this process's pool for ``pool_name``
        opens (``PAYHOOKS_POSTGRES_POOL_SIZE`` for the receiver's), 1 to 1000.
    :param pool_name: PostgreSQL: whose pool this ledger borrows from (``"receiver"``,
        ``"console"``): one pool per process, database and name, so a console mounted beside
        the receiver never takes the connections the receiver needs.

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
        read_only: bool = False,
        pool_size: int = DEFAULT_POOL_SIZE,
        pool_name: str = "receiver",
    ) -> None:
        sync_mode = check_options(busy_timeout_ms, max_rejected, max_returns, synchronous)
        check_pool_size(pool_size)
        if not isinstance(pool_name, str) or not pool_name.isidentifier():
            raise ValueError(f"pool_name must be a word such as 'console'; got {pool_name!r}")
        #: ``"FULL"`` or ``"NORMAL"``: how durable each write is when it returns.
        self.synchronous: str = sync_mode
        self._clock: Clock = clock or system_clock
        self._engine: Engine = open_engine(
            path_or_database,
            busy_timeout_ms=busy_timeout_ms,
            synchronous=sync_mode,
            write_lock=write_lock,
            check_same_thread=check_same_thread,
            create=create,
            read_only=read_only,
            pool_size=pool_size,
            pool_name=pool_name,
        )
        #: How many migrations the database has (:data:`~payhooks.storage.sqlite.SCHEMA_VERSION`).
        self.schema_version: int = self._engine.schema_version
        # Every write: a transaction, or a savepoint of the open one (the write protocol).
        self._write = self._engine.writer.write
        self._read = self._engine.read
        #: The signals owed to the merchant's code: listed, claimed, marked sent.
        self.signals = SignalBook(self._read, self._write, self._clock)
        #: What the service says: creation failures, the sync's runs and drift.
        self.service = ServiceRecords(self._engine, self._write, self._clock, self._refresh)
        #: What the receiver writes and reads: deliveries, outcomes, rejected deliveries, returns.
        self.receiver = ReceiverRecords(
            self._engine, self._write, self._clock, self._refresh, max_rejected, max_returns
        )
        #: The console's own: the append-only audit log, the exceptions' reviews.
        self.console = ConsoleBook(self._read, self._write, self._clock)
        #: Finance's aggregations: a period's tiles, chart buckets, filtered rows and totals.
        self.finance = FinanceBook(self._engine, self._clock)

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
        """Close the ledger's connection (never a PostgreSQL pool); safe to call twice."""
        self._engine.close()

    def health(
        self,
        *,
        min_free_bytes: int = DEFAULT_MIN_FREE_BYTES,
        lock_timeout_ms: int = DEFAULT_HEALTH_LOCK_TIMEOUT_MS,
    ) -> LedgerHealth:
        """Whether the ledger answers, can be written now and has this code's schema, found
        without writing anything (:mod:`payhooks.storage.health`).

        :param min_free_bytes: SQLite: less free space in the file's folder is
            ``ledger_disk_full``.
        :param lock_timeout_ms: how long to wait for SQLite's write lock or a connection.
        :raises StorageError: the database failed in a way the check does not name.
        """
        return self._engine.health(min_free_bytes=min_free_bytes, lock_timeout_ms=lock_timeout_ms)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Ledger {self._engine.name!r}>"

    @contextmanager
    def read_time_limit(self, limit_ms: int) -> Iterator[Ledger]:
        """Bound every read made in the block to ``limit_ms`` milliseconds from its start, all
        of them together: the one that runs past it is stopped on the database (SQLite
        interrupts the statement; PostgreSQL cancels it by ``statement_timeout``) and raises
        :class:`~payhooks.storage.ReadTimeLimitError`, and so does a later read in the block
        at its first look at the clock (on SQLite every thousand steps of the statement: one
        too short to reach it still finishes). For people's questions (the console's pages),
        so that no page holds a worker or a connection for longer than the limit.

        Writes are never limited, nor reads inside a :meth:`transaction`. A block inside
        another keeps the deadline that comes first. On SQLite the limit is the ledger's (one
        connection, one thread); on PostgreSQL the calling thread's.

        :raises ValueError: ``limit_ms`` is not an int from 1 to 3,600,000.
        """
        with self._engine.time_limit(check_limit_ms(limit_ms)):
            yield self

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
        now = to_text(self._clock(), argument="clock()")
        with self._write() as conn:
            stored = payments.insert(conn, external_identifier, now, values)
            if stored is None:
                self._refresh(conn, external_identifier, now)
        differing = None if stored is None else payments.differing(stored, values)
        if differing:
            raise ConflictError(external_identifier, differing)
        return stored is None

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

    def story(self, external_identifier: str) -> PaymentStory | None:
        """Everything the ledger knows about one payment (or unexpected identifier): the rows
        of its registration, creation attempts, deliveries, outcomes, signals owed, returns and
        sync sightings, with its reconciliation row; ``timeline()`` orders them.

        None when nothing names it. A read only: one query per table, each seeing what is
        committed when it runs.
        """
        with self._read() as conn:
            return story.read_story(conn, external_identifier)

    def reconcile(
        self,
        *,
        state: ReconciliationState | str | Iterable[ReconciliationState | str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        paid_since: datetime | None = None,
        paid_until: datetime | None = None,
    ) -> Iterator[ReconciliationRow]:
        """Stream the reconciliation, one row per payment and per unexpected identifier.

        :param state: only rows in this state, or in any of several.
        :param since: only rows opened at or after this aware time (a payment: when it was
            registered; an unexpected identifier: its earliest ``paid_at``).
        :param until: only rows opened before this aware time.
        :param paid_since: only payments paid at or after this aware time: a ``succeeded``
            outcome's ``paid_at`` (a subscription: any period's). ``paid_until``: before it.

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
            lambda conn: reconciliation.select_rows(
                conn,
                states=wanted,
                since=since,
                until=until,
                paid_since=paid_since,
                paid_until=paid_until,
            ),
            reconciliation.to_row,
        )

    def summary(self) -> list[SummaryRow]:
        """Counts and Decimal totals per currency and state, grouped in SQL."""
        with self._read() as conn:
            return reconciliation.summary(conn)

    # -- health ----------------------------------------------------------------------------

    def vitals(
        self, now: datetime | None = None, *, mismatch_window: timedelta = vitals.DAY
    ) -> Vitals:
        """The ledger's vital figures at ``now`` (default: the ledger's clock): the last
        delivery and the last accepted one, deliveries, failures and refused requests over the
        last hour and 24 hours, the day's errors by cause, the refused requests kept by code,
        the signals owed and unsent, the last sync and the drift, the mismatches (and those
        changed within ``mismatch_window``).

        A read only, in one connection; its cost follows the last day's traffic, not the
        ledger's size (:mod:`payhooks.storage.reads.vitals`).

        :raises ValueError: ``now`` is naive, or ``mismatch_window`` is not positive.
        :raises UnreadableRowError: a time the figures read is not one payhooks writes (a
            row changed outside payhooks), naming its column: the figures cannot be trusted.
        """
        moment = self._clock() if now is None else now
        to_text(moment, argument="now")
        if mismatch_window <= timedelta(0):
            raise ValueError(f"mismatch_window must be positive; got {mismatch_window}")
        with self._read() as conn:
            return vitals.read_vitals(conn, moment, mismatch_window, self.finance.rollup)

    # -- retention -------------------------------------------------------------------------

    def prune(
        self,
        older_than: timedelta,
        archive_dir: str | os.PathLike[str],
        *,
        dry_run: bool = False,
        batch: int = DEFAULT_PRUNE_BATCH,
        audit_older_than: timedelta | None = None,
    ) -> PruneReport:
        """Archive into ``archive_dir``, then drop, the bodies and headers of the finished
        deliveries received more than ``older_than`` ago, and the refused requests as old
        (:mod:`payhooks.storage.retention`: what *finished* means, what stays). Each batch of
        ``batch`` rows is one short transaction, so receivers keep writing meanwhile. First it
        sweeps ``archive_dir`` of what a prune stopped before it left there
        (:mod:`payhooks.storage.archive_leftovers`; the report's ``leftovers``).

        Then it ages the audit log past ``audit_older_than`` (:func:`~.audit_ageing.check_prune`
        gives the default) into an archive of its own, deleted under a permit the triggers
        check (:mod:`payhooks.storage.audit_ageing`; the report's ``audit``).

        :param dry_run: only count what would be archived, and find the leftovers.
        :raises ValueError: what :func:`~.audit_ageing.check_prune` raises.
        :raises ArchiveError: the archive could not be written; nothing was dropped.
        """
        audit_horizon = check_prune(older_than, audit_older_than, batch)
        return retention.prune(
            self._read,
            self._write,
            now=self._clock(),
            older_than=older_than,
            audit_older_than=audit_horizon,
            archive_dir=Path(archive_dir),
            dry_run=dry_run,
            batch=batch,
        )

    def restore_pruned(
        self, archive: str | os.PathLike[str], *, header_names: Collection[str] | None = None
    ) -> tuple[int, int]:
        """Put back the bodies and headers an archive of :meth:`prune` holds, into the
        deliveries still pruned with the same ``body_sha256``, each checked first (its SHA-256;
        its headers, as a receiver stores them, named among ``header_names`` when given).
        Returns (deliveries restored, rows in the archive).

        :raises ArchiveError: the archive is missing, damaged, does not match its checksum, or
            holds headers a receiver would not have stored.
        """
        return retention.restore(self._write, Path(archive), header_names=header_names)
