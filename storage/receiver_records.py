"""The receiver's side of the ledger, ``Ledger.receiver``: deliveries and what came of them,
rejected deliveries, customer returns."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import payhooks.storage.deliveries as deliveries
import payhooks.storage.outcomes as outcomes
import payhooks.storage.reads.delivery_log as delivery_log
import payhooks.storage.rejected_deliveries as rejected_deliveries
import payhooks.storage.returns as returns
from payhooks.storage.checks import check_amount, check_delivery, enum_member, markable_status
from payhooks.storage.engines import Engine
from payhooks.storage.errors import UnknownDeliveryError
from payhooks.storage.payment_states import Refresh
from payhooks.storage.reads.delivery_log import DeliveryFilter, LogPage, RejectedDelivery
from payhooks.storage.records import Outcome
from payhooks.storage.rows import Delivery, DeliveryStatus, RecordedOutcome, ReturnKind
from payhooks.storage.times import Clock, to_text

__all__ = ["ReceiverRecords"]


class ReceiverRecords:
    """Deliveries and what came of them, rejected deliveries and returns.

    Made by :class:`~payhooks.storage.Ledger` over its engine, write protocol, clock, refresh
    and bounds (``max_rejected``, ``max_returns``: the ledger's arguments of those names).
    """

    def __init__(
        self,
        engine: Engine,
        write: Callable[..., AbstractContextManager[Any]],
        clock: Clock,
        refresh: Refresh,
        max_rejected: int,
        max_returns: int,
    ) -> None:
        self._engine, self._write, self._read = engine, write, engine.read
        self._clock, self._refresh = clock, refresh
        self._max_rejected, self._max_returns = max_rejected, max_returns

    def _now(self, moment: datetime | None = None, argument: str = "clock()") -> str:
        return to_text(self._clock() if moment is None else moment, argument=argument)

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
        """Store an authenticated delivery, committed at once or with ``Ledger.transaction``.

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
        now = self._now()
        with self._write() as conn:
            if deliveries.mark(conn, delivery_id, marked.value, error, now, external_identifier):
                if external_identifier is not None:
                    self._refresh(conn, external_identifier, now)
                return True
            if deliveries.exists(conn, delivery_id):
                return False
            raise UnknownDeliveryError(delivery_id)

    def delivery(self, delivery_id: int) -> Delivery | None:
        """The stored delivery with this id, whole (headers, body, outcome), or None."""
        with self._read() as conn:
            return deliveries.select(conn, delivery_id)

    def deliveries(self, status: DeliveryStatus | str | None = None) -> Iterator[Delivery]:
        """Stored deliveries as they arrived, or those with ``status``; streamed (reprocess)."""
        wanted = None if status is None else enum_member(DeliveryStatus, status, "status").value
        return self._engine.stream(
            lambda conn: deliveries.select_all(conn, wanted), deliveries.to_delivery
        )

    # -- the delivery log: read-only, newest first, for people ------------------------------

    def delivery_log(
        self, wanted: DeliveryFilter | None = None, *, before_id: int | None = None, limit: int = 50
    ) -> LogPage[Delivery]:
        """A page of the deliveries ``wanted`` shows (all without it), newest first, without
        their headers and body (None: a page never loads them): those with an id below
        ``before_id`` when given, at most ``limit`` (1 to 1000). The page's ``next_before_id``
        reads the next one; rows that arrive meanwhile never shift it.

        :raises ValueError: a ``limit`` or ``before_id`` out of range.
        """
        delivery_log.check_page(before_id, limit)
        with self._read() as conn:
            return delivery_log.select_page(conn, wanted, before_id, limit)

    def count_deliveries(self, wanted: DeliveryFilter | None = None) -> int:
        """How many deliveries ``wanted`` shows (all without it), on every page."""
        with self._read() as conn:
            return delivery_log.count_deliveries(conn, wanted)

    def rejected_log(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> LogPage[RejectedDelivery]:
        """A page of the refused requests kept (the newest ``max_rejected``), received from
        ``since`` up to, not including, ``until``; paged as :meth:`delivery_log`.

        :raises ValueError: a naive time, a ``limit`` or ``before_id`` out of range.
        """
        delivery_log.check_times(since, until)
        delivery_log.check_page(before_id, limit)
        with self._read() as conn:
            return delivery_log.select_rejected_page(conn, since, until, before_id, limit)

    def rejected_details(self, rejected_id: int) -> RejectedDelivery | None:
        """One refused request with the start of its body kept, or None when no such row is
        kept: never stored, or pruned since (only the newest are kept)."""
        with self._read() as conn:
            return delivery_log.select_rejected(conn, rejected_id)

    def count_rejected(
        self, *, since: datetime | None = None, until: datetime | None = None
    ) -> int:
        """How many refused requests :meth:`rejected_log` shows, on every page."""
        delivery_log.check_times(since, until)
        with self._read() as conn:
            return delivery_log.count_rejected(conn, since, until)

    # -- refused requests ------------------------------------------------------------------

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
        now = self._now()
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

    def outcome(self, outcome_id: int) -> Outcome | None:
        """The stored outcome ``outcome_id``, as it was recorded, or None."""
        with self._read() as conn:
            return outcomes.select(conn, outcome_id)

    def outcome_identifier(self, outcome_id: int) -> str | None:
        """The ``external_identifier`` of the stored outcome ``outcome_id``, or None: the payment
        a finished delivery's redelivery is answered about, without parsing its body again."""
        with self._read() as conn:
            return outcomes.identifier(conn, outcome_id)

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
