"""The finance page in a real browser (Debian's Chromium): opened with its filters in the URL,
a row clicked through to its payment and on to the delivery showing the raw signed body, with
no console error, no CSP violation and nothing loaded from elsewhere; and its export, from
the form to the file.

The browser is launched as in :mod:`tests.system.test_console_browser`: skipped where it is
missing, failed under ``CI=true``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from flask import Flask, Request

from payhooks.console import Console, ConsoleGrant, ConsoleRole
from tests.support.app import AppFactory, BodyFactory, SignFunction
from tests.support.browser import BROWSER_TIMEOUT_MS
from tests.support.live_server import LiveServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage

ROLE_HEADER = "X-Test-Console-Role"


def _finance_person(request: Request) -> ConsoleGrant | None:
    """The role the test header names, for a person of finance whom the merchant lets read
    bodies (a viewer's are hidden unless the hook grants them: docs/console.md#bodies)."""
    role = request.headers.get(ROLE_HEADER)
    return None if role is None else ConsoleGrant(ConsoleRole(role), "fin@example.com", bodies=True)


@pytest.fixture
def finance_server(
    make_app: AppFactory,
    make_body: BodyFactory,
    sign: SignFunction,
    serve: Callable[[Flask], LiveServer],
) -> LiveServer:
    """The receiver and a console on loopback: two registered orders, one underpaid, both paid
    yesterday through real signed notifications."""
    app = make_app()
    Console(app, authorize=_finance_person)
    client = app.test_client()
    with app.app_context():
        from payhooks.receiver import receiver_state

        ledger = receiver_state().ledger
        ledger.expect_transaction("order-1", 2500, "CNY")
        ledger.expect_transaction("order-2", 1000, "CNY")
    when = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y%m%d%H%M%S")
    for identifier, transaction, amount in (
        ("order-1", "ll-1", "25.00"),
        ("order-2", "ll-2", "9.00"),
    ):
        body = make_body(
            external_identifier=identifier,
            transaction_id=transaction,
            amount=amount,
            payment_time=when,
        )
        answer = client.post("/payhooks/notifications", data=body, headers=sign(body))
        assert answer.status_code == 200, answer.get_data(as_text=True)
    return serve(app)


def test_finance_clicks_from_a_filtered_row_to_its_payment_to_the_signed_body(
    browser: Browser, finance_server: LiveServer
) -> None:
    context = browser.new_context(extra_http_headers={ROLE_HEADER: "viewer"})
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    messages: list[str] = []
    errors: list[str] = []
    requested: list[str] = []

    def console_message(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning") or "Content Security Policy" in message.text:
            messages.append(f"{message.type}: {message.text}")

    try:
        page = context.new_page()
        page.on("console", console_message)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda sent: requested.append(sent.url))

        page.goto(f"{finance_server.url}/console/reconciliation?period=7d&state=amount_mismatch")
        assert page.locator("h1").inner_text() == "Reconciliation"
        assert page.locator("tr[data-identifier]").all_inner_texts()[0].startswith("order-2")
        assert page.locator("tr[data-identifier]").count() == 1
        assert page.locator('svg[role="img"]').count() == 1
        assert page.locator(
            'form.filters input[name="state"][value="amount_mismatch"]'
        ).is_checked()
        sheets = page.evaluate("Array.from(document.styleSheets, sheet => sheet.href)")
        assert sheets == [f"{finance_server.url}/console/static/console.css"]

        page.click("tr[data-identifier] a.identifier")
        page.wait_for_url("**/console/payments/order-2")
        assert page.locator("h1 code").inner_text() == "order-2"

        page.click('tr[data-event="delivery"] a[href^="/console/deliveries/"]')
        page.wait_for_url("**/console/deliveries/*")
        received = page.locator("pre.body.raw").inner_text()  # the bytes as they arrived
        assert json.loads(received)["merchant_transaction_id"] == "order-2"
        assert '"payment_amount": "9.00"' in page.locator("pre.body:not(.raw)").inner_text()

        assert page.locator("script").count() == 0
        assert errors == []
        assert messages == []
        assert [url for url in requested if not url.startswith(finance_server.url + "/")] == []
    finally:
        context.close()


def test_finance_export_starts_from_its_form_and_downloads_when_its_page_says_ready(
    browser: Browser, finance_server: LiveServer
) -> None:
    """The export is a form a viewer submits (its token and the page's filters hidden in it);
    its page reloads itself without script until ready, and offers the file whose row count
    and SHA-256 it shows."""
    context = browser.new_context(extra_http_headers={ROLE_HEADER: "viewer"})
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on(
            "console",
            lambda message: errors.append(message.text) if message.type == "error" else None,
        )

        page.goto(f"{finance_server.url}/console/reconciliation?period=7d&state=amount_mismatch")
        page.click("form.export button[type=submit]")
        page.wait_for_url("**/console/exports/*")
        page.locator('[data-state="ready"]').wait_for()
        link = page.locator("a.download")
        assert link.get_attribute("download") is not None
        # Through the context's own cookies and headers: headless Chromium cancels downloads
        # it is asked to save, whatever the server sends.
        fetched = page.request.get(f"{finance_server.url}{link.get_attribute('href')}")
        body = fetched.body()

        assert fetched.status == 200
        assert "filename=reconciliation.csv" in fetched.headers["content-disposition"]
        lines = body.decode().splitlines()
        assert [line.split(",")[0] for line in lines[1:]] == ["order-2"]
        assert page.locator("[data-rows]").inner_text() == "1"
        assert page.locator("[data-sha256]").inner_text() == hashlib.sha256(body).hexdigest()
        assert page.locator("script").count() == 0
        assert errors == []
    finally:
        context.close()


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (375, 740)], ids=["desktop", "phone"])
def test_finance_shows_as_of_and_a_revised_day_linked_to_its_delivery(
    browser: Browser,
    make_app: AppFactory,
    make_body: BodyFactory,
    sign: SignFunction,
    serve: Callable[[Flask], LiveServer],
    monkeypatch: pytest.MonkeyPatch,
    width: int,
    height: int,
) -> None:
    """A day three days back revised by a late notification, and figures the refresh could not
    finish (no time left), at a desk's width and a phone's: both said, the page still fits, and
    the revised day's link opens the late delivery."""
    import payhooks.console.finance_views as finance_views
    from payhooks.receiver import receiver_state

    app = make_app()
    Console(app, authorize=_finance_person)
    client = app.test_client()

    def deliver(transaction: str, days_ago: int) -> None:
        when = (datetime.now(UTC) - timedelta(days=days_ago)).strftime("%Y%m%d%H%M%S")
        body = make_body(
            external_identifier="lost-1", transaction_id=transaction, payment_time=when
        )
        answer = client.post("/payhooks/notifications", data=body, headers=sign(body))
        assert answer.status_code == 200, answer.get_data(as_text=True)

    with app.app_context():
        rollup = receiver_state().ledger.finance.rollup
        deliver("ll-1", 3)
        assert rollup.refresh().done
        deliver("ll-2", 3)  # late: the day had ended
        assert rollup.refresh().revised == 1
        late = receiver_state().ledger.receiver.delivery_log(limit=1).rows[0].id
        deliver("ll-3", 1)  # not counted yet: the page's refresh has no time
    monkeypatch.setattr(finance_views, "REFRESH_BUDGET_S", 0)
    server = serve(app)
    context = browser.new_context(
        extra_http_headers={ROLE_HEADER: "viewer"}, viewport={"width": width, "height": height}
    )
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{server.url}/console/reconciliation?period=7d&view=table")
        assert page.locator("[data-as-of]").is_visible()
        assert "The figures hold as of" in page.locator("[data-as-of]").inner_text()
        assert page.locator("li[data-revised]").is_visible()
        assert page.locator("[data-revised-day]").count() == 1
        # what this page adds fits the screen (the rows' table overflows a phone already:
        # a matter of its own)
        right = "Math.max(...Array.from(document.querySelectorAll("
        right += "'[data-as-of], section.revised, section.revised *, [data-revised-day]'),"
        right += " e => e.getBoundingClientRect().right))"
        assert page.evaluate(right) <= page.evaluate("window.innerWidth")
        page.click(f'li[data-revised] a[href="/console/deliveries/{late}"]')
        page.wait_for_url(f"**/console/deliveries/{late}")
        assert errors == []
    finally:
        context.close()
