"""The ``creation_attempts`` table: each attempt to create an expected payment at the service.

One row per attempt, begun ``sending`` before the request goes out and finished with what
became of it. Beginning is a compare-and-set on the payment's newest attempt, under the
payment's lock: two callers that both saw the same newest attempt cannot both begin one, so a
client that decides from that attempt whether to send never sends twice. A ``created`` attempt
is never changed again. The statements are plain SQL both engines run.

This table is the only record of a payment's creation: whether it failed (``refused`` or
``uncertain``), why and when is what its newest finished attempt says (:func:`failure`), and
what the reconciliation reads (:data:`LATEST_FINISHED_STATE`). A ``sending`` attempt changes
nothing until it ends.
"""

from __future__ import annotations

from typing import Any, Final

from payhooks.storage.sql import Connection
from payhooks.storage.sync_rows import CreationAttempt, CreationFailure, CreationState
from payhooks.storage.times import from_text

__all__ = [
    "COLUMNS",
    "LATEST_FINISHED_STATE",
    "begin",
    "failure",
    "finish",
    "record",
    "select",
    "to_attempt",
]

#: The columns :func:`select` reads, in :class:`CreationAttempt`'s order.
COLUMNS: Final = (
    "id, external_identifier, kind, idempotency_key, state, service_id, http_status, "
    "error_code, error, started_at, finished_at"
)

#: The state of the payment ``p`` names' newest finished attempt when it is ``refused`` or
#: ``uncertain``, else NULL: an SQL expression (the index ``creation_attempts_identifier``).
LATEST_FINISHED_STATE: Final = (
    "NULLIF((SELECT a.state FROM creation_attempts AS a WHERE a.external_identifier = "
    "p.external_identifier AND a.state <> 'sending' ORDER BY a.id DESC LIMIT 1), 'created')"
)
_LATEST_FINISHED = (
    "SELECT state, error_code, error, finished_at FROM creation_attempts "
    "WHERE external_identifier = ? AND state <> 'sending' ORDER BY id DESC LIMIT 1"
)
# An attempt finished as it begins: a failure or success the merchant marks by hand.
_RECORD = (
    "INSERT INTO creation_attempts (external_identifier, kind, state, error, started_at, "
    "finished_at) SELECT external_identifier, kind, ?, ?, ?, ? FROM payments "
    "WHERE external_identifier = ?"
)
_NEWEST = "SELECT MAX(id) FROM creation_attempts WHERE external_identifier = ?"
_INSERT = (
    "INSERT INTO creation_attempts (external_identifier, kind, idempotency_key, state, "
    "started_at) VALUES (?, ?, ?, 'sending', ?) RETURNING id"
)
# What a finish does not give is kept: an uncertain attempt that the service's list showed
# later becomes created and keeps the error of its lost answer.
_FINISH = """
    UPDATE creation_attempts SET
        state = ?,
        service_id = COALESCE(?, service_id),
        http_status = COALESCE(?, http_status),
        error_code = COALESCE(?, error_code),
        error = COALESCE(?, error),
        finished_at = ?
    WHERE id = ? AND state <> 'created'
    RETURNING external_identifier"""


def begin(
    conn: Connection,
    external_identifier: str,
    kind: str,
    idempotency_key: str | None,
    started_at: str,
    *,
    after: int | None,
) -> int | None:
    """A new ``sending`` attempt, when the payment's newest attempt is still ``after`` (None:
    it has none); its id, or None when another attempt began since. The caller holds the
    payment's lock."""
    (newest,) = conn.execute(_NEWEST, (external_identifier,)).fetchone()
    if newest != after:
        return None
    attempt_id: int = conn.execute(
        _INSERT, (external_identifier, kind, idempotency_key, started_at)
    ).fetchone()[0]
    return attempt_id


def finish(
    conn: Connection,
    attempt_id: int,
    state: CreationState,
    values: tuple[str | None, int | None, str | None, str | None],
    finished_at: str,
) -> str | None:
    """Record how an attempt ended: ``values`` are its service id, HTTP status, error code and
    error (None keeps what is stored). The attempt's ``external_identifier``, or None when
    there is no such attempt or it was already ``created``."""
    row = conn.execute(_FINISH, (state.value, *values, finished_at, attempt_id)).fetchone()
    return None if row is None else str(row[0])


def record(
    conn: Connection, external_identifier: str, state: CreationState, error: str | None, at: str
) -> bool:
    """A finished attempt, begun and ended ``at``; False when no payment has the identifier.
    The caller holds the payment's lock."""
    return bool(conn.execute(_RECORD, (state.value, error, at, at, external_identifier)).rowcount)


def failure(conn: Connection, external_identifier: str) -> CreationFailure | None:
    """The payment's creation failure: its newest finished attempt, when that one was
    ``refused`` or ``uncertain``; the reason is ``"<error_code>: <error>"``."""
    row = conn.execute(_LATEST_FINISHED, (external_identifier,)).fetchone()
    if row is None or row[0] == CreationState.CREATED:
        return None
    state, code, error, failed_at = row
    reason = ": ".join(part for part in (code, error) if part) or state
    return CreationFailure(
        external_identifier, state == CreationState.REFUSED, reason, from_text(failed_at)
    )


def select(
    conn: Connection, external_identifier: str | None, state: CreationState | None
) -> list[tuple[Any, ...]]:
    """The attempts of one payment (or of all, for None), only those in ``state`` when given;
    oldest first."""
    where, params = [], []
    if external_identifier is not None:
        where.append("external_identifier = ?")
        params.append(external_identifier)
    if state is not None:
        where.append("state = ?")
        params.append(state.value)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    sql = f"SELECT {COLUMNS} FROM creation_attempts{clause} ORDER BY id"  # noqa: S608
    return list(conn.execute(sql, params).fetchall())


def to_attempt(row: tuple[Any, ...]) -> CreationAttempt:
    """One row of :func:`select` as a :class:`CreationAttempt`."""
    ident, identifier, kind, key, state, service_id, status, code, error, started, ended = row
    return CreationAttempt(
        id=ident,
        external_identifier=identifier,
        kind=kind,
        idempotency_key=key,
        state=CreationState(state),
        service_id=service_id,
        http_status=status,
        error_code=code,
        error=error,
        started_at=from_text(started),
        finished_at=None if ended is None else from_text(ended),
    )
