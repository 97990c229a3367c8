"""A customer in a real browser: headless Chromium from the merchant's checkout to the sandbox's
hosted page and back to the merchant's return page.

The other end-to-end tests make the person's choice with an HTTP form post and never follow the
redirect home; a browser is what follows the 303s, sends the return URL's token back exactly as
the service appended ``resultCode`` to it, and renders the page the customer reads. Everything
runs on loopback: the merchant's Flask app (PayHooks mounted, a checkout that creates the
payment with :class:`ServiceClient`) and the sandbox, which signs its notifications for the
merchant's receiver.

The browser is Debian's ``chromium`` driven by Playwright's sync API (``.ci/run`` installs
both). Where it is missing the tests are skipped with the command that installs it, but they
fail under ``CI=true``: CI must run them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from flask import Flask, redirect, render_template_string, request
from werkzeug.wrappers import Response

from payhooks.receiver import PayHooks, return_url
from payhooks.service.client import (
    DirectWalletTransaction,
    OrchestratorWalletTransaction,
    ServiceClient,
)
from payhooks.service.sandbox import NotificationState, SandboxServer, SandboxSettings
from payhooks.storage import Ledger, ReconciliationState
from tests.support.app import TEST_SECRET
from tests.support.browser import BROWSER_TIMEOUT_MS, SCREENS
from tests.support.live_server import LiveServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

MERCHANT = "sandbox-merchant"
CONFIRMED_PAID = {"state": "paid", "confirmed": "true"}
CONFIRMED_CANCELLED = {"state": "cancelled", "confirmed": "true"}

Serve = Callable[[Flask], LiveServer]

CART = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Cart {{ order }}</title></head>
<body>
  <h1>Tea set, 199.00 CNY</h1>
  <form method="post" action="/checkout/{{ order }}">
    <button type="submit" name="wallet" value="alipay_hk">Alipay HK</button>
    <button type="submit" name="wallet" value="alipay">Alipay</button>
  </form>
</body></html>
"""


HOME = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tea shop</title></head>
<body><h1>Tea shop</h1></body></html>
"""


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context per test (no cookies or cache shared between customers)."""
    context = browser.new_context()
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture(params=sorted(SCREENS))
def screen(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh page at a desktop's or a phone's size."""
    context = browser.new_context(**SCREENS[request.param])
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


class Shop:
    """The merchant's app served on loopback and the sandbox notifying its receiver."""

    def __init__(self, merchant: LiveServer, sandbox: SandboxServer, database: Path) -> None:
        self.merchant = merchant
        self.sandbox = sandbox
        self.database = database

    def state(self, order: str) -> ReconciliationState | None:
        with Ledger(self.database) as ledger:
            return ledger.state(order)


def _merchant_app(tmp_path: Path, database: Path) -> Flask:
    """A merchant's app as the README's ``shop.py`` would be once it creates payments: PayHooks
    mounted, a cart page, and a checkout that registers and creates the payment with the
    service's client, then sends the customer to the hosted page."""
    app = Flask("browser_shop", instance_path=str(tmp_path / "instance"))
    app.config.update(
        SECRET_KEY="browser-test-secret-key",
        PAYHOOKS_DATABASE=str(database),
        PAYHOOKS_SECRETS=[TEST_SECRET],
        PAYHOOKS_SHOP_URL="/",
    )
    payhooks = PayHooks(app)

    @app.get("/")
    def home() -> str:
        return render_template_string(HOME)

    @app.get("/cart/<order>")
    def cart(order: str) -> str:
        return render_template_string(CART, order=order)

    @app.post("/checkout/<order>")
    def checkout(order: str) -> Response:
        # return_url() is absolute here: it is built from this request's host.
        created_request: OrchestratorWalletTransaction | DirectWalletTransaction
        if request.form.get("wallet") == "alipay":  # a direct wallet: shape C
            created_request = DirectWalletTransaction(
                external_identifier=order,
                amount=19900,
                currency="CNY",
                method="alipay",
                redirect_url=return_url(order),
                cancel_url=return_url(order, cancel=True),
                subject="Tea set",
            )
        else:  # through the orchestrator: shape B
            created_request = OrchestratorWalletTransaction(
                external_identifier=order,
                amount=19900,
                currency="CNY",
                method="adyen",
                wallet_type="alipay_hk",
                return_url=return_url(order),
            )
        with ServiceClient(
            app.config["SHOP_SERVICE_URL"],
            access_token=app.config["SHOP_SERVICE_TOKEN"],
            merchant_account_id=MERCHANT,
            ledger=payhooks.ledger,
        ) as client:
            created = client.create_transaction(created_request)
        assert created.payment_url is not None
        return redirect(created.payment_url, 303)

    return app


@pytest.fixture
def shop(tmp_path: Path, serve: Serve) -> Iterator[Shop]:
    database = tmp_path / "payhooks.db"
    app = _merchant_app(tmp_path, database)
    merchant = serve(app)
    settings = SandboxSettings(
        signing_key=TEST_SECRET,
        notification_url=f"{merchant.url}/payhooks/notifications",
        notify_backoff=0.05,
        notify_attempts=3,
    )
    with SandboxServer.start(settings) as sandbox:
        # The merchant learns the service's address and token once both are up.
        app.config.update(SHOP_SERVICE_URL=sandbox.url, SHOP_SERVICE_TOKEN=sandbox.issue_token())
        yield Shop(merchant, sandbox, database)


def _check_out(page: Page, shop: Shop, order: str, wallet: str) -> None:
    """From the merchant's cart to the sandbox's hosted page for ``order``."""
    page.goto(f"{shop.merchant.url}/cart/{order}")
    page.get_by_role("button", name=wallet, exact=True).click()
    page.wait_for_url(f"{shop.sandbox.url}/pay/**")
    assert page.get_by_role("heading").inner_text() == "Pay 199.00 CNY"
    assert order in page.inner_text("body")


def _choose(page: Page, shop: Shop, outcome: str, route: str) -> None:
    """Press ``outcome`` on the hosted page and land back at the merchant's ``route``."""
    page.get_by_role("button", name=outcome, exact=True).click()
    page.wait_for_url(f"{shop.merchant.url}/payhooks/{route}/**")


def _shown(page: Page) -> dict[str, Any]:
    main = page.locator("main")
    return {
        "state": main.get_attribute("data-state"),
        "confirmed": main.get_attribute("data-confirmed"),
    }


def _reload_until(page: Page, expected: dict[str, Any], tries: int = 20) -> dict[str, Any]:
    """Reload the return page (it does not refresh itself) until it shows ``expected``, at
    most ``tries`` times a quarter of a second apart; the last view either way."""
    shown = _shown(page)
    for _ in range(tries):
        if shown == expected:
            break
        page.wait_for_timeout(250)
        page.reload()
        shown = _shown(page)
    return shown


def test_the_return_page_shows_processing_until_the_notification_then_paid(
    page: Page, shop: Shop
) -> None:
    # The notification is lost on purpose, so the customer is certainly back before it.
    shop.sandbox.drop_notifications()
    _check_out(page, shop, "order-browser-1", "Alipay HK")
    _choose(page, shop, "Pay", "return")

    assert "resultCode=Authorised" in page.url
    assert shop.sandbox.wait_for_notifications(10)
    (dropped,) = shop.sandbox.notifications()
    assert dropped.state is NotificationState.DROPPED
    page.reload()
    assert _shown(page) == {"state": "processing", "confirmed": "false"}
    assert "waiting for your payment to be confirmed" in page.inner_text("h1")
    assert shop.state("order-browser-1") is ReconciliationState.PENDING

    shop.sandbox.resend(dropped.id)
    assert shop.sandbox.wait_for_notifications(10)
    assert _reload_until(page, CONFIRMED_PAID) == CONFIRMED_PAID
    assert "your payment is confirmed" in page.inner_text("h1")
    assert shop.state("order-browser-1") is ReconciliationState.PAID


def test_a_direct_wallet_payment_returns_to_a_page_that_shows_paid_once_notified(
    page: Page, shop: Shop
) -> None:
    _check_out(page, shop, "order-browser-2", "Alipay")
    _choose(page, shop, "Pay", "return")

    assert _reload_until(page, CONFIRMED_PAID) == CONFIRMED_PAID
    assert shop.state("order-browser-2") is ReconciliationState.PAID


@pytest.mark.parametrize(
    ("wallet", "route"),
    [
        ("Alipay HK", "return"),  # the orchestrator returns with resultCode=Cancelled
        ("Alipay", "cancel"),  # the direct wallet returns to its cancel_url
    ],
)
def test_cancelling_on_the_hosted_page_returns_to_a_page_that_shows_cancelled(
    page: Page, shop: Shop, wallet: str, route: str
) -> None:
    shop.sandbox.drop_notifications()
    order = f"order-cancel-{route}"
    _check_out(page, shop, order, wallet)
    _choose(page, shop, "Cancel", route)

    # The customer's word (the route or resultCode) first: cancelled, not yet confirmed.
    assert _shown(page) == {"state": "cancelled", "confirmed": "false"}
    assert "cancelled" in page.inner_text("h1")
    assert shop.state(order) is ReconciliationState.PENDING

    assert shop.sandbox.wait_for_notifications(10)
    (dropped,) = shop.sandbox.notifications()
    shop.sandbox.resend(dropped.id)
    assert shop.sandbox.wait_for_notifications(10)
    assert _reload_until(page, CONFIRMED_CANCELLED) == CONFIRMED_CANCELLED
    assert shop.state(order) is ReconciliationState.CANCELLED


def _check_readable(page: Page, merchant: LiveServer) -> None:
    """The page fits the screen's width (no sideways scrolling, even for the longest order
    reference), is styled (not the browser's serif), and loaded nothing but itself."""
    requested: list[str] = []
    page.on("request", lambda sent: requested.append(sent.url))
    page.reload()
    fits = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    width = page.evaluate("window.innerWidth")
    font = page.evaluate("getComputedStyle(document.body).fontFamily")

    assert fits, f"the page is wider than the {width}px screen"
    assert page.viewport_size is not None
    assert width == page.viewport_size["width"]
    assert "sans-serif" in font
    assert page.locator("script").count() == 0
    assert [url for url in requested if not url.startswith(merchant.url + "/")] == []


def test_after_a_failure_the_customer_reads_payment_failed_and_can_try_again(
    screen: Page, shop: Shop
) -> None:
    order = "order-" + "f" * 58  # the longest reference the service accepts: 64 characters
    _check_out(screen, shop, order, "Alipay HK")
    _choose(screen, shop, "Fail", "return")

    assert screen.title() == "Payment failed"
    assert _shown(screen)["state"] == "failed"
    _check_readable(screen, shop.merchant)
    retry = screen.get_by_role("link", name="Try again", exact=True)
    box = retry.bounding_box()
    assert box is not None
    assert box["x"] + box["width"] <= screen.evaluate("window.innerWidth")
    retry.click()
    screen.wait_for_url(f"{shop.merchant.url}/")
    assert screen.get_by_role("heading").inner_text() == "Tea shop"


def test_an_expired_or_forged_return_link_is_a_page_with_a_way_back_not_json(
    screen: Page, shop: Shop
) -> None:
    answer = screen.goto(f"{shop.merchant.url}/payhooks/return/order-gone?token=forged")

    assert answer is not None
    assert answer.status == 404
    assert screen.title() == "Page not found"
    assert screen.get_by_role("heading").inner_text() == (
        "This payment link has expired or is not valid."
    )
    _check_readable(screen, shop.merchant)
    screen.get_by_role("link", name="Back to the shop", exact=True).click()
    screen.wait_for_url(f"{shop.merchant.url}/")
