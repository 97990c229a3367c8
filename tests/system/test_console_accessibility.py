"""The console for people who use a keyboard or a screen reader: axe-core finds no serious or
critical violation on any page, at a desktop's and a phone's width, and the keyboard walks the
delivery log's links and controls in order, each with a visible focus, Enter opening a row.

axe-core is vendored (``tests/support/vendor``) and injected by Playwright. The pages' policy
runs no script, so only this test's browser context bypasses it; no page ever loads axe.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from flask import Flask
from werkzeug.serving import make_server

from payhooks.console import Console
from payhooks.receiver import PayHooks, receiver_state
from tests.support.app import TEST_SECRET, notification_body, standard_webhooks_signer
from tests.support.browser import BROWSER_TIMEOUT_MS, SCREENS
from tests.support.console_pages import (
    CONSOLE_PAGES,
    PREFIX,
    ROLE_HEADER,
    fill_console_ledger,
    page_path,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

AXE = Path(__file__).resolve().parents[1] / "support" / "vendor" / "axe.min.js"
#: The impacts that fail the test; ``moderate`` and ``minor`` are reported by axe but left to
#: judgement.
FAILING_IMPACTS = ("serious", "critical")
#: Every link and control a keyboard can reach, in document order.
FOCUSABLE = "a[href], button, input:not([type=hidden]), select, textarea"

_VIOLATIONS = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map(n => n.target.join(" ")),
  }));
}"""


class Served:
    """The console on loopback with a filled ledger: its base URL and a processed delivery."""

    def __init__(self, url: str, delivery_id: int) -> None:
        self.url = url
        self.delivery_id = delivery_id

    def page(self, name: str) -> str:
        return self.url + page_path(name, PREFIX, self.delivery_id)


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)],
)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The console on loopback with a filled ledger, once per engine for the module: axe only
    reads the pages, and a fresh app, ledger and server per page was half this module's time
    (88 s of 180 s in CI)."""
    folder = tmp_path_factory.mktemp("axe")
    database: Path | str = folder / "payhooks.db"
    postgres = None
    if request.param == "postgresql":
        postgres, template = request.getfixturevalue("postgres_server")
        database = postgres.create_database(template)
    app = Flask("payhooks_axe", instance_path=str(folder / "instance"))
    app.config.update(
        TESTING=True,
        SECRET_KEY="test-secret-key",
        PAYHOOKS_DATABASE=str(database),
        PAYHOOKS_SECRETS=[TEST_SECRET],
    )
    PayHooks(app)
    Console(app, authorize=lambda request: request.headers.get(ROLE_HEADER), url_prefix=PREFIX)
    delivery_id = fill_console_ledger(
        app.test_client(), notification_body, standard_webhooks_signer(TEST_SECRET)
    )
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield Served(f"http://127.0.0.1:{server.server_port}", delivery_id)
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        receiver_state(app).ledgers.close()
        if postgres is not None:
            from payhooks.storage.postgresql import close_pools

            close_pools(str(database))
            postgres.drop_database(str(database))


@contextmanager
def _page(
    browser: Browser, screen: str, *, bypass_csp: bool = False, role: str = "viewer"
) -> Iterator[Page]:
    context = browser.new_context(
        **SCREENS[screen], extra_http_headers={ROLE_HEADER: role}, bypass_csp=bypass_csp
    )
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture(params=sorted(SCREENS))
def axe_page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page whose context lets an injected script run despite the console's policy: for
    axe only, in this test only. An operator's, so the action forms are checked too."""
    with _page(browser, request.param, bypass_csp=True, role="operator") as page:
        yield page


@pytest.fixture
def desktop(browser: Browser) -> Iterator[Page]:
    """A desktop page under the console's own policy."""
    with _page(browser, "desktop") as page:
        yield page


@pytest.mark.parametrize("name", sorted(CONSOLE_PAGES))
def test_axe_finds_no_serious_or_critical_violation_on_a_console_page(
    axe_page: Page, served: Served, name: str
) -> None:
    axe_page.goto(served.page(name))
    axe_page.add_script_tag(path=str(AXE))

    violations: list[dict[str, Any]] = axe_page.evaluate(_VIOLATIONS)

    failing = [each for each in violations if each["impact"] in FAILING_IMPACTS]
    assert failing == [], "\n".join(
        f"{each['impact']} {each['id']}: {each['help']} at {each['nodes']}" for each in failing
    )


def test_the_axe_check_fails_a_page_with_a_control_nobody_can_name(
    browser: Browser, served: Served
) -> None:
    """The check above can fail: a search box stripped of its label is a critical violation."""
    with _page(browser, "desktop", bypass_csp=True) as page:
        page.goto(served.page("deliveries"))
        page.evaluate(
            """() => {
              const box = document.querySelector("input[name=q]");
              box.closest("label").replaceWith(box);
            }"""
        )
        page.add_script_tag(path=str(AXE))

        violations: list[dict[str, Any]] = page.evaluate(_VIOLATIONS)

        assert ("label", "critical") in [(each["id"], each["impact"]) for each in violations]


def test_tab_walks_every_link_and_control_of_the_log_in_order_with_a_visible_focus(
    desktop: Page, served: Served
) -> None:
    page = desktop
    page.goto(served.page("deliveries"))
    count = page.evaluate(
        """selector => {
          const shown = Array.from(document.querySelectorAll(selector))
            .filter(e => e.getClientRects().length > 0);
          shown.forEach((e, i) => { e.dataset.tabOrder = String(i); });
          return shown.length;
        }""",
        FOCUSABLE,
    )
    reached: list[str | None] = []
    unfocused: list[str] = []
    for _ in range(count):
        page.keyboard.press("Tab")
        order, outline, width = page.evaluate(
            """() => {
              const e = document.activeElement, style = getComputedStyle(e);
              return [e.dataset.tabOrder ?? null, style.outlineStyle, style.outlineWidth];
            }"""
        )
        reached.append(order)
        if outline == "none" or width == "0px":
            unfocused.append(str(order))

    assert count > 15  # the header's links, every filter, each row's two links, the pager
    assert reached == [str(n) for n in range(count)]
    assert unfocused == []


def test_enter_on_a_row_s_link_opens_the_delivery(desktop: Page, served: Served) -> None:
    page = desktop
    page.goto(served.page("deliveries"))
    target = f"/console/deliveries/{served.delivery_id}"

    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('href')") == target:
            break
    else:
        pytest.fail(f"Tab never reached the link to {target}")
    page.keyboard.press("Enter")

    page.wait_for_url(f"**{target}")
    assert page.locator("h1").inner_text().startswith(f"Delivery #{served.delivery_id}")
