"""The console in a real browser: Debian's Chromium, from the delivery log to a delivery to its
payment, at a desktop's and a phone's width.

What the test client cannot show: that the policy really lets the page's own stylesheet load
and nothing else runs (no dialog from a hostile identifier, no console error, no CSP report),
that the pages fit a phone's screen, and that the keyboard reaches the links. The browser is
launched as in :mod:`tests.system.test_browser`: skipped where it is missing, failed under
``CI=true``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from flask import Flask

from payhooks.console import Console
from payhooks.storage import Ledger
from tests.support.app import AppFactory, BodyFactory, SignFunction
from tests.support.browser import BROWSER_TIMEOUT_MS, SCREENS
from tests.support.live_server import LiveServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page

ROLE_HEADER = "X-Test-Console-Role"
#: Markup that would run if it were not escaped, and a bidi override that would reorder it.
HOSTILE = '"><img src=x onerror=alert(1)><script>alert(2)</script>\u202ex'
#: How the console shows it: the markup as text, the override as an escape.
HOSTILE_SHOWN = '"><img src=x onerror=alert(1)><script>alert(2)</script>\\u202ex'


class Watched:
    """What the page reported while the test drove it."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.messages: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning") or "Content Security Policy" in message.text:
            self.messages.append(f"{message.type}: {message.text}")


@pytest.fixture(params=sorted(SCREENS))
def screen(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Watched]:
    """A fresh page at a desktop's or a phone's size, sending a viewer's role."""
    context = browser.new_context(
        **SCREENS[request.param], extra_http_headers={ROLE_HEADER: "viewer"}
    )
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        yield Watched(context.new_page())
    finally:
        context.close()


@pytest.fixture
def console_server(
    make_app: AppFactory,
    make_body: BodyFactory,
    sign: SignFunction,
    serve: Callable[[Flask], LiveServer],
) -> LiveServer:
    """The receiver and a console on loopback, with a paid order and a hostile one delivered
    through the signed-notification path."""
    app = make_app()
    Console(app, authorize=lambda request: request.headers.get(ROLE_HEADER))
    client = app.test_client()
    for identifier, transaction in (("order-1", "ll-1"), (HOSTILE, "ll-hostile")):
        body = make_body(external_identifier=identifier, transaction_id=transaction)
        answer = client.post("/payhooks/notifications", data=body, headers=sign(body))
        assert answer.status_code in (200, 422), answer.get_data(as_text=True)
    return serve(app)


def _check_readable(watched: Watched, server: LiveServer) -> None:
    """The page fits the screen's width, is styled by the console's stylesheet, and loaded
    nothing from anywhere else."""
    page = watched.page
    fits = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    font = page.evaluate("getComputedStyle(document.body).fontFamily")
    sheets = page.evaluate("Array.from(document.styleSheets, sheet => sheet.href)")

    assert fits, f"{page.url} is wider than the screen"
    assert "sans-serif" in font
    assert sheets == [f"{server.url}/console/static/console.css"]
    assert page.locator("script").count() == 0


def test_a_viewer_clicks_from_the_log_to_a_delivery_to_its_payment_and_nothing_runs(
    screen: Watched, console_server: LiveServer, database: Path | str
) -> None:
    page = screen.page
    requested: list[str] = []
    page.on("request", lambda sent: requested.append(sent.url))
    with Ledger(database) as ledger:
        hostile_id = next(
            row.id
            for row in ledger.receiver.delivery_log().rows
            if row.external_identifier == HOSTILE
        )

    page.goto(f"{console_server.url}/console/deliveries")
    assert page.locator("h1").inner_text() == "Deliveries"
    assert page.locator(".role").inner_text() == "Role: viewer"
    _check_readable(screen, console_server)
    identifiers = page.locator("a.identifier code").all_inner_texts()
    assert identifiers == [HOSTILE_SHOWN, "order-1"]

    page.click(f'a[href="/console/deliveries/{hostile_id}"]')
    page.wait_for_url(f"**/console/deliveries/{hostile_id}")
    assert page.locator("h1").inner_text().startswith(f"Delivery #{hostile_id}")
    _check_readable(screen, console_server)

    page.click("dd a.identifier")
    page.wait_for_url("**/console/payments/**")
    assert page.locator("h1 code").inner_text() == HOSTILE_SHOWN
    assert page.locator(f'a[href="/console/deliveries/{hostile_id}"]').count() >= 1
    _check_readable(screen, console_server)

    assert page.locator("img").count() == 0
    assert screen.dialogs == []
    assert screen.errors == []
    assert screen.messages == []
    assert [url for url in requested if not url.startswith(console_server.url + "/")] == []


def test_the_keyboard_reaches_the_log_s_links_in_order_with_a_visible_focus(
    screen: Watched, console_server: LiveServer
) -> None:
    page = screen.page
    page.goto(f"{console_server.url}/console/deliveries")

    page.keyboard.press("Tab")
    first = page.evaluate("document.activeElement.getAttribute('href')")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    reached = [first]
    for _ in range(40):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.getAttribute('href')"))

    links = [href for href in reached if href]
    assert links[:2] == ["/console/deliveries", "/console/deliveries/refused"]
    assert outline == "solid"
    assert "/console/payments/order-1" in links
    assert any(href.rpartition("/")[2].isdigit() for href in links)
    assert screen.messages == []
