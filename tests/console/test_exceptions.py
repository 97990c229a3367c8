"""The exceptions queue: mismatches grouped with counts, money and ages; statuses set by an
operator (CSRF, audited) that hold only while the payment keeps its state; on each engine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from flask.testing import FlaskClient

from payhooks.console.exceptions_views import age_of
from payhooks.storage import Ledger
from payhooks.storage.reads import ReviewStatus
from tests.support.console_actions import OPERATOR, VIEWER, token
from tests.support.factories import make_outcome, record

QUEUE = "/console/exceptions"


@pytest.fixture
def short_payment(ledger: Ledger) -> str:
    """order-1: 25.00 CNY registered, 20.00 received: an amount_mismatch."""
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, make_outcome(amount=Decimal("20.00"), amount_minor=2000))
    return "order-1"


def test_the_queue_groups_mismatches_with_counts_money_and_ages(
    client: FlaskClient, ledger: Ledger, short_payment: str
) -> None:
    record(
        ledger,
        make_outcome(external_identifier="stranger", transaction_id="ll-9"),
    )

    page = client.get(QUEUE, headers=VIEWER)

    assert page.status_code == 200
    assert 'data-count="2"' in page.text
    assert 'data-group="amount_mismatch"' in page.text
    assert 'data-group="unexpected"' in page.text
    assert "20.00 CNY" in page.text
    assert 'data-exception="order-1" data-status="open"' in page.text
    assert 'method="post"' not in page.text


def test_an_operator_sets_a_status_with_a_note_and_it_is_audited(
    client: FlaskClient, ledger: Ledger, short_payment: str
) -> None:
    form = {"csrf_token": token(client, QUEUE), "status": "acknowledged", "note": "refund due"}

    answer = client.post(f"{QUEUE}/order-1/review", data=form, headers=OPERATOR)

    assert answer.status_code == 303
    review = ledger.console.reviews()["order-1"]
    assert (review.status, review.note, review.who) == (
        ReviewStatus.ACKNOWLEDGED,
        "refund due",
        "ana@example.com",
    )
    (entry,) = ledger.console.audit_log().rows
    assert (entry.action, entry.target, entry.result) == (
        "review_exception",
        "order-1",
        "acknowledged",
    )
    assert 'data-status="acknowledged"' in client.get(QUEUE, headers=VIEWER).text


def test_a_payment_whose_state_changes_after_review_is_open_again(
    client: FlaskClient, ledger: Ledger, short_payment: str
) -> None:
    form = {"csrf_token": token(client, QUEUE), "status": "resolved"}
    client.post(f"{QUEUE}/order-1/review", data=form, headers=OPERATOR)
    record(ledger, make_outcome(transaction_id="ll-2", currency="USD", amount_minor=2000))

    page = client.get(QUEUE, headers=VIEWER).text

    assert 'data-exception="order-1" data-status="open"' in page


@pytest.mark.parametrize(
    ("headers", "with_token", "status"),
    [(OPERATOR, False, 400), (VIEWER, True, 403)],
    ids=["no token", "viewer"],
)
def test_a_refused_review_changes_nothing(
    client: FlaskClient,
    ledger: Ledger,
    short_payment: str,
    headers: dict[str, str],
    with_token: bool,
    status: int,
) -> None:
    form = {"status": "ignored"}
    if with_token:
        form["csrf_token"] = token(client, QUEUE)

    answer = client.post(f"{QUEUE}/order-1/review", data=form, headers=headers)

    assert answer.status_code == status
    assert ledger.console.reviews() == {}
    assert ledger.console.audit_log().rows == ()
    assert ledger.console.refusals()[0].action == "review_exception"


def test_a_payment_not_in_the_queue_cannot_be_reviewed(
    client: FlaskClient, ledger: Ledger, short_payment: str
) -> None:
    form = {"csrf_token": token(client, QUEUE), "status": "resolved"}

    answer = client.post(f"{QUEUE}/nobody/review", data=form, headers=OPERATOR)

    assert answer.status_code == 404
    assert ledger.console.reviews() == {}


@pytest.mark.parametrize(
    ("age", "bucket"),
    [
        (timedelta(hours=23), "under 1 day"),
        (timedelta(days=1), "1 to 7 days"),
        (timedelta(days=29), "7 to 30 days"),
        (timedelta(days=31), "over 30 days"),
    ],
)
def test_ageing_buckets(age: timedelta, bucket: str) -> None:
    now = datetime(2026, 11, 27, tzinfo=UTC)
    assert age_of(now - age, now) == bucket


@pytest.mark.parametrize(
    ("identifier", "recorded"),
    [
        ("x" * 8000, "x" * 99 + "…"),
        ("a%00b", "a\\x00b"),
    ],
    ids=["8 KB from the URL", "a NUL"],
)
def test_a_review_without_its_token_is_counted_with_a_bounded_target(
    client: FlaskClient, ledger: Ledger, identifier: str, recorded: str
) -> None:
    """A POST without its token is refused; its count names the person, so its target, taken
    from the URL, must neither carry a forger's text at length nor (a NUL, which PostgreSQL's
    text holds none of) fail the count's write and turn the refusal into a 503. (A POST the
    browser says another site sent is not audited at all.)"""
    answer = client.post(
        f"/console/exceptions/{identifier}/review",
        data={"status": "resolved"},
        headers=OPERATOR,
    )

    assert answer.status_code == 400
    assert 'data-error="console_csrf_failed"' in answer.text
    (refusal,) = ledger.console.refusals()
    assert (refusal.first_target, refusal.code) == (recorded, "console_csrf_failed")
