"""The exceptions queue: the payments a person should look at, and what was decided about each.

The payments in a mismatch (``MISMATCH_STATES``: amount, currency, duplicate, unexpected,
unknown status), grouped by state with their counts, the money received per currency and how
long they have been open; the sync's drift beside them, counted by kind and listed (a missed
notification is reviewed like a mismatch); and the signals whose receivers raised, parked first
then those waiting for their retry, each with the re-run of its payment's owed receivers. Each
payment shows its review (open, acknowledged, resolved, ignored, with the note and who set it)
while it stays in the state it was reviewed in: a payment whose state changed since is open
again. Setting a
status is an operator's action (CSRF, audited with the review in one write).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Final

from flask import render_template, request, url_for
from werkzeug.wrappers import Response as BaseResponse

from payhooks.console.access import console_ledger, current_access
from payhooks.console.acting import begin_action, can_act, done
from payhooks.console.answers import error_page
from payhooks.console.csrf import ActionRefused
from payhooks.console.limits import counted
from payhooks.storage import (
    MISMATCH_STATES,
    DriftKind,
    DriftRow,
    ReconciliationRow,
    from_minor_units,
)
from payhooks.storage.reads import ReviewStatus

if TYPE_CHECKING:
    from payhooks.storage.reads.exception_queue import MismatchCount
    from payhooks.storage.reads.exception_reviews import ExceptionReview

__all__ = ["AGES", "MAX_LISTED", "exceptions", "review"]

#: The ageing buckets: a label and the age a payment reaches it at, youngest first.
AGES: Final = (
    ("under 1 day", timedelta(0)),
    ("1 to 7 days", timedelta(days=1)),
    ("7 to 30 days", timedelta(days=7)),
    ("over 30 days", timedelta(days=30)),
)
#: The most payments the page lists one by one (the counts cover them all).
MAX_LISTED: Final = 500


def age_of(opened_at: datetime, now: datetime) -> str:
    """The ageing bucket of a payment opened at ``opened_at``."""
    age = now - opened_at
    label = AGES[0][0]
    for name, reached in AGES:
        if age >= reached:
            label = name
    return label


@dataclass
class Group:
    """One state's payments: how many, the money received per currency, their ages."""

    state: str
    count: int = 0
    received: dict[str, Decimal] = field(default_factory=dict)
    ages: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True, slots=True)
class Item:
    """One payment in the queue, with the status it shows now."""

    row: ReconciliationRow
    age: str
    status: ReviewStatus
    review: ExceptionReview | None


def _groups(counts: list[MismatchCount]) -> list[Group]:
    """The ledger's counts (grouped in SQL) folded into one group per state."""
    groups: dict[str, Group] = {}
    for found in counts:
        group = groups.setdefault(found.state.value, Group(found.state.value))
        group.count += found.payments
        group.ages[AGES[found.age][0]] += found.payments
        if found.received_amount_minor is not None:
            amount = from_minor_units(found.received_amount_minor, found.currency)
            group.received[found.currency] = group.received.get(found.currency, Decimal(0)) + amount
    return sorted(groups.values(), key=lambda group: group.state)


def exceptions() -> str:
    """``GET /exceptions``: the queue. The rows listed are read alone (the oldest
    :data:`MAX_LISTED`), then the counts, grouped in SQL, which stop at the console's time
    limit (:mod:`.limits`): the page then lists its rows and says where it stopped counting."""
    ledger = console_ledger()
    now = current_access().clock()
    reviews = ledger.console.reviews()
    items = []
    for row in ledger.console.mismatches(MAX_LISTED):
        found = reviews.get(row.external_identifier)
        status = ReviewStatus.OPEN if found is None else found.status_for(row.state.value)
        current = found is not None and found.reviewed_state == row.state.value
        shown = found if current else None
        items.append(Item(row, age_of(row.opened_at, now), status, shown))
    drift_rows: list[tuple[DriftRow, ExceptionReview | None]] = [
        (drifted, reviews.get(drifted.external_identifier))
        for drifted in ledger.service.sync_drift(limit=MAX_LISTED)
    ]
    failing = ledger.signals.failing(limit=MAX_LISTED)
    failing_total, parked = ledger.signals.failing_counts()
    counts = counted(lambda: ledger.console.mismatch_counts(now, [age for _, age in AGES]))
    drift_counts = counted(ledger.service.drift_counts)
    drift: dict[DriftKind, int | None] = (
        dict.fromkeys({row.kind for row, _ in drift_rows})  # the kinds listed, uncounted
        if drift_counts is None
        else dict(drift_counts)
    )
    groups = None if counts is None else _groups(counts)
    return render_template(
        "payhooks_console/exceptions.html",
        groups=groups or [],
        ages=[name for name, _ in AGES],
        items=items,
        total=None if groups is None else sum(group.count for group in groups),
        listed=MAX_LISTED,
        drift=sorted((kind.value, count) for kind, count in drift.items()),
        drift_rows=drift_rows,
        failing=failing,
        failing_total=failing_total,
        parked=parked,
        statuses=list(ReviewStatus),
        can_act=can_act(),
        now=now,
    )


def review(external_identifier: str) -> BaseResponse:
    """``POST /exceptions/<identifier>/review``: set the payment's status, with a note."""
    acting = begin_action("review_exception", external_identifier)
    status = request.form.get("status", "")
    if status not in set(ReviewStatus):
        acting.record("refused: console_bad_form")
        raise ActionRefused(
            400, "console_bad_form", f"status must be one of: {', '.join(ReviewStatus)}."
        )
    ledger = acting.ledger
    row = None if "\x00" in external_identifier else ledger.row(external_identifier)
    if row is None or (row.state not in MISMATCH_STATES and row.drift is None):
        acting.record("not_found")
        return error_page(404, "console_not_found", "This payment is not in the exceptions queue.")
    ledger.console.review(
        external_identifier,
        status,
        reviewed_state=row.state.value,
        who=acting.grant.who,
        role=acting.grant.role.value,
        note=acting.note,
    )
    return done(f"Marked {status}.", url_for(".exceptions"))
