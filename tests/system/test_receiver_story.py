"""The merchant's code is owed until it returns, end to end, as a person meets it.

The README's shop on a real HTTP server on loopback, with the console and the metrics mounted,
the retry timer running as in production (the app is not under test mode), and a shipping
receiver that raises: for one order until a person fixes the warehouse, for another once.
Notifications go over HTTP, signed by the ``standardwebhooks`` package. Then every place a
person looks says so: the delivery log, a delivery's page, the exceptions queue, ``payhooks
check``, the metrics and the health strip. The flaky order's retry ships it by itself; the
broken one is parked after its last round, and once the warehouse is back an operator re-runs it
from the console in Chromium, which says truthfully what ran, and the audit log names who.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from flask import Flask

from payhooks.console import Console
from payhooks.receiver import Metrics, signals
from payhooks.storage import Ledger
from payhooks.storage.reads import EntryKind
from tests.support.app import AppFactory, BodyFactory, SignFunction
from tests.support.browser import BROWSER_TIMEOUT_MS
from tests.support.console_actions import OPERATOR, grant_hook
from tests.support.live_server import LiveServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.system

#: Rounds in all: the broken order is parked after the third, a few seconds in.
ROUNDS = 3


@dataclass
class Warehouse:
    """Ships each order once; raises for the orders in ``broken`` and, once, for ``flaky``."""

    broken: set[str] = field(default_factory=set)
    flaky: set[str] = field(default_factory=set)
    shipped: list[str] = field(default_factory=list)

    def __call__(self, sender: Flask, *, outcome: Any, **extra: Any) -> None:
        order = outcome.external_identifier
        if order in self.broken:
            raise RuntimeError(f"warehouse API down while shipping {order}")
        if order in self.flaky:
            self.flaky.discard(order)
            raise RuntimeError(f"warehouse timed out shipping {order}")
        if order not in self.shipped:
            self.shipped.append(order)


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def _signal_states(database: Path | str) -> dict[str, tuple[int, bool, bool]]:
    """Each owed-or-sent payment-succeeded by order: (rounds, sent, parked)."""
    with Ledger(database) as ledger:
        found = {}
        for identifier in ("boom-cny-01", "flaky-cny-02"):
            story = ledger.story(identifier)
            assert story is not None
            for signal in story.of(EntryKind.SIGNAL):
                if signal["signal"] == "payment-succeeded":
                    found[identifier] = (
                        signal["attempts"],
                        signal["sent_at"] is not None,
                        signal["parked_at"] is not None,
                    )
        return found


def test_a_raising_receiver_is_retried_parked_seen_everywhere_and_re_run_from_the_console(
    make_app: AppFactory,
    make_body: BodyFactory,
    sign: SignFunction,
    serve: Callable[[Flask], LiveServer],
    database: Path | str,
    browser: Browser,
) -> None:
    app = make_app(
        TESTING=False,  # the retry timer runs, as under gunicorn
        PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS=1,
        PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS=2,
        PAYHOOKS_SIGNALS_MAX_ATTEMPTS=ROUNDS,
        PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS=1,
    )
    Console(app, authorize=grant_hook)
    Metrics(app, authorize=lambda request: True, url="/internal/metrics")
    warehouse = Warehouse(broken={"boom-cny-01"}, flaky={"flaky-cny-02"})
    signals.payment_succeeded.connect(warehouse, sender=app)
    server = serve(app)
    with Ledger(database) as ledger:
        for order in ("boom-cny-01", "flaky-cny-02"):
            ledger.expect_transaction(order, 19900, "CNY")
    deliveries = {}
    for order in ("boom-cny-01", "flaky-cny-02"):
        body = make_body(
            "wallet", external_identifier=order, transaction_id=f"ll-{order}", amount="199.00"
        )
        answer = server.post("/payhooks/notifications", body, sign(body))
        assert answer.status == 200
        deliveries[order] = answer.json()["delivery_id"]

    # The timer retries by itself: the flaky order ships, the broken one is parked.
    _wait_for(
        lambda: _signal_states(database).get("flaky-cny-02", (0, False, False))[1],
        "the flaky order's retry",
    )
    _wait_for(
        lambda: _signal_states(database).get("boom-cny-01", (0, False, False))[2],
        "the broken order's signal to be parked",
    )
    assert warehouse.shipped == ["flaky-cny-02"]
    assert _signal_states(database) == {
        "boom-cny-01": (ROUNDS, False, True),
        "flaky-cny-02": (2, True, False),
    }

    # payhooks check, from cron: receivers fails and names the parked signal.
    checked = app.test_cli_runner().invoke(
        args=["payhooks", "check", "--format", "json", "--skip", "signals"]
    )
    assert checked.exit_code == 1, checked.output
    report = json.loads(checked.output.splitlines()[0])
    (receivers,) = [c for c in report["checks"] if c["name"] == "receivers"]
    assert receivers["ok"] is False
    assert receivers["counts"]["parked_signals"] == 1
    assert receivers["counts"]["receiver_errors_last_day"] == ROUNDS + 1

    # The metrics: the receiver's errors by signal and receiver, the parked signal.
    scraped = server.get("/internal/metrics").body.decode()
    receiver = "tests.system.test_receiver_story.Warehouse"
    assert (
        f'payhooks_receiver_errors_total{{receiver="{receiver}",signal="payment-succeeded"}} '
        f"{float(ROUNDS + 1)}"
    ) in scraped
    assert "payhooks_parked_signals 1.0" in scraped
    assert "payhooks_owed_signals 1.0" in scraped

    context = browser.new_context(extra_http_headers=OPERATOR)
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    page = context.new_page()
    try:
        # The delivery log: the row is not a plain green "processed".
        page.goto(f"{server.url}/console/deliveries?window=all")
        row = page.locator(f'tr[data-delivery="{deliveries["boom-cny-01"]}"]')
        assert row.locator(".badge-receiver_error").count() == 1
        assert "warehouse API down" in row.locator('td[data-label="Error"]').inner_text()
        flaky_row = page.locator(f'tr[data-delivery="{deliveries["flaky-cny-02"]}"]')
        assert flaky_row.locator(".badge-receiver_error").count() == 0
        # The health strip counts the failing receiver and the parked signal.
        strip = page.locator('[data-figure="receivers"]')
        assert "alarm" in (strip.get_attribute("class") or "")
        assert "1 signal(s), 1 parked" in strip.inner_text()
        # The flaky delivery's page lists both runs.
        page.goto(f"{server.url}/console/deliveries/{deliveries['flaky-cny-02']}")
        results = page.locator('table.runs td[data-label="Result"]').all_inner_texts()
        assert [text.split()[0] for text in results] == ["raised", "returned"]
        # The exceptions queue lists the parked signal with its re-run.
        page.goto(f"{server.url}/console/exceptions")
        parked = page.locator('tr[data-state="parked"]')
        assert parked.count() == 1
        assert "boom-cny-01" in parked.inner_text()

        # The warehouse is back; an operator re-runs it from the queue.
        warehouse.broken.clear()
        parked.locator("text=Re-run this payment's owed receivers").click()
        page.wait_for_load_state()
        flash = page.locator(".flash")
        assert flash.inner_text() == (
            "Ran 1 receiver(s) for 1 delivery(ies): 1 returned, 0 raised."
        )
        assert "flash-succeeded" in (flash.get_attribute("class") or "")
        page.goto(f"{server.url}/console/exceptions")
        assert page.locator('tr[data-state="parked"]').count() == 0
        assert page.locator("tr[data-failing-signal]").count() == 0

        # Nothing is owed now: the delivery's page offers no re-run.
        page.goto(f"{server.url}/console/deliveries/{deliveries['boom-cny-01']}")
        assert page.locator("text=Run the receivers still owed").count() == 0
        page.click("text=Audit log")
        entry = page.locator('tr[data-action="send_signals"]').first
        assert entry.locator('td[data-label="Who"]').inner_text() == "ana@example.com (operator)"
        assert "1 returned, 0 raised" in entry.locator('td[data-label="Result"]').inner_text()
    finally:
        context.close()

    assert warehouse.shipped == ["flaky-cny-02", "boom-cny-01"]
    checked = app.test_cli_runner().invoke(args=["payhooks", "check", "--skip", "signals"])
    assert "ok receivers" in checked.output
