"""Bulk actions by the delivery log's filter: the count first, the cap, then the POST's
report, on each engine."""

from __future__ import annotations

import re
from datetime import UTC, timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.console.bulk_views import BULK_CAP
from payhooks.receiver import signals
from payhooks.receiver.pipeline import process_stored_delivery
from payhooks.storage import DeliveryStatus, Ledger
from tests.support.console_actions import OPERATOR, VIEWER, Stuck, token

CONFIRM = "/console/deliveries/bulk?action=reprocess&status=processing_error&window=all"


def _statuses(ledger: Ledger) -> list[DeliveryStatus]:
    return [row.status for row in ledger.receiver.delivery_log().rows]


def test_the_confirmation_shows_the_count_and_changes_nothing(
    client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    for _ in range(3):
        stuck()

    page = client.get(CONFIRM, headers=OPERATOR)

    assert page.status_code == 200
    assert 'data-count="3"' in page.text
    assert "Reprocess 3 deliveries" in page.text
    assert _statuses(ledger) == [DeliveryStatus.PROCESSING_ERROR] * 3
    assert ledger.console.audit_log().rows == ()


def test_the_post_reprocesses_every_matching_delivery_and_reports_the_counts(
    client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    for _ in range(3):
        stuck()
    form = {
        "csrf_token": token(client, CONFIRM),
        "action": "reprocess",
        "status": "processing_error",
        "window": "all",
        "note": "after the fix",
    }

    answer = client.post("/console/deliveries/bulk", data=form, headers=OPERATOR)

    assert answer.status_code == 303
    assert _statuses(ledger) == [DeliveryStatus.PROCESSED] * 3
    entries = ledger.console.audit_log().rows
    assert [entry.action for entry in entries] == ["bulk_reprocess"] + ["reprocess"] * 3
    assert entries[0].result == "3 succeeded, 0 failed"
    assert entries[0].detail["count"] == 3
    assert {entry.note for entry in entries} == {"after the fix"}
    shown = client.get(answer.headers["Location"], headers=OPERATOR).text
    assert "Reprocess 3 deliveries: 3 succeeded, 0 failed." in shown


def test_above_the_cap_the_count_shows_and_the_post_is_refused(
    client: FlaskClient, ledger: Ledger, stuck: Stuck, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap lowered to 2 (the setting under test, not a component of ours) so that the
    test needs three deliveries rather than 501."""
    monkeypatch.setattr("payhooks.console.bulk_views.BULK_CAP", 2)
    for _ in range(3):
        stuck()

    page = client.get(CONFIRM, headers=OPERATOR)
    form = {
        "csrf_token": token(client, "/console/deliveries/1"),
        "action": "reprocess",
        "status": "processing_error",
        "window": "all",
    }
    answer = client.post("/console/deliveries/bulk", data=form, headers=OPERATOR)

    assert 'data-count="3"' in page.text
    assert 'data-error="console_bulk_over_cap"' in page.text
    assert 'method="post"' not in page.text
    assert answer.status_code == 400
    assert 'data-error="console_bulk_over_cap"' in answer.text
    assert _statuses(ledger) == [DeliveryStatus.PROCESSING_ERROR] * 3
    assert ledger.console.audit_log().rows[0].result == "refused: over the cap"


def test_the_cap_is_five_hundred() -> None:
    assert BULK_CAP == 500


def test_a_viewer_sees_the_count_but_no_form_and_a_forged_post_is_refused(
    client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    stuck()
    forged = {"action": "reprocess", "status": "processing_error", "window": "all"}

    page = client.get(CONFIRM, headers=VIEWER)
    answer = client.post("/console/deliveries/bulk", data=forged, headers=VIEWER)

    assert 'data-count="1"' in page.text
    assert 'method="post"' not in page.text
    assert answer.status_code == 403
    assert _statuses(ledger) == [DeliveryStatus.PROCESSING_ERROR]


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [(VIEWER, 403, "console_forbidden_action"), (OPERATOR, 400, "console_bad_form")],
)
def test_a_bad_bulk_form_is_refused_after_the_role_is_checked(
    client: FlaskClient,
    ledger: Ledger,
    stuck: Stuck,
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    stuck()
    form = {"csrf_token": token(client, CONFIRM), "action": "explode", "window": "all"}

    answer = client.post("/console/deliveries/bulk", data=form, headers=headers)

    assert answer.status_code == status
    assert f'data-error="{code}"' in answer.text
    if headers == VIEWER:  # refused at the gate: counted
        assert ledger.console.refusals()[0].code == code
    else:  # an operator's action, let in, that refused its form: an entry
        assert ledger.console.audit_log().rows[0].result == f"refused: {code}"


@pytest.mark.parametrize("query", ["action=explode", "action=reprocess&window=forever"])
def test_a_bad_bulk_query_is_a_400_page(client: FlaskClient, query: str) -> None:
    answer = client.get(f"/console/deliveries/bulk?{query}", headers=OPERATOR)

    assert answer.status_code == 400
    assert re.search(r'data-error="console_bad_query"', answer.text)


def test_a_bulk_resend_runs_the_receivers_of_every_matching_delivery_once(
    acting_app: Flask, client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    for _ in range(2):
        stored = ledger.receiver.delivery(stuck())
        assert stored is not None
        process_stored_delivery(ledger, stored, time_zone=UTC, status_map=None, lease=None)
    heard: list[int] = []

    def on_any(sender: Flask, *, outcome_id: int, **extra: object) -> None:
        heard.append(outcome_id)

    confirm = "/console/deliveries/bulk?action=send-signals&window=all"
    form = {"csrf_token": token(client, confirm), "action": "send-signals", "window": "all"}
    with signals.notification_received.connected_to(on_any, sender=acting_app):
        answer = client.post("/console/deliveries/bulk", data=form, headers=OPERATOR)

    assert answer.status_code == 303
    assert len(heard) == 2
    assert len(set(heard)) == 2
    assert ledger.signals.owed() == []
    summary = ledger.console.audit_log().rows[0]
    assert (summary.action, summary.result) == (
        "bulk_send_signals",
        "ran 2 receiver(s) for 2 delivery(ies): 2 returned, 0 raised",
    )


def test_a_resend_is_not_offered_when_no_matching_delivery_owes_a_signal(
    client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    for _ in range(2):
        stored = ledger.receiver.delivery(stuck())
        assert stored is not None
        process_stored_delivery(ledger, stored, time_zone=UTC, status_map=None, lease=None)
    confirm = "/console/deliveries/bulk?action=send-signals&window=all"
    owing = client.get(confirm, headers=OPERATOR).text
    ledger.signals.mark_sent(ledger.signals.claim(lease=timedelta(minutes=1)))

    owing_none = client.get(confirm, headers=OPERATOR).text

    assert 'data-owing="2"' in owing
    assert '<form class="action"' in owing
    assert "None of them owes a signal: nothing to run." in owing_none
    assert '<form class="action"' not in owing_none
