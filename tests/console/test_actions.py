"""The console's actions through the test client, on each engine: who may act, the CSRF
check, what each action changes and the audit entry it leaves."""

from __future__ import annotations

import re
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.console import Console
from payhooks.receiver import signals
from payhooks.receiver.pipeline import process_stored_delivery
from payhooks.storage import DeliveryStatus, Ledger, Outcome
from tests.support.app import AppFactory, BodyFactory
from tests.support.cli import notification, record_notification
from tests.support.console_actions import OPERATOR, ROLE, VIEWER, WHO, Stuck, grant_hook
from tests.support.console_actions import token as page_token
from tests.support.factories import T0, FixedClock


def token(client: FlaskClient, delivery_id: int, headers: dict[str, str] = OPERATOR) -> str:
    """The session's CSRF token (one for every form), from the bulk confirmation, which always
    has a form and shows no body: the delivery's page would leave a ``view_body`` entry of its
    own in the audit log these tests read."""
    return page_token(client, "/console/deliveries/bulk?action=reprocess&window=all", headers)


def _status(ledger: Ledger, delivery_id: int) -> DeliveryStatus:
    found = ledger.receiver.delivery(delivery_id)
    assert found is not None
    return found.status


@pytest.mark.both_engines
def test_an_operator_reprocesses_a_delivery_and_the_audit_log_names_them(
    client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    delivery_id = stuck()
    form = {"csrf_token": token(client, delivery_id), "note": "the map is fixed"}

    answer = client.post(
        f"/console/deliveries/{delivery_id}/reprocess", data=form, headers=OPERATOR
    )

    assert answer.status_code == 303
    assert answer.headers["Location"] == f"/console/deliveries/{delivery_id}"
    assert _status(ledger, delivery_id) is DeliveryStatus.PROCESSED
    (entry,) = ledger.console.audit_log().rows
    assert (entry.who, entry.role, entry.action, entry.target, entry.note, entry.result) == (
        "ana@example.com",
        "operator",
        "reprocess",
        f"delivery {delivery_id}",
        "the map is fixed",
        "processed",
    )
    page = client.get(answer.headers["Location"], headers=OPERATOR).get_data(as_text=True)
    assert f"Delivery #{delivery_id} reprocessed: processed." in page


Form = dict[str, str]


def _refused_form(client: FlaskClient, delivery_id: int, case: str) -> tuple[Form, Form]:
    if case == "no token":
        token(client, delivery_id)
        return OPERATOR, {}
    if case == "wrong token":
        real = token(client, delivery_id)
        return OPERATOR, {"csrf_token": real[:-1] + ("A" if real[-1] != "A" else "B")}
    return VIEWER, {"csrf_token": token(client, delivery_id, OPERATOR)}


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("no token", 400, "console_csrf_failed"),
        ("wrong token", 400, "console_csrf_failed"),
        ("viewer", 403, "console_forbidden_action"),
    ],
)
@pytest.mark.parametrize("action", ["reprocess", "send-signals", "download/raw"])
def test_a_refused_action_changes_nothing_and_is_counted_for_its_person(
    client: FlaskClient,
    ledger: Ledger,
    case: str,
    status: int,
    code: str,
    action: str,
    stuck: Stuck,
) -> None:
    delivery_id = stuck()
    headers, form = _refused_form(client, delivery_id, case)

    answer = client.post(f"/console/deliveries/{delivery_id}/{action}", data=form, headers=headers)

    assert answer.status_code == status
    assert f'data-error="{code}"' in answer.get_data(as_text=True)
    assert answer.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert _status(ledger, delivery_id) is DeliveryStatus.PROCESSING_ERROR
    assert ledger.console.audit_log().rows == ()
    (refusal,) = ledger.console.refusals()
    assert (refusal.who, refusal.action, refusal.code, refusal.times) == (
        headers[WHO],
        action.replace("/", "_").replace("-", "_"),
        code,
        1,
    )
    assert refusal.first_target == f"delivery {delivery_id}"


@pytest.mark.parametrize(
    "sent_by",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "https://evil.example"},
    ],
    ids=["cross-site", "same-site", "another origin"],
)
@pytest.mark.parametrize("role", [OPERATOR, VIEWER], ids=["operator", "viewer"])
@pytest.mark.parametrize("action", ["reprocess", "send-signals", "download/raw"])
def test_a_request_another_site_sent_is_refused_and_logged_never_audited_in_the_persons_name(
    client: FlaskClient,
    ledger: Ledger,
    stuck: Stuck,
    caplog: pytest.LogCaptureFixture,
    sent_by: dict[str, str],
    role: dict[str, str],
    action: str,
) -> None:
    delivery_id = stuck()
    form = {"csrf_token": token(client, delivery_id)}

    answer = client.post(
        f"/console/deliveries/{delivery_id}/{action}", data=form, headers=role | sent_by
    )

    assert answer.status_code == 400
    assert 'data-error="console_csrf_failed"' in answer.text
    assert _status(ledger, delivery_id) is DeliveryStatus.PROCESSING_ERROR
    assert ledger.console.audit_log().rows == ()
    (warning,) = [r for r in caplog.records if "another site sent" in r.getMessage()]
    assert role[WHO] in warning.getMessage()
    assert "not audited in their name" in warning.getMessage()


def test_nobody_logged_in_cannot_post_and_leaves_no_entry(
    client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    delivery_id = stuck()

    answer = client.post(f"/console/deliveries/{delivery_id}/reprocess")

    assert answer.status_code == 403
    assert 'data-error="console_forbidden"' in answer.get_data(as_text=True)
    assert ledger.console.audit_log().rows == ()


def test_a_viewer_sees_no_action_form(client: FlaskClient, ledger: Ledger, stuck: Stuck) -> None:
    delivery_id = stuck()

    page = client.get(f"/console/deliveries/{delivery_id}", headers=VIEWER).get_data(as_text=True)

    assert "<form" not in page.split("<h2>Headers</h2>")[0].split("</h1>")[1]
    assert 'method="post"' not in page
    assert "Reprocess these" not in client.get("/console/deliveries", headers=VIEWER).text


def test_without_a_secret_key_pages_read_and_actions_are_refused(
    make_app: AppFactory, ledger: Ledger, stuck: Stuck
) -> None:
    app = make_app(SECRET_KEY=None)
    Console(app, authorize=grant_hook)
    client = app.test_client()
    delivery_id = stuck()

    page = client.get(f"/console/deliveries/{delivery_id}", headers=OPERATOR)
    answer = client.post(f"/console/deliveries/{delivery_id}/reprocess", headers=OPERATOR)

    assert page.status_code == 200
    assert 'data-error="console_actions_unavailable"' in page.text
    assert answer.status_code == 503
    assert 'data-error="console_actions_unavailable"' in answer.text
    assert _status(ledger, delivery_id) is DeliveryStatus.PROCESSING_ERROR


def test_a_bare_role_is_audited_as_an_unnamed_operator(
    client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    delivery_id = stuck()
    bare = {ROLE: "operator"}

    client.post(
        f"/console/deliveries/{delivery_id}/reprocess",
        data={"csrf_token": token(client, delivery_id, bare)},
        headers=bare,
    )

    assert ledger.console.audit_log().rows[0].who == "unnamed operator"


def test_sending_owed_signals_runs_the_apps_receivers_once(
    acting_app: Flask, client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    delivery_id = stuck()
    stored = ledger.receiver.delivery(delivery_id)
    assert stored is not None
    process_stored_delivery(ledger, stored, time_zone=UTC, status_map=None, lease=None)
    heard: list[str] = []

    def on_paid(sender: Flask, *, outcome: Outcome, **extra: object) -> None:
        heard.append(outcome.external_identifier)

    with signals.payment_succeeded.connected_to(on_paid, sender=acting_app):
        for _ in range(2):
            answer = client.post(
                f"/console/deliveries/{delivery_id}/send-signals",
                data={"csrf_token": token(client, delivery_id)},
                headers=OPERATOR,
            )
            assert answer.status_code == 303

    assert heard == ["order-1"]
    assert ledger.signals.owed(delivery_id) == []
    second, first = ledger.console.audit_log().rows
    assert first.result == "ran 1 receiver(s) for 1 delivery(ies): 1 returned, 0 raised"
    assert first.detail["receivers_run"] == 1
    assert second.result == "nothing owed"
    assert second.detail == {"receivers_run": 0}


@pytest.mark.parametrize(
    ("form", "filename"),
    [("raw", "delivery-{id}.body"), ("fixture", "delivery-{id}.json")],
)
def test_a_download_is_the_stored_body_byte_for_byte(
    client: FlaskClient,
    ledger: Ledger,
    form: str,
    filename: str,
    stuck: Stuck,
    make_body: BodyFactory,
) -> None:
    body = make_body() + b"\n\xff trailing bytes kept"
    delivery_id = stuck(body)

    answer = client.post(
        f"/console/deliveries/{delivery_id}/download/{form}",
        data={"csrf_token": token(client, delivery_id)},
        headers=OPERATOR,
    )

    assert answer.status_code == 200
    assert answer.data == body
    assert answer.mimetype == "application/octet-stream"
    expected = filename.format(id=delivery_id)
    assert answer.headers["Content-Disposition"] == f'attachment; filename="{expected}"'
    assert ledger.console.audit_log().rows[0].action == f"download_{form}"


def test_an_unknown_delivery_is_a_404_and_audited(
    client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    delivery_id = stuck()

    answer = client.post(
        "/console/deliveries/999/reprocess",
        data={"csrf_token": token(client, delivery_id)},
        headers=OPERATOR,
    )

    assert answer.status_code == 404
    assert ledger.console.audit_log().rows[0].result == "not_found"


def test_the_audit_page_lists_entries_for_a_viewer(client: FlaskClient, ledger: Ledger) -> None:
    ledger.console.audit(
        who="<b>ana</b>", role="operator", action="reprocess", result="processed", note="\u202ex"
    )

    page = client.get("/console/audit", headers=VIEWER)

    assert page.status_code == 200
    assert "&lt;b&gt;ana&lt;/b&gt;" in page.text
    assert "\\u202ex" in page.text


def test_the_audit_page_shows_refusals_counted_escaped_on_its_first_page_only(
    client: FlaskClient, ledger: Ledger
) -> None:
    for _ in range(3):
        ledger.console.count_refusal(
            who="<b>vic</b>",
            role="viewer",
            action="reprocess",
            code="console_forbidden_action",
            target="\u202eorder",
        )
    entry = ledger.console.audit(who="ana", role="operator", action="reprocess", result="ok")

    first = client.get("/console/audit", headers=VIEWER).text
    later = client.get(f"/console/audit?before={entry + 1}", headers=VIEWER).text

    assert 'data-times="3"' in first
    assert "3 time(s)" in first
    assert "&lt;b&gt;vic&lt;/b&gt;" in first
    assert "\\u202eorder" in first
    assert "<b>vic</b>" not in first
    assert "data-refusals" not in later


@pytest.mark.parametrize(
    "browser_says",
    [{}, {"Origin": "null", "Sec-Fetch-Site": "same-origin"}, {"Origin": "http://localhost"}],
    ids=["nothing", "a no-referrer page's null origin", "this host"],
)
def test_a_form_from_the_console_itself_passes(
    client: FlaskClient, ledger: Ledger, stuck: Stuck, browser_says: dict[str, str]
) -> None:
    delivery_id = stuck()

    answer = client.post(
        f"/console/deliveries/{delivery_id}/reprocess",
        data={"csrf_token": token(client, delivery_id)},
        headers=OPERATOR | browser_says,
    )

    assert answer.status_code == 303
    assert _status(ledger, delivery_id) is DeliveryStatus.PROCESSED


@pytest.mark.parametrize("action", ["reprocess", "send-signals"])
def test_a_console_on_a_ledger_of_its_own_offers_no_redrive_and_refuses_one(
    tmp_path: Path, database: Path | str, ledger: Ledger, stuck: Stuck, action: str
) -> None:
    """Reprocessing needs the receiver's settings and resending the merchant's receivers: a
    console mounted on the ledger alone (as ``payhooks console`` mounts it) offers neither,
    and a forged form is refused, counted, and changes nothing."""
    delivery_id = stuck()
    app = Flask("standalone", instance_path=str(tmp_path))
    app.config["SECRET_KEY"] = "test"
    Console(app, authorize=grant_hook, url_prefix="/console", database=database)
    client = app.test_client()
    page = client.get(f"/console/deliveries/{delivery_id}", headers=OPERATOR).get_data(as_text=True)
    assert "Reprocess this delivery" not in page
    assert "Download the raw body" in page

    answer = client.post(
        f"/console/deliveries/{delivery_id}/{action}",
        data={"csrf_token": token(client, delivery_id)},
        headers=OPERATOR,
    )

    assert answer.status_code == 409
    assert 'data-error="console_needs_receiver"' in answer.get_data(as_text=True)
    assert _status(ledger, delivery_id) is DeliveryStatus.PROCESSING_ERROR
    (refusal,) = ledger.console.refusals()
    assert refusal.code == "console_needs_receiver"
    (viewed,) = ledger.console.audit_log().rows  # the page showed the operator its body
    assert viewed.action == "view_body"


def test_a_pruned_delivery_says_where_its_body_went_and_is_not_downloaded(
    tmp_path: Path, database: Path | str, client: FlaskClient
) -> None:
    """After ``payhooks prune`` the page names the archive instead of showing an empty body
    (and no signature evidence for headers that are gone), and a download is refused rather
    than handing out zero bytes as the delivery."""
    with Ledger(database, clock=FixedClock(T0)) as old:
        record_notification(old, notification("order-1", "ll-1"), "key-1")
        old.signals.mark_sent(old.signals.claim(lease=timedelta(minutes=1)))
        (row,) = old.receiver.delivery_log().rows
    with Ledger(database) as ledger:
        report = ledger.prune(timedelta(days=1), tmp_path)
        assert report.pruned_deliveries == 1
        page = client.get(f"/console/deliveries/{row.id}", headers=OPERATOR).get_data(as_text=True)
        assert "data-pruned" in page
        assert "payhooks-prune-" in page
        assert "<h2>Signature</h2>" not in page

        answer = client.post(
            f"/console/deliveries/{row.id}/download/raw",
            data={"csrf_token": token(client, row.id)},
            headers=OPERATOR,
        )

        assert answer.status_code == 409
        assert 'data-error="console_body_pruned"' in answer.get_data(as_text=True)
        (entry,) = ledger.console.audit_log().rows
        assert entry.result == "refused: console_body_pruned"


@pytest.fixture
def pruned(tmp_path: Path, database: Path | str) -> int:
    """A processed delivery whose body ``payhooks prune`` archived; its id."""
    with Ledger(database, clock=FixedClock(T0)) as old:
        record_notification(old, notification("order-1", "ll-1"), "key-1")
        old.signals.mark_sent(old.signals.claim(lease=timedelta(minutes=1)))
        (row,) = old.receiver.delivery_log().rows
    with Ledger(database) as ledger:
        assert ledger.prune(timedelta(days=1), tmp_path).pruned_deliveries == 1
    return row.id


def test_a_pruned_delivery_offers_no_reprocess_and_refuses_one(
    client: FlaskClient, ledger: Ledger, pruned: int
) -> None:
    """Reprocessing would parse the empty body prune left behind (``malformed_json``), as
    ``payhooks reprocess``, which skips pruned deliveries, never does."""
    page = client.get(f"/console/deliveries/{pruned}", headers=OPERATOR).text
    assert "Reprocess this delivery" not in page
    assert "Download the raw body" not in page

    answer = client.post(
        f"/console/deliveries/{pruned}/reprocess",
        data={"csrf_token": token(client, pruned)},
        headers=OPERATOR,
    )

    assert answer.status_code == 409
    assert 'data-error="console_body_pruned"' in answer.text
    assert _status(ledger, pruned) is DeliveryStatus.PROCESSED
    (entry,) = ledger.console.audit_log().rows
    assert (entry.action, entry.result) == ("reprocess", "refused: console_body_pruned")


def test_a_bulk_reprocess_skips_a_pruned_delivery_rather_than_failing_it(
    client: FlaskClient, ledger: Ledger, pruned: int
) -> None:
    form = {
        "csrf_token": token(client, pruned),
        "action": "reprocess",
        "status": "processed",
        "window": "all",
    }

    answer = client.post("/console/deliveries/bulk", data=form, headers=OPERATOR)

    assert answer.status_code == 303
    assert _status(ledger, pruned) is DeliveryStatus.PROCESSED
    whole, one = ledger.console.audit_log().rows
    assert one.result == "refused: console_body_pruned"
    assert whole.result == "0 succeeded, 0 failed, 1 skipped (pruned)"
    assert whole.detail["skipped"] == 1


def _flash(answer: Any) -> tuple[str, str]:
    """The result line a page shows after an action, and its tone."""
    found = re.search(r'<p class="flash flash-(\w+)" role="status">([^<]*)</p>', answer.text)
    assert found is not None, answer.text
    return found.group(2), found.group(1)


@pytest.mark.parametrize(
    ("receiver_raises", "said", "tone"),
    [
        (False, "1 returned, 0 raised.", "succeeded"),
        (
            True,
            "0 returned, 1 raised (1 signal(s) will be retried); 1 signal(s) still owed.",
            "problem",
        ),
    ],
)
def test_a_run_of_owed_receivers_says_what_ran_in_the_tone_of_how_it_ended(
    acting_app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    stuck: Stuck,
    receiver_raises: bool,
    said: str,
    tone: str,
) -> None:
    delivery_id = stuck()
    stored = ledger.receiver.delivery(delivery_id)
    assert stored is not None
    process_stored_delivery(ledger, stored, time_zone=UTC, status_map=None, lease=None)

    def on_paid(sender: Flask, **extra: object) -> None:
        if receiver_raises:
            raise RuntimeError("warehouse API down")

    with signals.payment_succeeded.connected_to(on_paid, sender=acting_app):
        answer = client.post(
            f"/console/deliveries/{delivery_id}/send-signals",
            data={"csrf_token": token(client, delivery_id)},
            headers=OPERATOR,
            follow_redirects=True,
        )

    line, shown = _flash(answer)
    assert line.startswith(f"Delivery #{delivery_id}: ran 1 receiver(s) for 1 delivery(ies): ")
    assert line.endswith(said)
    assert shown == tone
    viewed, entry = ledger.console.audit_log().rows  # the page after the redirect showed the body
    assert viewed.action == "view_body"
    assert (entry.who, entry.action) == ("ana@example.com", "send_signals")
    assert entry.detail["raised"] == int(receiver_raises)


def test_a_delivery_that_owes_nothing_offers_no_run_and_a_forced_one_says_so_in_grey(
    acting_app: Flask, client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    delivery_id = stuck()
    stored = ledger.receiver.delivery(delivery_id)
    assert stored is not None
    process_stored_delivery(ledger, stored, time_zone=UTC, status_map=None, lease=None)
    ledger.signals.mark_sent(ledger.signals.claim(lease=timedelta(minutes=1)))
    form_token = token(client, delivery_id)

    page = client.get(f"/console/deliveries/{delivery_id}", headers=OPERATOR).text
    answer = client.post(
        f"/console/deliveries/{delivery_id}/send-signals",
        data={"csrf_token": form_token},
        headers=OPERATOR,
        follow_redirects=True,
    )

    assert "Run the receivers still owed" not in page
    assert "No signal is owed." in page
    assert _flash(answer) == (
        f"Delivery #{delivery_id} owes no signal: nothing was run.",
        "neutral",
    )
    assert ledger.console.audit_log().rows[0].result == "nothing owed"


def test_an_operator_marks_a_failing_signal_handled_without_running_it_audited(
    acting_app: Flask, client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    delivery_id = stuck()
    stored = ledger.receiver.delivery(delivery_id)
    assert stored is not None
    process_stored_delivery(ledger, stored, time_zone=UTC, status_map=None, lease=None)
    ran: list[int] = []

    def down(sender: Flask, **extra: object) -> None:
        ran.append(1)
        raise RuntimeError("warehouse API down")

    with signals.payment_succeeded.connected_to(down, sender=acting_app):
        client.post(
            f"/console/deliveries/{delivery_id}/send-signals",
            data={"csrf_token": token(client, delivery_id)},
            headers=OPERATOR,
        )
        (failing,) = ledger.signals.failing()
        page = client.get(f"/console/deliveries/{delivery_id}", headers=OPERATOR).text
        answer = client.post(
            f"/console/signals/{failing.signal.id}/dismiss",
            data={"csrf_token": token(client, delivery_id), "note": "shipped by hand"},
            headers=OPERATOR,
            follow_redirects=True,
        )
        again = client.post(
            f"/console/signals/{failing.signal.id}/dismiss",
            data={"csrf_token": token(client, delivery_id)},
            headers=OPERATOR,
        )

    assert "Mark handled without running" in page
    assert _flash(answer) == (
        f"Signal #{failing.signal.id} (payment-succeeded) marked handled without running its "
        "receivers.",
        "neutral",
    )
    assert ran == [1]
    assert ledger.signals.owed(delivery_id) == []
    assert again.status_code == 409
    entries = ledger.console.audit_log().rows
    assert (entries[1].action, entries[1].result, entries[1].note) == (
        "dismiss_signal",
        "marked handled without running",
        "shipped by hand",
    )
    assert entries[0].result == "refused: console_signal_not_owed"


def test_a_viewer_cannot_mark_a_signal_handled(
    client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    delivery_id = stuck()
    answer = client.post(
        "/console/signals/1/dismiss",
        data={"csrf_token": token(client, delivery_id, OPERATOR)},
        headers=VIEWER,
    )

    assert answer.status_code == 403
    assert ledger.console.refusals()[0].code == "console_forbidden_action"


def test_a_viewer_posting_in_a_loop_makes_a_few_counted_rows_not_one_per_request(
    client: FlaskClient, ledger: Ledger, stuck: Stuck
) -> None:
    """A viewer who sends refused actions as fast as they can: the rows they make are bounded
    by minutes x actions x codes, and the counts add up to the requests."""
    delivery_id = stuck()
    form = {"csrf_token": token(client, delivery_id, OPERATOR)}
    actions = ("reprocess", "send-signals", "download/raw")

    for number in range(200):
        answer = client.post(
            f"/console/deliveries/{delivery_id}/{actions[number % 3]}?x={'y' * 4000}",
            data=form,
            headers=VIEWER,
        )
        assert answer.status_code == 403

    refusals = ledger.console.refusals()
    assert ledger.console.audit_log().rows == ()
    assert len(refusals) <= 2 * len(actions)  # the loop may cross one minute's edge
    assert sum(refusal.times for refusal in refusals) == 200
    assert {refusal.action for refusal in refusals} == {"reprocess", "send_signals", "download_raw"}
