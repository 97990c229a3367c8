"""A payment's page shows the notes people left on it: its exception review (the status it
shows now, the note, who and when) and the audit entries whose target is this payment, every
one escaped; on each engine."""

from __future__ import annotations

from decimal import Decimal

import pytest
from flask.testing import FlaskClient

from payhooks.storage import Ledger
from tests.support.console_actions import OPERATOR, VIEWER, token
from tests.support.factories import make_outcome, record

QUEUE = "/console/exceptions"
PAGE = "/console/payments/order-1"


@pytest.fixture
def short_payment(ledger: Ledger) -> str:
    """order-1: 25.00 CNY registered, 20.00 received: an amount_mismatch."""
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, make_outcome(amount=Decimal("20.00"), amount_minor=2000))
    return "order-1"


def _review(client: FlaskClient, status: str, note: str) -> None:
    form = {"csrf_token": token(client, QUEUE), "status": status, "note": note}
    answer = client.post(f"{QUEUE}/order-1/review", data=form, headers=OPERATOR)
    assert answer.status_code == 303


def _page(client: FlaskClient) -> str:
    answer = client.get(PAGE, headers=VIEWER)
    assert answer.status_code == 200
    return answer.get_data(as_text=True)


def test_the_review_and_every_entry_naming_the_payment_are_shown_newest_first(
    client: FlaskClient, ledger: Ledger, short_payment: str
) -> None:
    _review(client, "acknowledged", "asked the customer")
    _review(client, "resolved", "refund sent")
    ledger.console.audit(
        who="bo", role="operator", action="reprocess", result="processed", target="order-10"
    )

    text = _page(client)

    assert '<p data-review="resolved">Exception review: <strong>resolved</strong>' in text
    assert "set by ana@example.com at" in text
    first, second = (entry.id for entry in ledger.console.audit_for("order-1")[::-1])
    assert text.index(f'data-audit="{second}"') < text.index(f'data-audit="{first}"')
    assert "asked the customer" in text
    assert "refund sent" in text
    assert "order-10" not in text  # another payment's entry, whose target only starts the same


def test_a_review_of_an_earlier_state_shows_open_and_says_what_it_was(
    client: FlaskClient, ledger: Ledger, short_payment: str
) -> None:
    _review(client, "resolved", "the short part was refunded")
    record(ledger, make_outcome(transaction_id="ll-2", currency="USD", amount_minor=2000))

    text = _page(client)

    assert '<p data-review="open">Exception review: <strong>open</strong>' in text
    assert "(it was resolved while the payment was amount mismatch)" in text


def test_a_payment_nobody_touched_says_so(client: FlaskClient, short_payment: str) -> None:
    text = _page(client)

    assert "Nobody has reviewed this payment or acted on it in the console." in text
    assert "data-review=" not in text
    assert "data-audit=" not in text


@pytest.mark.parametrize(
    ("note", "shown", "absent"),
    [
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;", "<script>"),
        ("paid \u202eSDR\u202c back", "\\u202e", "\u202e"),
    ],
)
def test_a_note_and_a_name_are_escaped_in_the_review_and_the_entries(
    client: FlaskClient, ledger: Ledger, short_payment: str, note: str, shown: str, absent: str
) -> None:
    # Written from Python, past the console's form (which refuses control characters).
    ledger.console.review(
        "order-1",
        "acknowledged",
        reviewed_state="amount_mismatch",
        who=note,
        role="operator",
        note=note,
    )

    text = _page(client)

    assert text.count(shown) == 4  # the review's author and note, its audit entry's too
    assert absent not in text
