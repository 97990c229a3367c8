"""One record whole: a delivery (headers, body, what came of it) and a payment's story, with
the notes people left on it (its exception review and the audit entries that name it)."""

from __future__ import annotations

from typing import Final

from flask import Response, current_app, render_template

from payhooks.receiver.web.console.access import console_ledger, current_access
from payhooks.receiver.web.console.answers import error_page
from payhooks.receiver.web.console.evidence import evidence_settings, signature_evidence
from payhooks.receiver.web.console.filters import pretty_body
from payhooks.receiver.web.console.query import MAX_ID

__all__ = ["NOTES_SHOWN", "delivery", "payment"]

#: The most audit entries a payment's page lists, newest first (the audit log keeps them all).
NOTES_SHOWN: Final = 100


def delivery(delivery_id: int) -> Response | str:
    """``GET /deliveries/<id>``: one delivery, or the 404 page."""
    details = None
    if 1 <= delivery_id <= MAX_ID:  # a larger id cannot exist, and PostgreSQL refuses it
        details = console_ledger().receiver.delivery_details(delivery_id)
    if details is None:
        return error_page(404, "console_not_found", "There is no delivery with this id.")
    body, is_json = pretty_body(details.body)
    return render_template(
        "payhooks_console/delivery.html",
        delivery=details,
        body=body,
        body_is_json=is_json,
        evidence=signature_evidence(
            evidence_settings(current_access().settings, current_app.config),
            details.headers,
            details.body,
            details.received_at,
        ),
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
        review=review,
        review_status=review and review.status_for(story.row.state.value if story.row else ""),
        notes=ledger.console.audit_for(external_identifier, limit=NOTES_SHOWN),
    )
