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

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import islice
from typing import Final

from flask import render_template, request, url_for
from werkzeug.wrappers import Response as BaseResponse

from payhooks.receiver.web.console.access import console_ledger, current_access
from payhooks.receiver.web.console.acting import begin_action, can_act, done
from payhooks.receiver.web.console.answers import error_page
from payhooks.receiver.web.console.csrf import ActionRefused
from payhooks.storage import (
    MISMATCH_STATES,
    DriftRow,
    ExceptionReview,
    ReconciliationRow,
    ReviewStatus,
    from_minor_units,
)

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


def _groups(rows: list[ReconciliationRow], now: datetime) -> list[Group]:
    groups: dict[str, Group] = {}
    for row in rows:
        group = groups.setdefault(row.state.value, Group(row.state.value))
        group.count += 1
        group.ages[age_of(row.opened_at, now)] += 1
        if row.received_amount_minor is not None:
            currency = row.received_currency or row.currency
            amount = from_minor_units(row.received_amount_minor, currency)
            group.received[currency] = group.received.get(currency, Decimal(0)) + amount
    return sorted(groups.values(), key=lambda group: group.state)


def exceptions() -> str:
    """``GET /exceptions``: the queue."""
    ledger = console_ledger()
    now = current_access().clock()
    rows = list(ledger.reconcile(state=MISMATCH_STATES))
    reviews = ledger.console.reviews()
    items = []
    for row in islice(sorted(rows, key=lambda r: r.opened_at), MAX_LISTED):
        found = reviews.get(row.external_identifier)
        status = ReviewStatus.OPEN if found is None else found.status_for(row.state.value)
        current = found is not None and found.reviewed_state == row.state.value
        shown = found if current else None
        items.append(Item(row, age_of(row.opened_at, now), status, shown))
    drift: defaultdict[str, int] = defaultdict(int)
    drift_rows: list[tuple[DriftRow, ExceptionReview | None]] = []
    for drifted in ledger.service.sync_drift():
        drift[drifted.kind.value] += 1
        if len(drift_rows) < MAX_LISTED:
            found = reviews.get(drifted.external_identifier)
            drift_rows.append((drifted, found))
    failing = ledger.signals.failing(limit=MAX_LISTED)
    failing_total, parked = ledger.signals.failing_counts()
    return render_template(
        "payhooks_console/exceptions.html",
        groups=_groups(rows, now),
        ages=[name for name, _ in AGES],
        items=items,
        total=len(rows),
        listed=MAX_LISTED,
        drift=sorted(drift.items()),
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
