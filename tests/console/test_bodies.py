"""Bodies are evidence: who reads a delivery's body (or a refused request's kept start) on a
page, what the page shows instead, and the one audit entry per person, record and hour that
each reading leaves; never one written by another site's link."""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from pathlib import Path

import pytest
from flask import Flask, Request
from flask.testing import FlaskClient

from payhooks.console import Console, ConsoleGrant, ConsoleRole
from payhooks.storage import Ledger
from payhooks.storage.reads import AuditEntry
from tests.console.conftest import Clock, Deliver, forge
from tests.support.app import AppFactory
from tests.support.cli import notification, record_notification
from tests.support.console_actions import token
from tests.support.factories import T0, FixedClock
from tests.support.page_html import parse_page

ROLE = "X-Test-Console-Role"
WHO = "X-Test-Console-Who"
BODIES = "X-Test-Console-Bodies"
#: What only the body holds: a card holder's name, in JSON.
SECRET_NAME = "Lin Wei-Hsu"
BODY = (
    b'{"ll_transaction_id": "ll-5", "merchant_transaction_id": "order-5", "payment_data": '
    b'{"payment_status": "PS", "payment_amount": "25.00", "payment_currency_code": "CNY", '
    b'"payment_time": "20261121120000", "card_holder": "' + SECRET_NAME.encode() + b'"}}'
)


def _grant(request: Request) -> ConsoleGrant | None:
    """The tests' hook: the role, the name and (when the header is there) ``bodies``."""
    role = request.headers.get(ROLE)
    if role is None:
        return None
    bodies = {"yes": True, "no": False}.get(request.headers.get(BODIES, ""))
    return ConsoleGrant(ConsoleRole(role), request.headers.get(WHO, "someone"), bodies=bodies)


def _person(role: str, who: str = "vic@example.com", bodies: bool | None = None) -> dict[str, str]:
    headers = {ROLE: role, WHO: who}
    if bodies is not None:
        headers[BODIES] = "yes" if bodies else "no"
    return headers


VIEWER = _person("viewer")
OPERATOR = _person("operator", "ana@example.com")


@pytest.fixture
def console_app(make_app: AppFactory, clock: Clock) -> Flask:
    """The receiver, and the console behind a hook that can grant bodies either way."""
    app = make_app()
    app.config["SECRET_KEY"] = "test"
    Console(app, authorize=_grant, url_prefix="/console", clock=clock)
    return app


def _views(ledger: Ledger) -> list[AuditEntry]:
    return [entry for entry in ledger.console.audit_log().rows if entry.action == "view_body"]


def _record(kind: str, console: FlaskClient, deliver: Deliver, ledger: Ledger) -> tuple[str, str]:
    """A record holding :data:`BODY`: its page's path and its audit target."""
    if kind == "delivery":
        delivery_id = deliver(body=BODY)
        return f"/console/deliveries/{delivery_id}", f"delivery {delivery_id}"
    rejected_id = forge(console, BODY, ledger)
    return f"/console/deliveries/refused/{rejected_id}", f"refused request {rejected_id}"


RECORDS = ["delivery", "refused request"]
#: A page with an action's form (the session's CSRF token) and no body.
BULK_PAGE = "/console/deliveries/bulk?action=reprocess&window=all"


@pytest.mark.parametrize("kind", RECORDS)
def test_a_viewer_by_default_sees_everything_but_the_body(
    console: FlaskClient, deliver: Deliver, ledger: Ledger, kind: str
) -> None:
    path, _ = _record(kind, console, deliver, ledger)

    answer = console.get(path, headers=VIEWER)

    assert answer.status_code == 200
    html = answer.text
    assert SECRET_NAME not in html
    assert "card_holder" not in html
    page = parse_page(html)
    assert page.find_all("pre") == []
    hidden = page.find(data_body_hidden="grant")
    assert hidden.text() == (
        "The body is hidden: your role does not show bodies; ask an operator, or see "
        "docs/console.md#bodies."
    )
    assert page.find("code", data_sha256=None).text() == hashlib.sha256(BODY).hexdigest()
    assert f"{len(BODY)} bytes" in html
    assert _views(ledger) == []


def test_a_delivery_hidden_from_a_viewer_still_shows_its_outcome_headers_and_evidence(
    console: FlaskClient, deliver: Deliver
) -> None:
    delivery_id = deliver(body=BODY)

    html = console.get(f"/console/deliveries/{delivery_id}", headers=VIEWER).text
    page = parse_page(html)

    assert "<code>PS</code> 25.00 CNY" in html
    assert page.find(data_evidence="verified").find("code", data_key=None).text() != ""
    assert "webhook-signature" in page.find("table", **{"class": "headers"}).text()


@pytest.mark.parametrize("kind", RECORDS)
@pytest.mark.parametrize(
    "person",
    [_person("viewer", bodies=True), OPERATOR],
    ids=["viewer granted bodies", "operator by default"],
)
def test_a_grant_that_reads_bodies_sees_the_body_and_its_read_is_audited(
    console: FlaskClient, deliver: Deliver, ledger: Ledger, kind: str, person: dict[str, str]
) -> None:
    path, target = _record(kind, console, deliver, ledger)

    answer = console.get(path, headers=person)

    assert answer.status_code == 200
    assert SECRET_NAME in parse_page(answer.text).find("pre", **{"class": "body"}).text()
    assert "data-body-hidden" not in answer.text
    (entry,) = _views(ledger)
    assert (entry.who, entry.role, entry.target, entry.result) == (
        person[WHO],
        person[ROLE],
        target,
        "shown",
    )


def test_an_operator_whose_grant_withholds_bodies_neither_reads_nor_downloads_one(
    console: FlaskClient, deliver: Deliver, ledger: Ledger
) -> None:
    delivery_id = deliver(body=BODY)
    operator = _person("operator", "ana@example.com", bodies=False)

    page = console.get(f"/console/deliveries/{delivery_id}", headers=operator).text
    answer = console.post(
        f"/console/deliveries/{delivery_id}/download/raw",
        data={"csrf_token": token(console, BULK_PAGE, operator)},
        headers=operator,
    )

    assert SECRET_NAME not in page
    assert "Download the raw body" not in page
    assert 'data-body-hidden="grant"' in page
    assert answer.status_code == 403
    assert 'data-error="console_forbidden_action"' in answer.text
    assert SECRET_NAME.encode() not in answer.data
    assert ledger.console.audit_log().rows == ()  # a refusal is counted, not an entry
    (counted,) = ledger.console.refusals()
    assert (counted.action, counted.code) == ("download_raw", "console_forbidden_action")


def test_a_body_read_is_audited_once_per_person_record_and_hour(
    console: FlaskClient, deliver: Deliver, ledger: Ledger, clock: Clock
) -> None:
    first, second = deliver(body=BODY), deliver(external_identifier="order-6")
    other = _person("operator", "bo@example.com")

    def read(delivery_id: int, person: dict[str, str]) -> None:
        assert console.get(f"/console/deliveries/{delivery_id}", headers=person).status_code == 200

    read(first, OPERATOR)
    read(first, OPERATOR)
    assert len(_views(ledger)) == 1
    read(first, other)
    read(second, OPERATOR)
    assert len(_views(ledger)) == 3
    clock.ahead += timedelta(hours=1)
    read(first, OPERATOR)
    read(first, OPERATOR)

    views = _views(ledger)
    assert [(entry.who, entry.target) for entry in views] == [
        ("ana@example.com", f"delivery {first}"),
        ("ana@example.com", f"delivery {second}"),
        ("bo@example.com", f"delivery {first}"),
        ("ana@example.com", f"delivery {first}"),
    ]
    assert views[0].at - views[-1].at >= timedelta(minutes=59)  # at the console's clock


@pytest.mark.parametrize("kind", RECORDS)
@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_a_page_another_site_opened_holds_the_body_back_and_audits_nothing(
    console: FlaskClient,
    deliver: Deliver,
    ledger: Ledger,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    site: str,
) -> None:
    """A link on another site opens the page with the person's Lax cookie: showing the body
    there would write an entry in their name whenever any site liked. The page says so and
    links to itself; followed from the console, the body shows, audited."""
    path, target = _record(kind, console, deliver, ledger)

    with caplog.at_level(logging.WARNING, logger="payhooks"):
        answer = console.get(path, headers=OPERATOR | {"Sec-Fetch-Site": site})

    assert answer.status_code == 200
    assert SECRET_NAME not in answer.text
    hidden = parse_page(answer.text).find(data_body_hidden="cross_site")
    assert hidden.text().startswith("The body is not shown on a page that another site opened")
    assert [link.attrs["href"] for link in hidden.find_all("a")] == [path]
    assert _views(ledger) == []
    (logged,) = [r.getMessage() for r in caplog.records if "held back the body" in r.message]
    assert f"of {target} on a page that another site opened (Sec-Fetch-Site={site})" in logged

    followed = console.get(path, headers=OPERATOR | {"Sec-Fetch-Site": "same-origin"})

    assert SECRET_NAME in followed.text
    assert len(_views(ledger)) == 1


@pytest.mark.parametrize("site", ["none", "same-origin"])
def test_a_page_the_person_opened_themselves_shows_the_body(
    console: FlaskClient, deliver: Deliver, ledger: Ledger, site: str
) -> None:
    delivery_id = deliver(body=BODY)

    answer = console.get(
        f"/console/deliveries/{delivery_id}", headers=OPERATOR | {"Sec-Fetch-Site": site}
    )

    assert SECRET_NAME in answer.text
    assert len(_views(ledger)) == 1


def test_a_head_request_sends_no_body_and_leaves_no_entry(
    console: FlaskClient, deliver: Deliver, ledger: Ledger
) -> None:
    delivery_id = deliver(body=BODY)

    answer = console.head(f"/console/deliveries/{delivery_id}", headers=OPERATOR)

    assert answer.status_code == 200
    assert answer.data == b""
    assert _views(ledger) == []


def test_a_pruned_delivery_has_no_body_to_read_and_leaves_no_entry(
    console: FlaskClient, database: Path | str, tmp_path: Path
) -> None:
    with Ledger(database, clock=FixedClock(T0)) as old:
        record_notification(old, notification("order-1", "ll-1"), "key-1")
        old.signals.mark_sent(old.signals.claim(lease=timedelta(minutes=1)))
        (row,) = old.receiver.delivery_log().rows
    with Ledger(database) as ledger:
        assert ledger.prune(timedelta(days=1), tmp_path).pruned_deliveries == 1

        page = console.get(f"/console/deliveries/{row.id}", headers=OPERATOR).text

        assert "data-pruned" in page
        assert "data-body-hidden" not in page
        assert _views(ledger) == []


@pytest.mark.parametrize("bodies", ["yes please", 1])
def test_a_grant_with_bodies_neither_bool_nor_none_is_refused(bodies: object) -> None:
    with pytest.raises(ValueError, match="bodies must be True, False or None"):
        ConsoleGrant(ConsoleRole.VIEWER, "vic", bodies=bodies)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("grant", "reads"),
    [
        (ConsoleGrant(ConsoleRole.VIEWER, "v"), False),
        (ConsoleGrant(ConsoleRole.OPERATOR, "o"), True),
        (ConsoleGrant(ConsoleRole.VIEWER, "v", bodies=True), True),
        (ConsoleGrant(ConsoleRole.OPERATOR, "o", bodies=False), False),
        (ConsoleGrant.unnamed(ConsoleRole.VIEWER), False),
        (ConsoleGrant.unnamed(ConsoleRole.OPERATOR), True),
    ],
)
def test_a_grant_reads_bodies_as_it_says_else_as_its_role_does(
    grant: ConsoleGrant, reads: bool
) -> None:
    assert grant.shows_bodies is reads
