"""One record whole: a delivery (headers, body, what came of it), a refused request (the start
of its body and what it claims, unverified) and a payment's story, with the notes people left
on it (its exception review and the audit entries that name it).

A body shows only to whom :func:`~.bodies.body_hidden` lets read it, each reading audited;
the rest of a record (a body's size and SHA-256 included) shows to every role. It shows twice,
from the one reading: exactly as its bytes arrived (:func:`~.filters.raw_body`, what was
signed) and, when it is JSON, indented for reading (:func:`~.filters.indented_body`)."""

from __future__ import annotations

from typing import Final

from flask import Response, current_app, render_template

from payhooks.console.access import console_ledger, current_access
from payhooks.console.answers import error_page
from payhooks.console.bodies import body_hidden, sha256_of
from payhooks.console.evidence import evidence_settings, signature_evidence
from payhooks.console.filters import indented_body, raw_body, utc
from payhooks.console.query import MAX_ID
from payhooks.receiver.payloads.named import named_in_start
from payhooks.storage.reads import describe

__all__ = ["NOTES_SHOWN", "delivery", "payment", "refused_request"]

#: The most audit entries a payment's page lists, newest first (the audit log keeps them all).
NOTES_SHOWN: Final = 100


def delivery(delivery_id: int) -> Response | str:
    """``GET /deliveries/<id>``: one delivery, or the 404 page."""
    details = None
    if 1 <= delivery_id <= MAX_ID:  # a larger id cannot exist, and PostgreSQL refuses it
        details = console_ledger().receiver.delivery(delivery_id)
    # A delivery read by id is whole: its body and headers are None only in the log's rows.
    if details is None or details.body is None or details.headers is None:
        return error_page(404, "console_not_found", "There is no delivery with this id.")
    signals = console_ledger().signals
    owed, runs = signals.owed(delivery_id), signals.runs([delivery_id])
    # A pruned delivery keeps no body to show; else the entry is written before the page.
    hidden = None if details.pruned_at else body_hidden(f"delivery {delivery_id}")
    return render_template(
        "payhooks_console/delivery.html",
        delivery=details,
        owed=owed,
        runs=runs,
        raw=None if hidden else raw_body(details.body),
        indented=None if hidden else indented_body(details.body),
        body_hidden=hidden,
        body_sha256=sha256_of(details.body),
        evidence=signature_evidence(
            evidence_settings(current_access().settings, current_app.config),
            details.headers,
            details.body,
            details.received_at,
        ),
    )


def refused_request(rejected_id: int) -> Response | str:
    """``GET /deliveries/refused/<id>``: one refused request, or the 404 page (never kept, or
    pruned since: only the newest are kept).

    Every role that reads the refused log reads this; the kept start of the body only whom
    :func:`~.bodies.body_hidden` lets, as a delivery's. What the body names (a payment's
    identifier, a transaction id: what the delivery log lists of every delivery) is read
    defensively from the kept bytes
    (:func:`~payhooks.receiver.payloads.named.named_in_start`) and shown to every role as a
    claim: the signature did not hold, so it links to a search, never to a payment's page.
    """
    details = None
    if 1 <= rejected_id <= MAX_ID:  # a larger id cannot exist, and PostgreSQL refuses it
        details = console_ledger().receiver.rejected_details(rejected_id)
    if details is None or details.body is None:  # read by id, the body is there
        return error_page(404, "console_not_found", "There is no refused request with this id.")
    hidden = body_hidden(f"refused request {rejected_id}")
    return render_template(
        "payhooks_console/refused_request.html",
        rejected=details,
        raw=None if hidden else raw_body(details.body),
        indented=None if hidden else indented_body(details.body),
        body_hidden=hidden,
        body_sha256=sha256_of(details.body),
        named=named_in_start(details.body),
    )


def payment(external_identifier: str) -> Response | str:
    """``GET /payments/<identifier>``: the payment's reconciliation and its story, or the 404
    page when the ledger knows nothing of it."""
    story = None
    ledger = console_ledger()
    if "\x00" not in external_identifier:  # PostgreSQL text holds no NUL: nothing names it
        story = ledger.story(external_identifier)
    if story is None:
        return error_page(404, "console_not_found", "The ledger knows no payment by this id.")
    review = ledger.console.review_of(external_identifier)
    return render_template(
        "payhooks_console/payment.html",
        story=story,
        describe=lambda entry: describe(entry, when=utc),
        review=review,
        review_status=review and review.status_for(story.row.state.value if story.row else ""),
        notes=ledger.console.audit_for(external_identifier, limit=NOTES_SHOWN),
        owed=ledger.signals.owed(identifier=external_identifier),
    )
