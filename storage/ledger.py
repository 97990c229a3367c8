"""The ledger: expected payments, deliveries, outcomes and returns in one SQLite file.

One :class:`Ledger` holds one connection; use one per thread (SQLite connections must not be
shared between threads). Several processes may open the same file at once: writes are short
``BEGIN IMMEDIATE`` transactions that wait on the busy timeout, and the file is in WAL mode so
readers never block the writer.

Idempotency comes from unique keys, never from read-then-write: a repeated delivery hits
``deliveries.dedupe_key``, a repeated outcome ``outcomes (transaction_id, payment_status)``, a
repeated registration ``payments.external_identifier``; each insert is ``ON CONFLICT`` and the
stored row is read back only afterwards, in the same transaction.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from types import TracebackType
from typing import Any, Final, TypeVar

from payhooks.storage import reconciliation
from payhooks.storage.currencies import minor_unit_exponent
from payhooks.storage.errors import (
    ConflictError,
    StorageError,
    StorageUnavailableError,
    UnknownDeliveryError,
    translate_errors,
)
from payhooks.storage.limits import MAX_AMOUNT_MINOR
from payhooks.storage.records import STATE_RANK, Outcome, ReconciliationState
from payhooks.storage.rows import (
    FINISHED_DELIVERY_STATUSES,
    Delivery,
    DeliveryStatus,
    PaymentKind,
    ReconciliationRow,
    RecordedOutcome,
    ReturnKind,
    SummaryRow,
)
from payhooks.storage.schema import configure, migrate
from payhooks.storage.times import Clock, from_text, system_clock, to_text
from payhooks.storage.wal_sync import WalSync
from payhooks.storage.write_lock import WriteLock
from sqlite_utils import Database

__all__ = ["DEFAULT_MAX_REJECTED", "DEFAULT_MAX_RETURNS", "SYNCHRONOUS_MODES", "Ledger"]

#: How many rejected deliveries are kept by default; older ones are pruned.
DEFAULT_MAX_REJECTED: Final = 10_000

#: How many customer returns are kept per ``external_identifier`` by default; older ones are
#: pruned.
DEFAULT_MAX_RETURNS: Final = 50

#: The values of :class:`Ledger`'s ``synchronous`` option (after SQLite's ``PRAGMA
#: synchronous``), the safest first. ``FULL``: every write is on disk before the call that
#: made it returns, so it survives a power loss (the ledger syncs the write-ahead log itself,
#: after releasing the write lock: :mod:`payhooks.storage.wal_sync`). ``NORMAL``: the log is synced
#: only at checkpoints; a write still survives the process crashing, but the last writes
#: before an operating-system crash or a power loss can be lost (the file stays consistent).
SYNCHRONOUS_MODES: Final = ("FULL", "NORMAL")

#: How much of a rejected body is kept.
REJECTED_BODY_BYTES: Final = 4096

#: The statuses :meth:`Ledger.mark_delivery` may set; the others follow from recording.
_MARKABLE = frozenset(
    {
        DeliveryStatus.MALFORMED_JSON,
        DeliveryStatus.INVALID_PAYLOAD,
        DeliveryStatus.PROCESSING_ERROR,
    }
)

# A finished delivery keeps its status: see Ledger.mark_delivery.
_FINISHED_SQL = ", ".join(f"'{status}'" for status in sorted(FINISHED_DELIVERY_STATUSES))
_MARK_DELIVERY = f"""
    UPDATE deliveries SET status = ?, error = ?, updated_at = ?
    WHERE id = ? AND status NOT IN ({_FINISHED_SQL})"""  # noqa: S608 - constants only

_DELIVERY_COLUMNS = (
    "id, dedupe_key, reused_key_of, received_at, headers, body, body_sha256, status, error, "
    "attempts, outcome_id, signal_error, updated_at"
)

# A dedupe_key repeated with the same bytes stores nothing new: it counts an attempt and
# returns the row's id and attempts (then the stored row is read; a new row, the common case,
# is known from its arguments and never read back). With other bytes the update's WHERE
# fails, so nothing is returned.
_UPSERT_DELIVERY = """
    INSERT INTO deliveries (
        dedupe_key, reused_key_of, received_at, headers, body, body_sha256, updated_at
    )
    VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (dedupe_key) DO UPDATE
        SET attempts = attempts + 1, updated_at = excluded.updated_at
        WHERE body_sha256 = excluded.body_sha256
    RETURNING id, attempts"""
_SELECT_DELIVERY = f"SELECT {_DELIVERY_COLUMNS} FROM deliveries WHERE id = ?"  # noqa: S608

_INSERT_OUTCOME = """
    INSERT INTO outcomes (delivery_id, transaction_id, external_identifier, flow, provider,
        provider_reference, provider_status, payment_status, state, state_rank, amount,
        currency, amount_minor, paid_at, extra, recorded_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (transaction_id, payment_status) DO NOTHING RETURNING id"""

# What record_outcome compares when an outcome is already stored: the fields that change who
# was paid, how much, or what happened. Not paid_at: see Ledger.record_outcome.
_OUTCOME_FIELDS = (
    "external_identifier",
    "state",
    "amount_minor",
    "currency",
    "provider_reference",
)
# Fields whose values may appear in a delivery's error text; the others are named only.
_SHOWN_FIELDS = frozenset({"state", "amount_minor", "currency"})

# Everything of one identifier but its newest visits; walks returns_external_identifier
# backwards, so no sort.
_PRUNE_RETURNS = """
    DELETE FROM returns WHERE id IN (
        SELECT id FROM returns WHERE external_identifier = ?
        ORDER BY returned_at DESC, id DESC LIMIT -1 OFFSET ?
    )"""

# Fields compared when a payment is registered again, in the order of the SELECT below.
_PAYMENT_FIELDS = (
    "kind",
    "amount_minor",
    "currency",
    "plan_amount_minor",
    "description",
    "metadata",
)

_T = TypeVar("_T")


def _json_default(value: object) -> str:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _to_json(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), sort_keys=True, separators=(",", ":"), default=_json_default)


def _delivery(values: tuple[Any, ...], *, is_new: bool = False) -> Delivery:
    (
        delivery_id,
        dedupe_key,
        reused_key_of,
        received_at,
        headers,
        body,
        body_sha256,
        status,
        error,
        attempts,
        outcome_id,
        signal_error,
        updated_at,
    ) = values
    return Delivery(
        id=delivery_id,
        dedupe_key=dedupe_key,
        reused_key_of=reused_key_of,
        received_at=from_text(received_at),
        headers=json.loads(headers),
        body=bytes(body),
        body_sha256=body_sha256,
        status=DeliveryStatus(status),
        error=error,
        attempts=attempts,
        outcome_id=outcome_id,
        signal_error=signal_error,
        updated_at=from_text(updated_at),
        is_new=is_new,
    )


def _conflict(outcome: Outcome, first_delivery: int, stored: Mapping[str, Any]) -> str | None:
    """What a delivery's error says when its outcome differs from the one stored; None when
    it says the same (a duplicate)."""
    new = {
        "external_identifier": outcome.external_identifier,
        "state": str(outcome.state),
        "amount_minor": outcome.amount_minor,
        "currency": outcome.currency,
        "provider_reference": outcome.provider_reference,
    }
    differing = [
        f"{name} (stored {stored[name]}, here {new[name]})" if name in _SHOWN_FIELDS else name
        for name in _OUTCOME_FIELDS
        if stored[name] != new[name]
    ]
    if not differing:
        return None
    return (
        f"The outcome of transaction {outcome.transaction_id!r} with payment_status "
        f"{outcome.payment_status!r} was already recorded from delivery {first_delivery}, "
        f"and this one differs in {', '.join(differing)}. The first one stands."
    )


@contextmanager
def _savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    """A savepoint inside the open transaction: undone alone when the block raises.

    One fixed name serves every level (SQLite releases and rolls back to the innermost of that
    name), so the statements stay in the connection's statement cache.
    """
    conn.execute("SAVEPOINT payhooks_write")
    try:
        yield
    except BaseException:
        # An error such as a full disk can end the whole transaction, savepoints included:
        # then there is nothing left to undo, and trying would hide the original error.
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK TO payhooks_write")
                conn.execute("RELEASE payhooks_write")
        raise
    conn.execute("RELEASE payhooks_write")


def _wal_sync(db: Database, file: str | None) -> WalSync | None:
    """How a ``FULL`` ledger on its own file makes its commits durable: a :class:`WalSync`
    after each commit, outside the write lock, for a file in WAL mode on a POSIX system; None
    elsewhere (then SQLite's own ``FULL`` syncs inside the commit)."""
    if file is None or os.name != "posix" or db.conn.in_transaction:
        return None
    (mode,) = db.conn.execute("PRAGMA journal_mode").fetchone()
    return WalSync(file) if str(mode).lower() == "wal" else None


def _database_file(db: Database) -> str | None:
    """The path of ``db``'s main file; None for a database in memory or a temporary one."""
    for _, name, file in db.conn.execute("PRAGMA database_list"):
        if name == "main":
            return str(file) or None
    return None  # pragma: no cover - SQLite always lists main


_E = TypeVar("_E", bound=StrEnum)


def _enum(kind: type[_E], value: str, argument: str) -> _E:
    """``value`` as a member of ``kind``, or a ValueError naming the argument and the choices."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise ValueError(f"{argument} must be one of {choices}; got {value!r}") from None


def _check_amount(value: object, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_AMOUNT_MINOR:
        raise ValueError(
            f"{argument} must be an int of minor units from 0 to {MAX_AMOUNT_MINOR}, not {value!r}"
        )
    return value


class Ledger:
    """The SQLite ledger: expected payments, deliveries, outcomes and returns.

    :param path_or_database: a file path (opened and owned: :meth:`close` closes it), or a
        ``sqlite_utils.Database`` the caller owns and closes. When that database is already
        inside a transaction, the ledger's writes join it as savepoints.
    :param busy_timeout_ms: how long a write waits for another writer's lock before it gives
        up with :class:`~payhooks.storage.StorageUnavailableError`.
    :param max_rejected: how many rejected deliveries to keep (the newest); bounds the table
        however many forged requests arrive.
    :param max_returns: how many customer returns to keep per ``external_identifier`` (the
        newest): anyone holding a valid return URL can visit it as often as they like, for as
        long as its token lives.
    :param clock: returns the current aware time; for tests. Defaults to the system's, in UTC.
    :param synchronous: ``"FULL"`` (the default) or ``"NORMAL"`` (see
        :data:`SYNCHRONOUS_MODES`): ``NORMAL`` makes each write cheaper, at the price of the
        last writes should the machine (not only the process) crash. ``FULL`` on a file the
        ledger opens, in WAL mode, on POSIX: SQLite's ``NORMAL``, with the ledger syncing the
        log after each commit once the locks are released, so that concurrent writers' syncs
        overlap (:mod:`payhooks.storage.wal_sync`); otherwise SQLite's own ``FULL``. A caller's
        database opened inside a transaction keeps its own setting (SQLite cannot change it
        there).
    :param write_lock: take the file's :class:`~payhooks.storage.write_lock.WriteLock`
        (``<file>.lock``) before each write, so that a writer waiting for another wakes as
        soon as it commits, instead of sleeping in SQLite's coarse busy handler. False, or a
        database in memory, a folder where the lock file cannot be created, or a system
        without ``fcntl``: SQLite's busy handler alone. Either way SQLite's own lock is taken
        too, so writers with and without it exclude each other correctly.

    Opening migrates the file forward when it is behind (see :mod:`payhooks.storage.schema`). Every
    ``sqlite3`` error is raised as a :class:`~payhooks.storage.StorageError`.
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
    ) -> None:
        if busy_timeout_ms < 0:
            raise ValueError(f"busy_timeout_ms must not be negative, not {busy_timeout_ms!r}")
        if max_rejected < 1:
            raise ValueError(f"max_rejected must be at least 1, not {max_rejected!r}")
        if max_returns < 1:
            raise ValueError(f"max_returns must be at least 1, not {max_returns!r}")
        sync_mode = synchronous.upper() if isinstance(synchronous, str) else synchronous
        if sync_mode not in SYNCHRONOUS_MODES:
            raise ValueError(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}, not {synchronous!r}"
            )
        #: ``"FULL"`` or ``"NORMAL"``: how durable each write is when it returns.
        self.synchronous: str = sync_mode
        self._max_rejected = max_rejected
        self._max_returns = max_returns
        self._clock: Clock = clock or system_clock
        self._owns_database = not isinstance(path_or_database, Database)
        self._name = (
            "<database>" if isinstance(path_or_database, Database) else os.fspath(path_or_database)
        )
        with translate_errors():
            if isinstance(path_or_database, Database):
                db = path_or_database
            else:
                db = Database(os.fspath(path_or_database), execute_plugins=False)
            try:
                configure(db, busy_timeout_ms=busy_timeout_ms)
                file = _database_file(db)
                owned = self._owns_database and sync_mode == "FULL"
                wal_sync = _wal_sync(db, file) if owned else None
                if not db.conn.in_transaction:  # SQLite refuses the change inside one
                    pragma = "NORMAL" if wal_sync is not None else sync_mode
                    db.conn.execute(f"PRAGMA synchronous = {pragma}")
                #: How many schema migrations the file has (the code's
                #: :data:`payhooks.storage.schema.SCHEMA_VERSION` once open).
                self.schema_version = migrate(db)
                lock_file = file if write_lock else None
            except BaseException:
                if self._owns_database:
                    db.close()
                raise
        self._db = db
        self._closed = False
        self._busy_timeout_ms = busy_timeout_ms
        #: The lock writers take before SQLite's (None: SQLite's busy handler alone).
        self._write_lock = None if lock_file is None else WriteLock(lock_file)
        #: Syncs the WAL after each commit, outside the locks (None: SQLite syncs, or not).
        self._wal_sync = wal_sync

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def database(self) -> Database:
        """The underlying ``sqlite_utils.Database``: for reading, and for tools and tests.

        Writes made through it bypass the ledger's checks.
        """
        return self._db

    def close(self) -> None:
        """Close the connection if the ledger opened it. Safe to call twice."""
        if not self._closed:
            if self._write_lock is not None:
                self._write_lock.close()
            if self._wal_sync is not None:
                self._wal_sync.close()
            if self._owns_database:
                with translate_errors():
                    self._db.close()
        self._closed = True

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Ledger {self._name!r}>"

    @contextmanager
    def transaction(self) -> Iterator[Ledger]:
        """Run several of the ledger's writes as one transaction: one lock, one commit.

        The writes made inside the block (:meth:`record_delivery`, :meth:`record_outcome`,
        :meth:`mark_delivery`...) join it, and the block's end commits them together, so they
        cost one wait for the write lock and one sync to disk instead of one each, and a crash
        leaves all of them or none. An exception that leaves the block rolls all of them back.
        Each write inside is a savepoint, so one that raises undoes only its own part; let its
        exception leave the block unless you mean to commit the others without it.

        The receiver stores a delivery and its outcome this way (see
        :func:`payhooks.receiver.pipeline.processing.receive_delivery`). Inside a transaction the
        caller's own ``Database`` has open, the block is a savepoint of it.

        :raises StorageUnavailableError: the write lock was not free within the busy timeout,
            or the commit failed; nothing of the block is stored.
        """
        with self._write():
            yield self

    @contextmanager
    def _write(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction: ``BEGIN IMMEDIATE`` takes the write lock up front.

        ``durable=False`` skips the ``FULL`` ledger's sync after the commit (for writes that
        acknowledge nothing).

        A deferred transaction that reads first and writes later can fail at once with
        ``SQLITE_BUSY`` when another process wrote in between (WAL snapshots cannot be
        upgraded), without waiting on the busy timeout; taking the lock first makes the busy
        timeout the only wait. Inside a transaction already open (:meth:`transaction`, or the
        caller's own), a savepoint instead.
        """
        conn = self._db.conn
        with translate_errors():
            if conn.in_transaction:
                with _savepoint(conn):
                    yield conn
                return
            waited = self._take_write_lock()
            try:
                self._begin(conn, waited)
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    with suppress(sqlite3.Error):
                        self._db.rollback()  # a no-op when the error already ended it
                    raise
            finally:
                if self._write_lock is not None:
                    self._write_lock.release()
        if self._wal_sync is not None and durable:
            self._sync_committed(self._wal_sync)

    def _sync_committed(self, wal_sync: WalSync) -> None:
        """Put the commit on disk before the write returns (``FULL``), once both locks are
        released, so that the next writer commits meanwhile (see
        :mod:`payhooks.storage.wal_sync`)."""
        try:
            wal_sync.sync()
        except OSError as err:
            raise StorageUnavailableError(
                f"The write was committed but could not be synced to disk ({err.strerror})."
            ) from err

    def _take_write_lock(self) -> float | None:
        """Take the file's :class:`~payhooks.storage.write_lock.WriteLock` before SQLite's lock, so
        a waiting writer wakes as soon as the other one commits; the seconds it waited, or None
        when there is no such lock (then SQLite's busy handler does the waiting)."""
        if self._write_lock is None:
            return None
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        try:
            return self._write_lock.acquire(deadline)
        except TimeoutError as err:
            raise StorageUnavailableError(
                "Another writer held the ledger's write lock for longer than the busy "
                f"timeout ({self._busy_timeout_ms} ms)."
            ) from err

    def _begin(self, conn: sqlite3.Connection, waited: float | None) -> None:
        """``BEGIN IMMEDIATE``, waiting on SQLite's lock (held only by writers outside the write
        lock: SQL tools, migrations) for what is left of the busy timeout after ``waited``."""
        if not waited or waited < 0.001:
            conn.execute("BEGIN IMMEDIATE")
            return
        left = max(1, self._busy_timeout_ms - int(waited * 1000))
        conn.execute(f"PRAGMA busy_timeout = {left}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        finally:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")

    def _stream(
        self, cursor: sqlite3.Cursor, convert: Callable[[tuple[Any, ...]], _T]
    ) -> Iterator[_T]:
        """Yield converted rows straight from ``cursor``: never more than one row in memory."""
        try:
            with translate_errors():
                for values in cursor:
                    yield convert(values)
        finally:
            with suppress(sqlite3.Error):
                cursor.close()

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
            int from 0 to :data:`~payhooks.storage.MAX_AMOUNT_MINOR`, a currency that is not an ISO
            4217 code with minor units.
        """
        return self._expect(
            external_identifier,
            PaymentKind.TRANSACTION,
            amount_minor,
            currency,
            None,
            description,
            metadata,
        )

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
        return self._expect(
            external_identifier,
            PaymentKind.SUBSCRIPTION,
            amount_minor,
            currency,
            _check_amount(plan_amount_minor, "plan_amount_minor"),
            description,
            metadata,
        )

    def _expect(
        self,
        external_identifier: str,
        kind: PaymentKind,
        amount_minor: int,
        currency: str,
        plan_amount_minor: int | None,
        description: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> bool:
        if not isinstance(external_identifier, str) or not 1 <= len(external_identifier) <= 64:
            raise ValueError("external_identifier must be a string of 1 to 64 characters")
        _check_amount(amount_minor, "amount_minor")
        if not isinstance(currency, str):
            raise ValueError("currency must be an ISO 4217 code")
        minor_unit_exponent(currency)  # raises UnknownCurrencyError, a ValueError
        if description is not None and not isinstance(description, str):
            raise ValueError("description must be a string or None")
        try:
            metadata_json = None if metadata is None else _to_json(metadata)
        except TypeError as err:
            raise ValueError(f"metadata must be JSON serializable: {err}") from err
        values = (
            kind.value,
            amount_minor,
            currency,
            plan_amount_minor,
            description,
            metadata_json,
        )
        with self._write() as conn:
            inserted = conn.execute(
                "INSERT INTO payments (external_identifier, created_at, kind, amount_minor, "
                "currency, plan_amount_minor, description, metadata) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (external_identifier) DO NOTHING",
                (external_identifier, self._now(None, "clock()"), *values),
            ).rowcount
            if inserted:
                return True
            stored = conn.execute(
                f"SELECT {', '.join(_PAYMENT_FIELDS)} FROM payments "  # noqa: S608 - constants
                "WHERE external_identifier = ?",
                (external_identifier,),
            ).fetchone()
        differing = tuple(
            name
            for name, old, new in zip(_PAYMENT_FIELDS, stored, values, strict=True)
            if old != new
        )
        if differing:
            raise ConflictError(external_identifier, differing)
        return False

    # -- deliveries ------------------------------------------------------------------------

    def record_delivery(
        self,
        *,
        dedupe_key: str,
        body: bytes,
        headers: Mapping[str, str],
        received_at: datetime | None = None,
    ) -> Delivery:
        """Store an authenticated delivery: committed at once, or with the rest of a
        :meth:`transaction` (the receiver stores the delivery and its outcome in one).

        A new ``dedupe_key`` gives a row with status ``received`` and ``is_new=True``. A known
        one with the same bytes stores nothing new: it counts one more attempt and returns the
        stored row (body, status and all) with ``is_new=False``, so a retry can finish what the
        first try began.

        A known ``dedupe_key`` with *other* bytes (a ``webhook-id`` reused for another
        notification) is a delivery of its own: it is stored under
        ``"<dedupe_key>#<body_sha256>"`` with ``reused_key_of`` naming the first delivery, and
        handled like any new one (its repeats count attempts on it). Bytes are never answered
        for by a row that holds other bytes.

        :raises StorageError: even the derived key is taken by other bytes (only a sender
            that chooses such ids can cause it); nothing is stored.
        """
        if not isinstance(dedupe_key, str) or not dedupe_key:
            raise ValueError("dedupe_key must be a non-empty string")
        if not isinstance(body, bytes | bytearray | memoryview):
            raise ValueError("body must be bytes")
        raw = bytes(body)
        digest = hashlib.sha256(raw).hexdigest()
        now = self._clock()
        arrived = now if received_at is None else received_at
        stored_headers = dict(headers)
        row = (
            to_text(arrived, argument="received_at"),
            _to_json(stored_headers),
            raw,
            digest,
            to_text(now, argument="clock()"),
        )
        key, reused_key_of = dedupe_key, None
        with self._write() as conn:
            found = conn.execute(_UPSERT_DELIVERY, (key, None, *row)).fetchone()
            if found is None:
                (reused_key_of,) = conn.execute(
                    "SELECT id FROM deliveries WHERE dedupe_key = ?", (dedupe_key,)
                ).fetchone()
                key = f"{dedupe_key}#{digest}"
                found = conn.execute(_UPSERT_DELIVERY, (key, reused_key_of, *row)).fetchone()
            if found is None:
                raise StorageError(
                    f"The dedupe key of delivery {reused_key_of} was reused, and the key "
                    "derived from this body is taken by other bytes; the delivery was not "
                    "stored."
                )
            delivery_id, attempts = found
            if attempts != 1:  # a known delivery: what is stored counts, not the arguments
                return _delivery(conn.execute(_SELECT_DELIVERY, (delivery_id,)).fetchone())
        return Delivery(
            id=delivery_id,
            dedupe_key=key,
            reused_key_of=reused_key_of,
            received_at=arrived.astimezone(UTC),
            headers=stored_headers,
            body=raw,
            body_sha256=digest,
            status=DeliveryStatus.RECEIVED,
            error=None,
            attempts=1,
            outcome_id=None,
            signal_error=None,
            updated_at=now.astimezone(UTC),
            is_new=True,
        )

    def mark_delivery(
        self, delivery_id: int, status: DeliveryStatus | str, error: str | None = None
    ) -> bool:
        """Record that a stored delivery could not be processed, and why.

        A delivery that already finished (``processed``, ``duplicate``,
        ``conflicting_outcome``) is left as it is: two copies of one delivery can be in
        flight at once, and the one that fails after the other finished must not turn a
        recorded outcome into an error.

        :param status: ``malformed_json``, ``invalid_payload`` or ``processing_error``.
        :returns: True when marked; False when the delivery had already finished.
        :raises UnknownDeliveryError: no such delivery.
        """
        marked = _enum(DeliveryStatus, status, "status")
        if marked not in _MARKABLE:
            raise ValueError(f"status must be one of {sorted(_MARKABLE)}, not {marked.value!r}")
        with self._write() as conn:
            changed = conn.execute(
                _MARK_DELIVERY,
                (marked.value, error, self._now(None, "clock()"), delivery_id),
            ).rowcount
            if changed:
                return True
            if conn.execute("SELECT 1 FROM deliveries WHERE id = ?", (delivery_id,)).fetchone():
                return False
            raise UnknownDeliveryError(delivery_id)

    def record_signal_error(self, delivery_id: int, error: str) -> None:
        """Keep what a signal receiver raised; several failures are kept one per line."""
        with self._write() as conn:
            changed = conn.execute(
                "UPDATE deliveries SET signal_error = CASE WHEN signal_error IS NULL THEN ? "
                "ELSE signal_error || char(10) || ? END, updated_at = ? WHERE id = ?",
                (error, error, self._now(None, "clock()"), delivery_id),
            ).rowcount
            if not changed:
                raise UnknownDeliveryError(delivery_id)

    def delivery(self, delivery_id: int) -> Delivery | None:
        """The stored delivery with this id, or None."""
        with translate_errors():
            values = self._db.conn.execute(_SELECT_DELIVERY, (delivery_id,)).fetchone()
        return None if values is None else _delivery(values)

    def outcome_identifier(self, outcome_id: int) -> str | None:
        """The ``external_identifier`` of the stored outcome ``outcome_id`` (a delivery's
        ``outcome_id``), or None when there is none: the payment a finished delivery's
        redelivery is answered about, without parsing its body again."""
        with translate_errors():
            row = self._db.conn.execute(
                "SELECT external_identifier FROM outcomes WHERE id = ?", (outcome_id,)
            ).fetchone()
        return None if row is None else str(row[0])

    def deliveries(self, status: DeliveryStatus | str | None = None) -> Iterator[Delivery]:
        """Stored deliveries in the order they arrived, optionally only those with ``status``
        (what ``payhooks reprocess`` walks). Streams from a cursor."""
        with translate_errors():
            if status is None:
                cursor = self._db.conn.execute(
                    f"SELECT {_DELIVERY_COLUMNS} FROM deliveries ORDER BY id"  # noqa: S608
                )
            else:
                cursor = self._db.conn.execute(
                    f"SELECT {_DELIVERY_COLUMNS} FROM deliveries "  # noqa: S608
                    "WHERE status = ? ORDER BY id",
                    (_enum(DeliveryStatus, status, "status").value,),
                )
        return self._stream(cursor, _delivery)

    def record_rejected(
        self,
        *,
        reason: str,
        body: bytes,
        remote_addr: str | None,
        received_at: datetime | None = None,
    ) -> int:
        """Keep a trace of a delivery that failed verification: its first 4 KiB and why.

        The table keeps the newest ``max_rejected`` rows; older ones are deleted in the same
        transaction. Returns the new row's id.

        Committed but, under ``FULL``, not synced before it returns (the next synced write
        takes it to disk with its own): it is a diagnostic trace that acknowledges nothing, and
        anyone without a key can send these, so each must not cost a sync to disk.
        """
        with self._write(durable=False) as conn:
            rejected_id: int = conn.execute(
                "INSERT INTO rejected_deliveries (received_at, remote_addr, reason, body, "
                "body_size) VALUES (?, ?, ?, ?, ?) RETURNING id",
                (
                    self._now(received_at, "received_at"),
                    remote_addr,
                    reason,
                    bytes(body[:REJECTED_BODY_BYTES]),
                    len(body),
                ),
            ).fetchone()[0]
            # Ids only grow (the newest row is never deleted), so the oldest are a key range.
            conn.execute(
                "DELETE FROM rejected_deliveries WHERE id <= ?",
                (rejected_id - self._max_rejected,),
            )
        return rejected_id

    # -- outcomes and returns --------------------------------------------------------------

    def record_outcome(self, outcome: Outcome, *, delivery_id: int) -> RecordedOutcome:
        """Record an outcome, mark its delivery and reconcile, all in one transaction.

        The outcome is stored once per (``transaction_id``, ``payment_status``). The delivery
        becomes ``processed``; recording the same delivery again, as ``payhooks reprocess``
        does, keeps it ``processed``. When a different delivery had already recorded this
        outcome, the stored one stands and the delivery is marked:

        - ``duplicate`` when it says the same: equal ``external_identifier``, ``state``,
          ``amount_minor``, ``currency`` and ``provider_reference``. Only ``paid_at`` (and the
          amount's spelling, flow details and extra members) may differ: a service that sends
          a notification again may stamp it anew, and a different time alone moves no money.
        - ``conflicting_outcome`` when any of those differs (a ``PS`` of 25.00 and a ``PS`` of
          99.00 for one transaction): the delivery's ``error`` names the fields, with the
          stored and new values of the state, amount and currency (references and
          identifiers are named only), and its ``outcome_id`` is the stored outcome.

        The returned state is that of the payment the stored outcome names (the first
        delivery's word stands, even when a later one names another ``external_identifier``).

        :raises UnknownDeliveryError: ``delivery_id`` is not stored.
        :raises ValueError: an amount outside 0 to :data:`~payhooks.storage.MAX_AMOUNT_MINOR` (the
        parser
            refuses those first).
        """
        _check_amount(outcome.amount_minor, "outcome.amount_minor")
        now = self._now(None, "clock()")
        # Everything is made ready before the write lock is taken, so it is held only for SQL.
        row = (
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
            _to_json(outcome.extra),
            now,
        )
        with self._write() as conn:
            # An unknown delivery_id: the foreign key refuses a new outcome, and the update
            # below finds no delivery to mark; either way the write is undone.
            try:
                inserted = conn.execute(_INSERT_OUTCOME, row).fetchone()
            except sqlite3.IntegrityError as err:
                if getattr(err, "sqlite_errorname", "") == "SQLITE_CONSTRAINT_FOREIGNKEY":
                    raise UnknownDeliveryError(delivery_id) from err
                raise
            status, error = DeliveryStatus.PROCESSED, None
            if inserted is not None:
                outcome_id, is_new = inserted[0], True
                external_identifier = outcome.external_identifier
            else:
                # The stored outcome stands, and so does the payment it names: a later
                # delivery of the same transaction and status under another
                # external_identifier must not look up a payment that has no outcome.
                outcome_id, first_delivery, *values = conn.execute(
                    f"SELECT id, delivery_id, {', '.join(_OUTCOME_FIELDS)} "  # noqa: S608
                    "FROM outcomes WHERE transaction_id = ? AND payment_status = ?",
                    (outcome.transaction_id, outcome.payment_status),
                ).fetchone()
                is_new = False
                stored = dict(zip(_OUTCOME_FIELDS, values, strict=True))
                external_identifier = stored["external_identifier"]
                if first_delivery != delivery_id:
                    error = _conflict(outcome, first_delivery, stored)
                    status = (
                        DeliveryStatus.DUPLICATE
                        if error is None
                        else DeliveryStatus.CONFLICTING_OUTCOME
                    )
            marked = conn.execute(
                "UPDATE deliveries SET status = ?, error = ?, outcome_id = ?, updated_at = ? "
                "WHERE id = ?",
                (status.value, error, outcome_id, now, delivery_id),
            ).rowcount
            if not marked:
                raise UnknownDeliveryError(delivery_id)
            state = reconciliation.state_for(conn, external_identifier)
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
        visit = _enum(ReturnKind, kind, "kind")
        with self._write() as conn:
            returned_id: int = conn.execute(
                "INSERT INTO returns (external_identifier, returned_at, kind, result_code) "
                "VALUES (?, ?, ?, ?) RETURNING id",
                (
                    external_identifier,
                    self._now(returned_at, "returned_at"),
                    visit.value,
                    result_code,
                ),
            ).fetchone()[0]
            conn.execute(_PRUNE_RETURNS, (external_identifier, self._max_returns))
        return returned_id

    # -- reconciliation --------------------------------------------------------------------

    def state(self, external_identifier: str) -> ReconciliationState | None:
        """The reconciliation state of one payment (or unexpected identifier); None when
        neither a payment nor an outcome names it."""
        with translate_errors():
            return reconciliation.state_for(self._db.conn, external_identifier)

    def row(self, external_identifier: str) -> ReconciliationRow | None:
        """The full reconciliation row of one identifier, or None."""
        with translate_errors():
            return reconciliation.row_for(self._db.conn, external_identifier)

    def reconcile(
        self,
        *,
        state: ReconciliationState | str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Iterator[ReconciliationRow]:
        """Stream the reconciliation, one row per payment and per unexpected identifier.

        :param state: only rows in this state.
        :param since: only rows opened at or after this aware time (a payment: when it was
            registered; an unexpected identifier: its earliest ``paid_at``).
        :param until: only rows opened before this aware time.

        Rows come from a cursor as they are computed (expected payments by identifier, then
        unexpected ones), so memory stays flat however many there are.
        """
        wanted = None if state is None else _enum(ReconciliationState, state, "state")
        with translate_errors():
            cursor = reconciliation.select_rows(
                self._db.conn, state=wanted, since=since, until=until
            )
        return self._stream(cursor, reconciliation.to_row)

    def summary(self) -> list[SummaryRow]:
        """Counts and Decimal totals per currency and state, grouped in SQL."""
        with translate_errors():
            return reconciliation.summary(self._db.conn)
