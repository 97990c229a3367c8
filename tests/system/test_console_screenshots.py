"""Screenshots of every console page, at a desktop's and a phone's width, from a ledger filled
through real signed notifications.

Always taken (into the test's folder), so a page that grows past what the docs can carry
fails here. With ``PAYHOOKS_SCREENSHOTS=docs/images`` they are written there for the manual
(``docs/console.md``): ``console-<page>.png`` at the desktop's width and
``console-<page>-phone.png`` at the phone's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from flask import Flask

from payhooks.console import Console
from tests.support.app import AppFactory, BodyFactory, SignFunction
from tests.support.browser import BROWSER_TIMEOUT_MS, SCREENS
from tests.support.console_pages import (
    CONSOLE_PAGES,
    PREFIX,
    ROLE_HEADER,
    fill_console_ledger,
    page_path,
)
from tests.support.live_server import LiveServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser

#: Where the screenshots go when they are wanted for the docs.
TARGET_ENV = "PAYHOOKS_SCREENSHOTS"
#: The most one screenshot may weigh: the docs are read on GitHub and in the sdist.
MAX_BYTES = 150_000
#: The pages shown in the manual (an error page is not worth a picture).
PICTURED = sorted(name for name in CONSOLE_PAGES if name != "not-found")
#: The pages pictured at a desktop's width down to this many pixels only, not whole: they run
#: past one screen, and the whole weighed more than the docs can carry (the finance page's
#: rows below its tiles and chart, 226 KB, and its top 1200 pixels 163 KB once its rows showed
#: refunded and net; the delivery log's last rows below the health strip
#: and the filters, 168 KB). The top shows what the manual describes: the log's first screen;
#: the finance page's tiles with its chart, or its table, under them. The rows further down
#: look as the ones above them. A delivery's page runs on into its body twice, as received and
#: indented (181 KB whole): its top shows its entry, evidence and headers, down to the body.
TOP_ONLY = {"deliveries": 800, "delivery": 1300, "reconciliation": 850, "reconciliation-table": 850}


@pytest.mark.sqlite_only
def test_every_console_page_is_pictured_at_both_widths_within_the_docs_size(
    browser: Browser,
    make_app: AppFactory,
    make_body: BodyFactory,
    sign: SignFunction,
    serve: Callable[[Flask], LiveServer],
    tmp_path: Path,
) -> None:
    app = make_app()
    Console(app, authorize=lambda request: request.headers.get(ROLE_HEADER), url_prefix=PREFIX)
    delivery_id = fill_console_ledger(app.test_client(), make_body, sign)
    server = serve(app)
    target = Path(os.environ.get(TARGET_ENV) or tmp_path)
    target.mkdir(parents=True, exist_ok=True)

    written: dict[str, int] = {}
    for screen in sorted(SCREENS):
        context = browser.new_context(
            **SCREENS[screen], extra_http_headers={ROLE_HEADER: "operator"}
        )
        context.set_default_timeout(BROWSER_TIMEOUT_MS)
        try:
            page = context.new_page()
            for name in PICTURED:
                page.goto(server.url + page_path(name, PREFIX, delivery_id))
                suffix = "" if screen == "desktop" else f"-{screen}"
                path = target / f"console-{name}{suffix}.png"
                # A phone shows its first screen; a desktop the whole page, or its top.
                if screen != "desktop":
                    page.screenshot(path=str(path))
                elif name in TOP_ONLY:
                    width = SCREENS[screen]["viewport"]["width"]
                    page.screenshot(
                        path=str(path),
                        full_page=True,
                        clip={"x": 0, "y": 0, "width": width, "height": TOP_ONLY[name]},
                    )
                else:
                    page.screenshot(path=str(path), full_page=True)
                written[path.name] = path.stat().st_size
        finally:
            context.close()

    assert sorted(written) == sorted(
        f"console-{name}{suffix}.png" for name in PICTURED for suffix in ("", "-phone")
    )
    assert {name: size for name, size in written.items() if size > MAX_BYTES} == {}
