"""The client's record of each creation attempt, so a failed one is never silently pending.

The ledger (``payhooks.storage``) expects a payment before the client asks the service to make
it, so a notification that beats the answer is already expected. If the service then refuses,
or never answers, the ledger's row alone would stay ``pending`` forever and look like a payment
still under way. The ledger has no public way to mark that (see ``docs/service.md``, "What the
ledger lacks"), so the client keeps this small record beside it: one row per attempt, in its own
SQLite file (or in memory), with what became of it.

States: ``sending`` (asked, no answer yet; a crash leaves it so), ``created`` (the service
answered with its id), ``refused`` (the service answered 4xx, or the request was refused before
sending: it was not created), ``uncertain`` (no usable answer or a 5xx: it may exist at the
service; ``payhooks sync``, or a retry with the same idempotency key, will tell).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from payhooks.service.errors import CreationRecordError

__all__ = ["CreationAttempt", "CreationLog", "CreationState"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS creation_attempts (
    id INTEGER PRIMARY KEY,
    external_identifier TEXT NOT NULL,
    kind TEXT NOT NULL,
    idempotency_key TEXT,
    state TEXT NOT NULL,
    service_id TEXT,
    http_status INTEGER,
    error_code TEXT,
    error TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX IF NOT EXISTS creation_attempts_by_reference
    ON creation_attempts (external_identifier, id);
"""
_COLUMNS = (
    "id, external_identifier, kind, idempotency_key, state, service_id, http_status, "
    "error_code, error, started_at, finished_at"
)


class CreationState(StrEnum):
    """What became of one attempt to create a payment at the service."""

    SENDING = "sending"
    CREATED = "created"
    REFUSED = "refused"
    UNCERTAIN = "uncertain"


@dataclass(frozen=True, slots=True)
class CreationAttempt:
    """One row of the record."""

    id: int
    external_identifier: str
    #: ``transaction`` or ``subscription``.
    kind: str
    idempotency_key: str | None
    state: CreationState
    #: The service's id, once created.
    service_id: str | None
    http_status: int | None
    #: The error's stable code (``invalid_request``, ``transport_error``...).
    error_code: str | None
    error: str | None
    started_at: datetime
    finished_at: datetime | None


class CreationLog:
    """Creation attempts in a SQLite file (``":memory:"`` by default: kept for the process).

    Safe to share between threads. Give every client of one merchant the same file to keep the
    history across restarts.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(os.fspath(path), check_same_thread=False)
            self._conn.executescript(_SCHEMA)
        except sqlite3.Error as err:
            raise CreationRecordError(f"The creation record cannot be opened: {err}.") from err

    def close(self) -> None:
        """Close the file. Safe to call twice."""
        self._conn.close()

    def begin(self, external_identifier: str, kind: str, idempotency_key: str | None) -> int:
        """Record an attempt about to be sent; its id."""
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO creation_attempts (external_identifier, kind, idempotency_key, "
                "state, started_at) VALUES (?, ?, ?, ?, ?)",
                (
                    external_identifier,
                    kind,
                    idempotency_key,
                    CreationState.SENDING.value,
                    self._clock().isoformat(),
                ),
            )
            assert cursor.lastrowid is not None
            return cursor.lastrowid

    def finish(
        self,
        attempt_id: int,
        state: CreationState,
        *,
        service_id: str | None = None,
        http_status: int | None = None,
        error_code: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record how attempt ``attempt_id`` ended."""
        with self._write() as conn:
            conn.execute(
                "UPDATE creation_attempts SET state = ?, service_id = ?, http_status = ?, "
                "error_code = ?, error = ?, finished_at = ? WHERE id = ?",
                (
                    state.value,
                    service_id,
                    http_status,
                    error_code,
                    error,
                    self._clock().isoformat(),
                    attempt_id,
                ),
            )

    def latest(self, external_identifier: str) -> CreationAttempt | None:
        """The newest attempt for ``external_identifier``, or None."""
        rows = self._read(
            f"SELECT {_COLUMNS} FROM creation_attempts WHERE external_identifier = ? "  # noqa: S608
            "ORDER BY id DESC LIMIT 1",
            (external_identifier,),
        )
        return next(rows, None)

    def attempts(self, state: CreationState | None = None) -> list[CreationAttempt]:
        """Every attempt, oldest first; only those in ``state`` when given."""
        if state is None:
            return list(self._read(f"SELECT {_COLUMNS} FROM creation_attempts ORDER BY id", ()))  # noqa: S608
        return list(
            self._read(
                f"SELECT {_COLUMNS} FROM creation_attempts WHERE state = ? ORDER BY id",  # noqa: S608
                (CreationState(state).value,),
            )
        )

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One committed write under the lock, its sqlite3 errors as CreationRecordError."""
        with self._lock:
            try:
                with self._conn:  # commits, or rolls back on an exception
                    yield self._conn
            except sqlite3.Error as err:
                raise CreationRecordError(f"The creation record cannot be written: {err}.") from err

    def _read(self, sql: str, params: tuple[object, ...]) -> Iterator[CreationAttempt]:
        with self._lock:
            try:
                rows = self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as err:
                raise CreationRecordError(f"The creation record cannot be read: {err}.") from err
        for row in rows:
            yield CreationAttempt(
                id=row[0],
                external_identifier=row[1],
                kind=row[2],
                idempotency_key=row[3],
                state=CreationState(row[4]),
                service_id=row[5],
                http_status=row[6],
                error_code=row[7],
                error=row[8],
                started_at=datetime.fromisoformat(row[9]),
                finished_at=None if row[10] is None else datetime.fromisoformat(row[10]),
            )
