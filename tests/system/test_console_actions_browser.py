"""The console's actions in a real browser: Debian's Chromium submits the real forms.

What the test client cannot show: that the form works without script under the console's
policy (``form-action 'self'``), that the session cookie carries the CSRF token from the page
to its POST, that the 303 lands back on the page with the result line, and that a form on
another site is refused even though the browser sends the person's credentials with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from flask import Flask

from payhooks.console import Console
from payhooks.storage import DeliveryStatus, Ledger
from payhooks.storage.reads import ReviewStatus
from tests.support.app import AppFactory, BodyFactory
from tests.support.browser import BROWSER_TIMEOUT_MS, SCREENS
from tests.support.console_actions import OPERATOR, VIEWER, grant_hook
from tests.support.factories import make_outcome, record
from tests.support.live_server import LiveServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext


@pytest.fixture
def contexts(browser: Browser) -> Iterator[Callable[[dict[str, str]], BrowserContext]]:
    """``open(headers)``: a fresh browser context sending a person's role headers."""
    opened: list[BrowserContext] = []

    def open_context(headers: dict[str, str]) -> BrowserContext:
        context = browser.new_context(extra_http_headers=headers)
        context.set_default_timeout(BROWSER_TIMEOUT_MS)
        opened.append(context)
        return context

    yield open_context
    for context in opened:
        context.close()


@pytest.fixture
def stuck_server(
    make_app: AppFactory,
    make_body: BodyFactory,
    serve: Callable[[Flask], LiveServer],
    database: Path | str,
) -> tuple[LiveServer, int]:
    """The receiver and a console on loopback, and a delivery a bug left without its outcome."""
    app = make_app()
    Console(app, authorize=grant_hook)
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        stored = ledger.receiver.record_delivery(dedupe_key="k-1", body=make_body(), headers={})
        ledger.receiver.mark_delivery(stored.id, "processing_error", error="a bug, since fixed")
    return serve(app), stored.id


def test_an_operator_reprocesses_from_the_page_and_the_audit_page_lists_it(
    contexts: Callable[[dict[str, str]], BrowserContext],
    stuck_server: tuple[LiveServer, int],
    database: Path | str,
) -> None:
    server, delivery_id = stuck_server
    page = contexts(OPERATOR).new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text))

    page.goto(f"{server.url}/console/deliveries/{delivery_id}")
    page.fill("#note-reprocess", "the status map is fixed")
    page.click("text=Reprocess this delivery")
    page.wait_for_load_state()

    assert page.url == f"{server.url}/console/deliveries/{delivery_id}"
    assert page.locator(".flash").inner_text() == (
        f"Delivery #{delivery_id} reprocessed: processed."
    )
    assert page.locator("script").count() == 0
    page.click("text=Audit log")
    row = page.locator('tr[data-action="reprocess"]')
    assert row.locator('td[data-label="Who"]').inner_text() == "ana@example.com (operator)"
    assert row.locator('td[data-label="Note"]').inner_text() == "the status map is fixed"
    assert errors == []
    with Ledger(database) as ledger:
        stored = ledger.receiver.delivery(delivery_id)
        assert stored is not None
        assert stored.status is DeliveryStatus.PROCESSED


def test_a_viewer_sees_no_action_and_a_form_from_another_site_is_refused(
    contexts: Callable[[dict[str, str]], BrowserContext],
    stuck_server: tuple[LiveServer, int],
    database: Path | str,
) -> None:
    server, delivery_id = stuck_server
    viewer = contexts(VIEWER).new_page()
    viewer.goto(f"{server.url}/console/deliveries/{delivery_id}")
    operator = contexts(OPERATOR).new_page()
    operator.goto(f"{server.url}/console/deliveries/{delivery_id}")  # the session exists
    target = f"{server.url}/console/deliveries/{delivery_id}/reprocess"

    # Another site's page, in the operator's browser, posting to the console.
    operator.set_content(
        f'<form method="post" action="{target}"><input name="note" value="forged">'
        '<button type="submit">Win a prize</button></form>'
    )
    operator.click("text=Win a prize")
    operator.wait_for_load_state()

    assert viewer.locator('form[method="post"]').count() == 0
    assert viewer.locator("text=Reprocess this delivery").count() == 0
    assert operator.locator("[data-error]").get_attribute("data-error") == "console_csrf_failed"
    with Ledger(database) as ledger:
        stored = ledger.receiver.delivery(delivery_id)
        assert stored is not None
        assert stored.status is DeliveryStatus.PROCESSING_ERROR
        # set_content keeps the console page's origin: a same-origin form without the token,
        # refused for the token and counted (another origin's is not: the test below).
        assert ledger.console.refusals()[0].code == "console_csrf_failed"


def test_the_action_pages_fit_a_phone_and_run_nothing(
    browser: Browser, stuck_server: tuple[LiveServer, int], database: Path | str
) -> None:
    """With a row in each table: an exception (a payment nobody registered) and an entry."""
    server, delivery_id = stuck_server
    with Ledger(database) as ledger:
        record(ledger, make_outcome(external_identifier="stranger-" + "x" * 50))
        ledger.console.audit(
            who="ana@example.com",
            role="operator",
            action="reprocess",
            result="processed",
            note="a long note " * 20,
        )
    context = browser.new_context(**SCREENS["phone"], extra_http_headers=OPERATOR)
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        page = context.new_page()
        for path in (
            f"/console/deliveries/{delivery_id}",
            "/console/deliveries/bulk?action=reprocess&window=all",
            "/console/exceptions",
            "/console/audit",
        ):
            page.goto(f"{server.url}{path}")
            fits = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            assert fits, f"{path} is wider than a phone's screen"
            assert page.locator("script").count() == 0
    finally:
        context.close()


def test_a_form_from_another_origin_is_refused_and_not_audited_in_the_persons_name(
    contexts: Callable[[dict[str, str]], BrowserContext],
    stuck_server: tuple[LiveServer, int],
    serve: Callable[[Flask], LiveServer],
    database: Path | str,
) -> None:
    """A page on another port of the same host (another origin; the same site, so Chromium
    sends the person's cookies) posts to the console: refused before the role or the token is
    asked, and logged, for the audit log records what people did, not what a site made their
    browser send."""
    server, delivery_id = stuck_server
    target = f"{server.url}/console/deliveries/{delivery_id}/reprocess"
    other = Flask("another_site")

    @other.get("/")
    def prize() -> str:
        return (
            f'<!doctype html><title>Win</title><form method="post" action="{target}">'
            '<input name="note" value="forged"><button type="submit">Win a prize</button></form>'
        )

    elsewhere = serve(other)
    operator = contexts(OPERATOR).new_page()
    operator.goto(f"{server.url}/console/deliveries/{delivery_id}")  # the session exists
    operator.goto(f"{elsewhere.url}/")
    operator.click("text=Win a prize")
    operator.wait_for_load_state()

    assert operator.url == target
    assert operator.locator("[data-error]").get_attribute("data-error") == "console_csrf_failed"
    with Ledger(database) as ledger:
        stored = ledger.receiver.delivery(delivery_id)
        assert stored is not None
        assert stored.status is DeliveryStatus.PROCESSING_ERROR
        # Only what the person did: their own look at the body, before the other site's form.
        assert [entry.action for entry in ledger.console.audit_log().rows] == ["view_body"]


@pytest.mark.parametrize(
    ("host", "sent"),
    [("127.0.0.1", "same-site"), ("localhost", "cross-site")],
    ids=["another port", "another host"],
)
def test_a_delivery_opened_from_another_sites_link_holds_its_body_back_until_reopened_here(
    contexts: Callable[[dict[str, str]], BrowserContext],
    stuck_server: tuple[LiveServer, int],
    serve: Callable[[Flask], LiveServer],
    database: Path | str,
    host: str,
    sent: str,
) -> None:
    """A link on another site opens the page with the person's credentials (Lax cookies follow
    a top-level navigation): Chromium says so in ``Sec-Fetch-Site``, and the page shows no
    body and records nothing in their name; its own link, followed from the console, does."""
    server, delivery_id = stuck_server
    target = f"{server.url}/console/deliveries/{delivery_id}"
    other = Flask("another_site")

    @other.get("/")
    def lure() -> str:
        return f'<!doctype html><title>Look</title><a href="{target}">Look at this order</a>'

    elsewhere = serve(other)
    operator = contexts(OPERATOR).new_page()
    operator.goto(elsewhere.url.replace("127.0.0.1", host) + "/")
    with operator.expect_request(target) as opened:
        operator.click("text=Look at this order")
    operator.wait_for_load_state()

    assert opened.value.all_headers()["sec-fetch-site"] == sent
    assert operator.url == target
    hidden = operator.locator("[data-body-hidden]")
    assert hidden.get_attribute("data-body-hidden") == "cross_site"
    assert operator.locator("pre.body").count() == 0
    with Ledger(database) as ledger:
        assert ledger.console.audit_log().rows == ()

    hidden.locator("text=Show the body").click()
    operator.wait_for_load_state()

    assert "merchant_transaction_id" in operator.locator("pre.body.raw").inner_text()
    with Ledger(database) as ledger:
        (entry,) = ledger.console.audit_log().rows
    assert (entry.who, entry.action, entry.target) == (
        "ana@example.com",
        "view_body",
        f"delivery {delivery_id}",
    )


@pytest.mark.parametrize("identifier", [".", ".."])
def test_a_payment_named_dot_or_dot_dot_opens_from_its_link_and_is_reviewed_from_its_form(
    contexts: Callable[[dict[str, str]], BrowserContext],
    stuck_server: tuple[LiveServer, int],
    database: Path | str,
    identifier: str,
) -> None:
    """Chromium removes ``.`` and ``..`` path segments (and their ``%2e`` spellings) from a
    URL before it sends it: the console's links and forms for such a payment must still reach
    it."""
    server, _ = stuck_server
    with Ledger(database) as ledger:
        record(ledger, make_outcome(external_identifier=identifier))
    page = contexts(OPERATOR).new_page()
    page.goto(f"{server.url}/console/exceptions")
    row = page.locator(f'tr[data-exception="{identifier}"]')

    row.locator("a.identifier").click()
    page.wait_for_load_state()

    assert page.locator("h1 code.identifier").inner_text() == identifier
    page.go_back()
    row.locator('select[name="status"]').select_option("acknowledged")
    row.locator('form.review button[type="submit"]').click()
    page.wait_for_load_state()
    assert page.locator(".flash").inner_text() == "Marked acknowledged."
    with Ledger(database) as ledger:
        assert ledger.console.reviews()[identifier].status is ReviewStatus.ACKNOWLEDGED
