"""The ``deliveries`` table: every authenticated delivery, what became of it, and its body.

A delivery is stored once per ``dedupe_key``: a repeat with the same bytes counts an attempt on
the stored row, a repeat with other bytes (a ``webhook-id`` reused for another notification) is
stored under a key derived from its body. Both are decided by ``INSERT ... ON CONFLICT ... DO
UPDATE ... WHERE``, never by reading first. The statements are plain SQL that PostgreSQL runs as
well (the target's columns qualified in the upsert, which PostgreSQL requires), but for the
spellings :mod:`payhooks.storage.postgresql.dialect` turns: ``%s``, ``chr(10)``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from payhooks.storage.currencies import from_minor_units
from payhooks.storage.encoding import to_json
from payhooks.storage.errors import StorageError
from payhooks.storage.rows import FINISHED_DELIVERY_STATUSES, Delivery, DeliveryStatus
from payhooks.storage.sql import Connection, Cursor
from payhooks.storage.times import from_text, to_text

__all__ = [
    "LISTED",
    "WHOLE",
    "exists",
    "insert",
    "mark",
    "mark_recorded",
    "new_delivery",
    "note_signal_error",
    "select",
    "select_all",
    "to_delivery",
    "to_values",
]

# A finished delivery keeps its status: see Ledger.receiver.mark_delivery.
_FINISHED_SQL = ", ".join(f"'{status}'" for status in sorted(FINISHED_DELIVERY_STATUSES))
_MARK = f"""
    UPDATE deliveries SET status = ?, error = ?, updated_at = ?,
        external_identifier = COALESCE(?, external_identifier)
    WHERE id = ? AND status NOT IN ({_FINISHED_SQL})"""  # noqa: S608 - constants only

# A delivery that recorded an outcome is never pointed at another: the outcome's signals name
# it as the delivery that recorded it.
_MARK_RECORDED = (
    "UPDATE deliveries SET status = ?, error = ?, outcome_id = ?, external_identifier = ?, "
    "updated_at = ? WHERE id = ? AND (outcome_id IS NULL OR outcome_id = ?)"
)

# The receivers' errors of the delivery's signals still owed after a raise, one a line; NULL
# once none is (a retry returned).
# Through the unique (outcome_id, signal) index: a delivery's signals are its outcome's.
_FAILING_ERRORS = (
    "SELECT error FROM owed_signals WHERE outcome_id = (SELECT outcome_id FROM deliveries "
    "WHERE id = ?) AND delivery_id = ? AND sent_at IS NULL AND attempts > 0 "
    "ORDER BY outcome_id, position"
)
_NOTE_SIGNAL_ERROR = "UPDATE deliveries SET signal_error = ?, updated_at = ? WHERE id = ?"

# In the order of Delivery's fields (``amount_minor`` in the place of ``amount``; ``is_new`` is
# not stored), with its outcome's values. The log reads NULL for the headers and body.
_COLUMNS = (
    "d.id, d.dedupe_key, d.reused_key_of, d.received_at, {headers}, d.body_sha256, "
    "length(d.body), d.status, d.error, d.attempts, d.outcome_id, d.signal_error, d.updated_at, "
    "d.pruned_at, d.pruned_into, d.external_identifier, o.payment_status, o.amount_minor, "
    "o.currency FROM deliveries d LEFT JOIN outcomes o ON o.id = d.outcome_id"
)
#: A delivery whole, and one as the log lists it, ``FROM`` included: a ``WHERE`` may follow.
WHOLE = _COLUMNS.format(headers="d.headers, d.body")
LISTED = _COLUMNS.format(headers="NULL, NULL")
_NAMES = tuple(each.name for each in fields(Delivery) if each.name != "is_new")

# A dedupe_key repeated with the same bytes stores nothing new: it counts an attempt and
# returns the row's id and attempts (then the stored row is read; a new row, the common case,
# is known from its arguments and never read back). With other bytes the update's WHERE
# fails, so nothing is returned.
_UPSERT = """
    INSERT INTO deliveries (
        dedupe_key, reused_key_of, received_at, headers, body, body_sha256, updated_at
    )
    VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (dedupe_key) DO UPDATE
        SET attempts = deliveries.attempts + 1, updated_at = excluded.updated_at
        WHERE deliveries.body_sha256 = excluded.body_sha256
    RETURNING id, attempts"""
# The same, when the dedupe key names what was signed rather than the bytes: other bytes under
# it are the same delivery laid out differently, so they count as an attempt too.
_UPSERT_BY_CONTENT = _UPSERT.replace("WHERE deliveries.body_sha256 = excluded.body_sha256", "")
_SELECT = f"SELECT {WHOLE} WHERE d.id = ?"
_SELECT_ALL = f"SELECT {WHOLE} ORDER BY d.id"
_SELECT_STATUS = f"SELECT {WHOLE} WHERE d.status = ? ORDER BY d.id"
# The index ``deliveries_status`` leaves out ``processed`` (most deliveries, which then write no
# entry in it); saying so in the query lets it be used for the others.
_SELECT_INDEXED_STATUS = _SELECT_STATUS.replace(
    "WHERE d.status = ?", "WHERE d.status = ? AND d.status <> 'processed'"
)


def to_delivery(values: tuple[Any, ...], *, is_new: bool = False) -> Delivery:
    """A row of :data:`WHOLE` or :data:`LISTED` as a :class:`Delivery`."""
    row = dict(zip(_NAMES, values, strict=True))
    headers, body, pruned_at, minor = row["headers"], row["body"], row["pruned_at"], row["amount"]
    row |= {
        "received_at": from_text(row["received_at"], column="deliveries.received_at"),
        "headers": None if headers is None else json.loads(headers),
        "body": None if body is None else bytes(body),
        "status": DeliveryStatus(row["status"]),
        "updated_at": from_text(row["updated_at"]),
        "pruned_at": None if pruned_at is None else from_text(pruned_at),
        "amount": None if minor is None else from_minor_units(minor, row["currency"]),
    }
    return Delivery(**row, is_new=is_new)


def to_values(
    body: bytes, headers: Mapping[str, str], received_at: datetime, now: datetime
) -> tuple[bytes, str, dict[str, str], tuple[Any, ...]]:
    """What :func:`insert` stores, made ready before the write lock is taken: the body as
    bytes, its SHA-256 in hex, the headers as a dict, and the row's values."""
    raw = bytes(body)
    digest = hashlib.sha256(raw).hexdigest()
    stored_headers = dict(headers)
    row = (
        to_text(received_at, argument="received_at"),
        to_json(stored_headers),
        raw,
        digest,
        to_text(now, argument="clock()"),
    )
    return raw, digest, stored_headers, row


def insert(
    conn: Connection,
    dedupe_key: str,
    digest: str,
    row: tuple[Any, ...],
    *,
    key_names_content: bool = False,
) -> Delivery | tuple[int, str, int | None]:
    """Store a delivery whose body hashes to ``digest``.

    With ``key_names_content`` (the key is a digest of what was signed, which determines the
    body), other bytes under a known key count one more attempt on the stored row.

    :param row: ``received_at``, ``headers`` (JSON), ``body``, ``body_sha256`` and
        ``updated_at``, as stored.
    :returns: the stored row when this body was stored before under its key (an attempt is
        counted on it); for a new row, its id, the key it was stored under, and the delivery
        whose key it reused (None when none), from which :func:`new_delivery` makes it without
        reading it back.
    :raises StorageError: even the key derived from the body is taken by other bytes.
    """
    key, reused_key_of = dedupe_key, None
    upsert = _UPSERT_BY_CONTENT if key_names_content else _UPSERT
    found = conn.execute(upsert, (key, None, *row)).fetchone()
    if found is None:
        (reused_key_of,) = conn.execute(
            "SELECT id FROM deliveries WHERE dedupe_key = ?", (dedupe_key,)
        ).fetchone()
        key = f"{dedupe_key}#{digest}"
        found = conn.execute(_UPSERT, (key, reused_key_of, *row)).fetchone()
    if found is None:
        raise StorageError(
            f"The dedupe key of delivery {reused_key_of} was reused, and the key "
            "derived from this body is taken by other bytes; the delivery was not "
            "stored."
        )
    delivery_id, attempts = found
    if attempts != 1:  # a known delivery: what is stored counts, not the arguments
        return to_delivery(conn.execute(_SELECT, (delivery_id,)).fetchone())
    return delivery_id, key, reused_key_of


def new_delivery(
    inserted: tuple[int, str, int | None],
    *,
    received_at: datetime,
    headers: dict[str, str],
    body: bytes,
    digest: str,
    now: datetime,
) -> Delivery:
    """The row :func:`insert` just stored, from what it was given (made after the commit, so
    the write lock is held only for SQL)."""
    delivery_id, key, reused_key_of = inserted
    return Delivery(
        id=delivery_id,
        dedupe_key=key,
        reused_key_of=reused_key_of,
        received_at=received_at.astimezone(UTC),
        headers=headers,
        body=body,
        body_sha256=digest,
        body_size=len(body),
        status=DeliveryStatus.RECEIVED,
        error=None,
        attempts=1,
        outcome_id=None,
        signal_error=None,
        updated_at=now.astimezone(UTC),
        is_new=True,
    )


def mark(
    conn: Connection,
    delivery_id: int,
    status: str,
    error: str | None,
    updated_at: str,
    external_identifier: str | None = None,
) -> bool:
    """Set an error status (and the payment the body names, when known) unless the delivery
    already finished; False when nothing changed (finished, or no such delivery: see
    :func:`exists`)."""
    params = (status, error, updated_at, external_identifier, delivery_id)
    return bool(conn.execute(_MARK, params).rowcount)


def mark_recorded(
    conn: Connection,
    delivery_id: int,
    status: str,
    error: str | None,
    outcome_id: int,
    external_identifier: str,
    updated_at: str,
) -> bool:
    """Point the delivery at the outcome it recorded (or that stood before it) and at that
    outcome's payment, with its status; False when there is no such delivery.

    :raises StorageError: the delivery recorded another outcome already (a parser of another
        version reads its body as another).
    """
    params = (status, error, outcome_id, external_identifier, updated_at, delivery_id, outcome_id)
    if conn.execute(_MARK_RECORDED, params).rowcount:
        return True
    if exists(conn, delivery_id):
        raise StorageError(
            f"Delivery {delivery_id} recorded another outcome; it is left pointing at that one."
        )
    return False


def note_signal_error(conn: Connection, delivery_id: int, updated_at: str) -> bool:
    """Bring the delivery's ``signal_error`` up to date with its signals: what their receivers
    raised while any is owed after a raise, one signal's errors a line; NULL once none is.
    False when there is no such delivery."""
    params_of = (delivery_id, delivery_id)
    errors = [row[0] for row in conn.execute(_FAILING_ERRORS, params_of) if row[0]]
    params = ("\n".join(errors) or None, updated_at, delivery_id)
    return bool(conn.execute(_NOTE_SIGNAL_ERROR, params).rowcount)


def exists(conn: Connection, delivery_id: int) -> bool:
    """Whether a delivery with this id is stored."""
    return (
        conn.execute("SELECT 1 FROM deliveries WHERE id = ?", (delivery_id,)).fetchone() is not None
    )


def select(conn: Connection, delivery_id: int) -> Delivery | None:
    """The stored delivery with this id, or None."""
    values = conn.execute(_SELECT, (delivery_id,)).fetchone()
    return None if values is None else to_delivery(values)


def select_all(conn: Connection, status: str | None) -> Cursor:
    """A cursor over the deliveries in the order they arrived (rows for :func:`to_delivery`),
    optionally only those with ``status``."""
    if status is None:
        return conn.execute(_SELECT_ALL)
    if status == DeliveryStatus.PROCESSED:
        return conn.execute(_SELECT_STATUS, (status,))
    return conn.execute(_SELECT_INDEXED_STATUS, (status,))
