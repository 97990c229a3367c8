"""One sync: page through ``GET /v4/transactions`` into the ledger, then count the drift.

Why it is shaped so:

- **Bounded memory.** One page is held at a time: it is mapped, written with the cursor after
  it in one ledger transaction, and dropped. The drift is computed by SQL afterwards and
  streamed (:meth:`payhooks.storage.Ledger.sync_drift`), never collected. What grows with the
  list is the client's set of cursors already seen (its loop guard): one hash a page.
  ``max_pages`` and ``max_duration`` bound a run, so a service answering a new cursor forever,
  however fast or slowly, is not followed forever: past either, the run stops ``interrupted``
  with the reason, and the next one resumes from its cursor. The unknown status strings a
  report names are the first ``max_unknown_statuses`` seen; items with any other are only
  counted (each is ``unknown_status`` drift in the ledger all the same). An item the ledger
  cannot store is recorded as drift and the page goes on.
- **Safe to repeat, and resumable.** Items are upserted by the service's id, so a page read
  twice changes nothing. The run's cursor moves in the transaction that stores the page, so a
  run stopped by an error or Ctrl-C keeps every page it recorded, and the next sync goes on
  from the cursor, passed back exactly as the service gave it. A run that completed is not
  resumed: the list has no "changed since" filter, so only a pass from the first page sees a
  status that changed on an old transaction.
- **It never settles.** The list is not signed like a notification: what it says is stored
  beside the outcomes and only compared. A missed notification is flagged for a person, who
  asks the service to send it again (the interface shows no way to; the sandbox has one,
  ``payhooks sandbox resend``), and the notification, verified, settles it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from payhooks.service.client import ServiceClient, Transaction
from payhooks.service.errors import MalformedResponseError, ServiceError, ServiceResponseError
from payhooks.service.sync.status_map import DEFAULT_SYNC_STATUS_MAP, check_status_map, state_for
from payhooks.storage import (
    DriftKind,
    Ledger,
    ListedTransaction,
    PaymentState,
    StorageError,
)

if TYPE_CHECKING:
    from payhooks.storage.sync_rows import SyncRun

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_DURATION",
    "DEFAULT_MAX_PAGES",
    "DEFAULT_MAX_UNKNOWN_STATUSES",
    "SyncInterruptedError",
    "SyncProgress",
    "SyncReport",
    "sync_transactions",
]

#: How long an expected payment may be absent from the service's list before a complete sync
#: calls it ``missing_at_service`` (``PAYHOOKS_SYNC_MAX_AGE``).
DEFAULT_MAX_AGE = timedelta(hours=24)
#: The most pages one run reads (2 x 10^6 transactions at 100 a page); the next run resumes
#: there.
DEFAULT_MAX_PAGES = 20_000
#: The longest one run goes on asking for pages; the next run resumes where it stopped.
DEFAULT_MAX_DURATION = timedelta(hours=1)
#: The most distinct unknown status strings one report names (each at most 200 characters, as
#: the ledger stores them); items carrying any other are counted in ``other_unknown``.
DEFAULT_MAX_UNKNOWN_STATUSES = 100


@dataclass(frozen=True, slots=True)
class SyncProgress:
    """Where a running sync is, after each page (what a terminal shows)."""

    run_id: int
    pages: int
    items: int
    resumed: bool


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What one call of :func:`sync_transactions` did and found."""

    run: SyncRun
    #: Pages and items read by this call (a resumed run's earlier pages are in ``run``).
    pages: int
    items: int
    resumed: bool
    #: Status strings the map did not know, with how many items carried each (this call): the
    #: first ``max_unknown_statuses`` distinct ones seen.
    unknown_statuses: Mapping[str, int]
    #: Drift rows in the ledger after the sync, by kind.
    drift: Mapping[DriftKind, int]
    #: Items whose status the map did not know and :attr:`unknown_statuses` does not name (it
    #: was full): counted, not kept.
    other_unknown: int = 0

    @property
    def has_drift(self) -> bool:
        return any(self.drift.values())


class SyncInterruptedError(ServiceError):
    """The sync stopped on an error; the pages recorded before it are kept, and the next sync
    resumes from the last one. ``report`` says how far it got; the cause is chained."""

    code = "sync_interrupted"

    def __init__(self, message: str, report: SyncReport, *, resumable: bool = True) -> None:
        super().__init__(message)
        self.report = report
        #: False when the service's answer itself was refused: resuming would ask for it again.
        self.resumable = resumable


def _resumable(err: BaseException) -> bool:
    """Whether asking again from the same cursor may go better: not when the answer was refused
    (malformed, too large, a loop) or the service refused the request itself (a 4xx other than
    the token's or the rate's)."""
    if isinstance(err, ServiceResponseError):
        return err.status >= 500 or err.status in (401, 403, 429)
    return not isinstance(err, MalformedResponseError) and getattr(err, "code", "") != "cursor_loop"


def _listed(item: Transaction, status_map: Mapping[str, PaymentState]) -> ListedTransaction:
    """An item of the list (assumed to be section 2.3's object, plus the sandbox's ``amount``
    and ``currency`` when present) as the ledger stores it."""
    currency = item.extra.get("currency")
    amount = item.extra.get("amount")
    return ListedTransaction(
        transaction_id=item.id,
        external_identifier=item.external_identifier,
        status=item.status,
        state=state_for(status_map, item.status),
        currency=currency if isinstance(currency, str) else None,
        amount_minor=amount if type(amount) is int else None,
    )


def sync_transactions(
    client: ServiceClient,
    ledger: Ledger,
    *,
    status_map: Mapping[str, PaymentState | str] | None = None,
    max_age: timedelta = DEFAULT_MAX_AGE,
    limit: int | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
    max_duration: timedelta = DEFAULT_MAX_DURATION,
    max_unknown_statuses: int = DEFAULT_MAX_UNKNOWN_STATUSES,
    resume: bool = True,
    progress: Callable[[SyncProgress], None] | None = None,
) -> SyncReport:
    """Read the service's transaction list into ``ledger`` and report the drift.

    :param status_map: the service's status strings and the states they mean
        (:data:`~payhooks.service.sync.DEFAULT_SYNC_STATUS_MAP` by default).
    :param max_age: an expected payment older than this that the complete list lacks is
        ``missing_at_service``.
    :param limit: the page size asked for (the service's default when None).
    :param max_pages: the most pages this call reads; past them it stops, resumable.
    :param max_duration: how long this call goes on asking for pages, checked after each page
        (so one page's request, bounded by the client's timeout, may run past it); past it the
        call stops, resumable.
    :param max_unknown_statuses: the most distinct unknown status strings the report names;
        items with others are counted in ``other_unknown``.
    :param resume: go on from where an unfinished sync stopped (True), or start over.
    :param progress: called after each page recorded.
    :raises SyncInterruptedError: the service or the ledger failed part way; what was recorded
        stays, and the run is ``interrupted`` with the reason.
    :raises ValueError: a bad ``status_map``, ``max_age``, ``max_pages``, ``max_duration`` or
        ``max_unknown_statuses`` (before anything is asked).
    """
    started = time.monotonic()
    if max_pages < 1:
        raise ValueError(f"max_pages must be at least 1, not {max_pages!r}")
    if max_duration <= timedelta(0):
        raise ValueError(f"max_duration must be positive, not {max_duration!r}")
    if max_unknown_statuses < 0:
        raise ValueError(f"max_unknown_statuses must be 0 or more, not {max_unknown_statuses!r}")
    limit_seconds = max_duration.total_seconds()
    mapping = check_status_map(DEFAULT_SYNC_STATUS_MAP if status_map is None else status_map)
    run = ledger.service.begin_sync(max_age=max_age, resume=resume)
    resumed = run.pages > 0
    pages = items = other_unknown = 0
    unknown: Counter[str] = Counter()

    def report(current: SyncRun, drift: Mapping[DriftKind, int]) -> SyncReport:
        return SyncReport(current, pages, items, resumed, dict(unknown), drift, other_unknown)

    try:
        if not (resumed and run.next_cursor is None):  # else: read to its end already
            for page in client.transaction_pages(limit=limit, cursor=run.next_cursor):
                listed = [_listed(item, mapping) for item in page.items]
                for status in (i.status for i in listed if i.state is PaymentState.UNKNOWN):
                    if status in unknown or len(unknown) < max_unknown_statuses:
                        unknown[status] += 1
                    else:
                        other_unknown += 1
                items += ledger.service.record_service_page(run.id, listed, page.next_cursor)
                pages += 1
                if progress is not None:
                    progress(SyncProgress(run.id, run.pages + pages, run.items + items, resumed))
                if page.next_cursor is None:
                    continue
                if pages >= max_pages:
                    raise ServiceError(
                        f"this run read {pages} page(s), its most", code="too_many_pages"
                    )
                if (elapsed := time.monotonic() - started) >= limit_seconds:
                    raise ServiceError(
                        f"this run read {pages} page(s) in {elapsed:.0f} s, past its time "
                        f"limit of {limit_seconds:g} s",
                        code="run_time_limit",
                    )
    except (ServiceError, StorageError, KeyboardInterrupt) as err:
        reason = "interrupted" if isinstance(err, KeyboardInterrupt) else str(err).rstrip(".")
        try:
            stopped = ledger.service.end_sync(run.id, error=reason)
        except StorageError:
            stopped = run
        if isinstance(err, KeyboardInterrupt):
            raise
        resumable = _resumable(err)
        raise SyncInterruptedError(
            f"The sync stopped after {stopped.pages} page(s) ({reason}); what it recorded is kept"
            + (
                ", and the next sync resumes there."
                if resumable
                else ", but resuming asks for that answer again: --restart starts from the first "
                "page."
            ),
            report(stopped, {}),
            resumable=resumable,
        ) from err
    finished = ledger.service.end_sync(run.id)
    drift: Counter[DriftKind] = Counter()
    for row in ledger.service.sync_drift():
        drift[row.kind] += 1
    return report(finished, dict(drift))
