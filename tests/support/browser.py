"""Debian's Chromium under Playwright, as the browser tests launch it.

Where it is missing the tests are skipped with the command that installs it, but they fail
under ``CI=true``: CI must run them. ``.ci/run`` installs Debian's ``chromium``; Playwright
comes with the ``test`` extra and never downloads a browser of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

__all__ = ["BROWSER_TIMEOUT_MS", "CHROMIUM", "CHROMIUM_ARGS", "INSTALL", "SCREENS", "chromium"]

CHROMIUM = Path("/usr/bin/chromium")
INSTALL = (
    "apt-get install -y chromium && pip install playwright "
    "(or pip install -e '.[test]'; never `playwright install`: Debian's browser is used)"
)
#: Headless, and nothing but the pages it is sent to: Chromium's own background connections
#: (updates, sync, QUIC probes) are refused by a closed network and only slow it down.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: How long the browser waits for a navigation or an element, in milliseconds: generous, as
#: CI's shared machines have been five to ten times slower than a quiet one.
BROWSER_TIMEOUT_MS = 60_000
#: The widths pages are checked at: a desktop window and a phone, which honours the page's
#: viewport meta as a phone's browser does.
SCREENS: dict[str, dict[str, Any]] = {
    "desktop": {"viewport": {"width": 1280, "height": 800}},
    "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}


def _missing_browser() -> str | None:
    """Why the browser cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return f"Playwright is not installed: {INSTALL}"
    if not CHROMIUM.is_file():
        return f"Debian's Chromium is not at {CHROMIUM}: {INSTALL}"
    return None


def chromium() -> Iterator[Browser]:
    """Headless Chromium for a fixture to yield from; closed (and its driver stopped) even
    when a test fails. Missing: the test is skipped, or fails under ``CI=true``."""
    reason = _missing_browser()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser tests: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()
