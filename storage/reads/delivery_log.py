"""The delivery log: deliveries and refused requests as a person looks them through.

Read-only queries for the console and the browser, newest first, in pages by id (keyset: a page
ends at an id, the next starts below it, so rows arriving meanwhile never shift a page), with a
count for the same filter. The statements are plain SQL both engines run as written (``?``
placeholders, ``length`` of a ``BLOB``/``bytea`` counting bytes on each); a filter adds
constant fragments and never splices a value into the text.

A time window reads the index on ``received_at`` each table has (``deliveries_received``,
``rejected_deliveries_received``): exact at its edges whatever order rows were stored in (an
explicit, earlier ``received_at``; a clock stepped back), and its cost follows the window's
rows, not the table's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Final, Generic, TypeVar

from payhooks.storage.checks import enum_member
from payhooks.storage.deliveries import LISTED, to_delivery
from payhooks.storage.reads.log_search import DeliveryErrorCode, error_clause, text_clause
from payhooks.storage.rejected_deliveries import REJECTED_BODY_BYTES
from payhooks.storage.rows import Delivery, DeliveryStatus
from payhooks.storage.sql import Connection
from payhooks.storage.times import from_text, to_text

__all__ = [
    "MAX_PAGE_SIZE",
    "DeliveryFilter",
    "LogPage",
    "RejectedDelivery",
    "check_page",
    "check_times",
    "count_deliveries",
    "count_rejected",
    "select_page",
    "select_rejected",
    "select_rejected_page",
]

#: The most rows one page holds.
MAX_PAGE_SIZE: Final = 1000

_T = TypeVar("_T")

# In the order of RejectedDelivery's fields, ``FROM`` included; the log reads NULL for the body.
_REJECTED = "id, received_at, remote_addr, reason, body_size, {body} FROM rejected_deliveries"
_REJECTED_LISTED = _REJECTED.format(body="NULL")


@dataclass(frozen=True, slots=True, init=False)
class DeliveryFilter:
    """Which deliveries a log shows; every part left empty shows all.

    :param statuses: only deliveries with one of these statuses.
    :param since: only those received at or after this aware time.
    :param until: only those received before this aware time.
    :param external_identifier: only those about this payment (its outcome's, or the one a
        refused body names).
    :param payment_status: only those whose outcome has this status code (``PS``...).
    :param error: only those with this :class:`DeliveryErrorCode`.
    :param text: the free-text search: a payment identifier starting with it, this delivery
        key, or the service's transaction id of the payments whose deliveries it finds (see
        :func:`~payhooks.storage.reads.log_search.text_clause`).
    :raises ValueError: an unknown status or error code, a naive time, or an empty or NUL
        text.
    """

    statuses: frozenset[DeliveryStatus] = frozenset()
    since: datetime | None = None
    until: datetime | None = None
    external_identifier: str | None = None
    payment_status: str | None = None
    error: DeliveryErrorCode | None = None
    text: str | None = None

    def __init__(
        self,
        statuses: Iterable[DeliveryStatus | str] = (),
        since: datetime | None = None,
        until: datetime | None = None,
        external_identifier: str | None = None,
        *,
        payment_status: str | None = None,
        error: DeliveryErrorCode | str | None = None,
        text: str | None = None,
    ) -> None:
        wanted = frozenset(enum_member(DeliveryStatus, s, "statuses") for s in statuses)
        check_times(since, until)
        for value, argument in ((payment_status, "payment_status"), (text, "text")):
            if value is not None and (not isinstance(value, str) or not value or "\x00" in value):
                raise ValueError(f"{argument} must be non-empty text without NUL; got {value!r}")
        object.__setattr__(self, "statuses", wanted)
        object.__setattr__(self, "since", since)
        object.__setattr__(self, "until", until)
        object.__setattr__(self, "external_identifier", external_identifier)
        object.__setattr__(self, "payment_status", payment_status)
        object.__setattr__(
            self, "error", None if error is None else enum_member(DeliveryErrorCode, error, "error")
        )
        object.__setattr__(self, "text", text)


@dataclass(frozen=True, slots=True)
class RejectedDelivery:
    """A request refused before it was stored as a delivery (a signature that did not hold):
    the trace ``rejected_deliveries`` keeps.

    Nobody vouches for its bytes: the signature did not hold, so anyone could have sent them.
    Show them as evidence of a refusal, never as a payment's word.
    """

    #: How much of a refused body is kept: its first bytes, this many at most.
    KEPT_BYTES: ClassVar[int] = REJECTED_BODY_BYTES

    id: int
    received_at: datetime
    remote_addr: str | None
    #: The refusal's code (``invalid_signature``...).
    reason: str
    #: The whole body's length in bytes (only its start is kept).
    body_size: int
    #: The first :attr:`KEPT_BYTES` of the body
    #: (all of it when ``body_size`` is no larger); None when not read (the log).
    body: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class LogPage(Generic[_T]):
    """A page of a log, newest first."""

    rows: tuple[_T, ...]
    #: The ``before_id`` that reads the next page; None when this one is the last.
    next_before_id: int | None


def check_times(since: datetime | None, until: datetime | None) -> None:
    """:raises ValueError: ``since`` or ``until`` is naive (its zone would be a guess)."""
    for moment, argument in ((since, "since"), (until, "until")):
        if moment is not None:
            to_text(moment, argument=argument)


def check_page(before_id: int | None, limit: int) -> None:
    """:raises ValueError: a limit outside 1 to :data:`MAX_PAGE_SIZE`, or a ``before_id``
    below 1."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValueError(f"limit must be an int from 1 to {MAX_PAGE_SIZE}; got {limit!r}")
    if before_id is not None and (
        isinstance(before_id, bool) or not isinstance(before_id, int) or before_id < 1
    ):
        raise ValueError(f"before_id must be an int of 1 or more; got {before_id!r}")


def _where(
    conn: Connection, wanted: DeliveryFilter | None, before_id: int | None = None
) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause of a filter (empty for none) and its parameters (``conn``: where
    the text search looks a transaction id up first)."""
    clauses: list[str] = []
    params: list[Any] = []
    if wanted is not None:
        if wanted.statuses:
            clauses.append(f"d.status IN ({', '.join('?' for _ in wanted.statuses)})")
            params.extend(sorted(status.value for status in wanted.statuses))
            if DeliveryStatus.PROCESSED not in wanted.statuses:
                # Lets the partial index ``deliveries_status`` (which leaves processed out) serve.
                clauses.append("d.status <> 'processed'")
        _times("d.", wanted.since, wanted.until, clauses, params)
        if wanted.external_identifier is not None:
            clauses.append("d.external_identifier = ?")
            params.append(wanted.external_identifier)
        if wanted.payment_status is not None:
            clauses.append(
                "EXISTS (SELECT 1 FROM outcomes c WHERE c.id = d.outcome_id"
                " AND c.payment_status = ?)"
            )
            params.append(wanted.payment_status)
        if wanted.error is not None:
            error_clause(wanted.error, clauses, params)
        if wanted.text is not None:
            text_clause(conn, wanted.text, clauses, params)
    if before_id is not None:
        clauses.append("d.id < ?")
        params.append(before_id)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _times(
    prefix: str,
    since: datetime | None,
    until: datetime | None,
    clauses: list[str],
    params: list[Any],
) -> None:
    """A window's clauses on ``received_at`` (``prefix``: the table's alias and a dot, or
    nothing), which its table's index serves: ``since`` included, ``until`` excluded."""
    if since is not None:
        clauses.append(f"{prefix}received_at >= ?")
        params.append(to_text(since, argument="since"))
    if until is not None:
        clauses.append(f"{prefix}received_at < ?")
        params.append(to_text(until, argument="until"))


def _paged(rows: list[_T], limit: int, last_id: int | None) -> LogPage[_T]:
    """A page from up to ``limit + 1`` rows: the extra one only says that more remain."""
    more = len(rows) > limit
    return LogPage(rows=tuple(rows[:limit]), next_before_id=last_id if more else None)


def select_page(
    conn: Connection, wanted: DeliveryFilter | None, before_id: int | None, limit: int
) -> LogPage[Delivery]:
    """A page of deliveries without their headers and body, newest first, below
    ``before_id`` when given."""
    where, params = _where(conn, wanted, before_id)
    sql = f"SELECT {LISTED}{where} ORDER BY d.id DESC LIMIT ?"
    rows = [to_delivery(tuple(values)) for values in conn.execute(sql, (*params, limit + 1))]
    return _paged(rows, limit, rows[limit - 1].id if len(rows) > limit else None)


def count_deliveries(conn: Connection, wanted: DeliveryFilter | None) -> int:
    """How many deliveries the filter shows, on every page."""
    where, params = _where(conn, wanted)
    sql = f"SELECT count(*) FROM deliveries d{where}"  # noqa: S608 - constant fragments only
    count: int = conn.execute(sql, params).fetchone()[0]
    return count


def _rejected_where(
    since: datetime | None, until: datetime | None, before_id: int | None = None
) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause of a window of refused requests (empty for none) and its
    parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    _times("", since, until, clauses, params)
    if before_id is not None:
        clauses.append("id < ?")
        params.append(before_id)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _to_rejected(values: tuple[Any, ...]) -> RejectedDelivery:
    rejected_id, received_at, remote_addr, reason, body_size, body = values
    return RejectedDelivery(
        id=rejected_id,
        received_at=from_text(received_at, column="rejected_deliveries.received_at"),
        remote_addr=remote_addr,
        reason=reason,
        body_size=body_size,
        body=None if body is None else bytes(body),
    )


def select_rejected_page(
    conn: Connection,
    since: datetime | None,
    until: datetime | None,
    before_id: int | None,
    limit: int,
) -> LogPage[RejectedDelivery]:
    """A page of refused requests without their bodies, newest first, below ``before_id``
    when given."""
    where, params = _rejected_where(since, until, before_id)
    sql = f"SELECT {_REJECTED_LISTED}{where} ORDER BY id DESC LIMIT ?"
    rows = [_to_rejected(tuple(values)) for values in conn.execute(sql, (*params, limit + 1))]
    return _paged(rows, limit, rows[limit - 1].id if len(rows) > limit else None)


def select_rejected(conn: Connection, rejected_id: int) -> RejectedDelivery | None:
    """One refused request with the start of its body, or None (never kept, or pruned)."""
    sql = f"SELECT {_REJECTED.format(body='body')} WHERE id = ?"
    values = conn.execute(sql, (rejected_id,)).fetchone()
    return None if values is None else _to_rejected(tuple(values))


def count_rejected(conn: Connection, since: datetime | None, until: datetime | None) -> int:
    """How many refused requests are kept between ``since`` and ``until``."""
    where, params = _rejected_where(since, until)
    sql = f"SELECT count(*) FROM rejected_deliveries{where}"  # noqa: S608
    count: int = conn.execute(sql, params).fetchone()[0]
    return count
