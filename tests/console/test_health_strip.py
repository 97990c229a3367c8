"""The health strip atop the delivery log (and so the console's home): the ledger's vitals,
read once per page at the console's clock, escaped, with no script."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from flask.testing import FlaskClient

from payhooks.storage import Ledger
from tests.console.conftest import NOTIFY, VIEWER, Clock, Deliver
from tests.support.page_html import parse_page
from tests.support.unreadable_rows import SPOILED_COLUMNS, spoil

LOG = "/console/deliveries"


@pytest.fixture
def traffic(console: FlaskClient, deliver: Deliver) -> None:
    """Through the real receiver: two payments, a duplicate, a malformed body, an invalid
    payload, and two forged requests it refused."""
    deliver(external_identifier="order-1", transaction_id="ll-1")
    deliver(external_identifier="order-2", transaction_id="ll-2", amount="10.00")
    deliver(external_identifier="order-2", transaction_id="ll-2", amount="10.00")
    deliver(body=b'{"merchant_transaction_id": "order-9", ', status=400)
    deliver(body=b'{"merchant_transaction_id": "order-3"}', status=422)
    forged = "v1," + base64.b64encode(b"\0" * 32).decode()
    for n in range(2):
        answer = console.post(
            NOTIFY,
            data=b"{}",
            headers={
                "webhook-id": f"forged-{n}",
                "webhook-timestamp": str(int(datetime.now(UTC).timestamp())),
                "webhook-signature": forged,
            },
        )
        assert answer.status_code == 401


def strip(console: FlaskClient, url: str = LOG) -> dict[str, str]:
    """Each figure of the strip by its ``data-figure`` name: its text, tags stripped."""
    answer = console.get(url, headers=VIEWER, follow_redirects=True)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    page = answer.get_data(as_text=True)
    found = re.search(r"<section class=\"health\".*?</section>", page, re.S)
    assert found is not None, "no health strip"
    figures = {}
    for name, body in re.findall(r'data-figure="([a-z-]+)"[^>]*>(.*?)</(?:div|p)>', found[0], re.S):
        text = re.sub(r"<dt>.*?</dt>", "", body, flags=re.S)
        figures[name] = " ".join(unescape(re.sub(r"<[^>]+>", " ", text)).split())
    return figures


@pytest.mark.usefixtures("traffic")
@pytest.mark.parametrize("url", [LOG, "/console/"])
def test_the_strip_shows_the_last_hours_and_days_failures_and_their_causes(
    console: FlaskClient, url: str
) -> None:
    figures = strip(console, url)
    assert figures["failures-hour"] == "2 of 5 (40.0%); 2 refused"
    assert figures["failures-day"] == "2 of 5 (40.0%); 2 refused"
    assert figures["errors"] == (
        "Errors, 24 h: invalid signature (refused) 2 invalid payload 1 malformed json 1"
    )
    assert figures["signals"] == "0"  # the test client ran the receivers
    assert figures["sync"] == "never"
    assert figures["mismatches"] == "2 unexpected 2"  # nothing was registered
    assert figures["last-delivery"].endswith(" UTC")
    assert figures["last-accepted"].endswith(" UTC")


@pytest.mark.usefixtures("traffic")
def test_the_strip_counts_back_from_the_consoles_clock(console: FlaskClient, clock: Clock) -> None:
    clock.ahead = timedelta(hours=2)
    figures = strip(console)
    assert figures["failures-hour"] == "0 of 0; 0 refused"
    assert figures["failures-day"] == "2 of 5 (40.0%); 2 refused"


def test_an_empty_ledger_says_none_yet_and_never(console: FlaskClient) -> None:
    figures = strip(console)
    assert figures["last-delivery"] == figures["last-accepted"] == "none yet"
    assert figures["failures-hour"] == "0 of 0; 0 refused"
    assert (figures["sync"], figures["mismatches"], figures["signals"]) == ("never", "0", "0")
    assert "errors" not in figures


def test_finance_totals_say_not_built_then_up_to_date_then_how_far_behind(
    console: FlaskClient, ledger: Ledger
) -> None:
    assert strip(console)["rollup"] == "not built yet"
    ledger.expect_transaction("order-1", 2500, "CNY")
    assert ledger.finance.rollup.refresh().done
    assert strip(console)["rollup"] == "up to date"
    ledger.expect_transaction("order-2", 2500, "CNY")
    assert re.fullmatch(r"0 min \d+ s behind, since \S+ \S+ UTC", strip(console)["rollup"])


@pytest.mark.usefixtures("traffic")
def test_a_failing_figure_is_marked_by_a_class_without_script_or_inline_style(
    console: FlaskClient,
) -> None:
    answer = console.get(LOG, headers=VIEWER)
    page = answer.get_data(as_text=True)
    assert re.search(r'data-figure="failures-hour" class="alarm"', page)
    assert not re.search(r'data-figure="signals" class="alarm"', page)
    assert "<script" not in page
    assert "style=" not in page
    assert "script-src" in answer.headers["Content-Security-Policy"] or (
        "default-src" in answer.headers["Content-Security-Policy"]
    )


@pytest.mark.parametrize("column", SPOILED_COLUMNS)
def test_a_stored_time_payhooks_never_writes_shows_the_strip_unreadable_and_the_log_below(
    console: FlaskClient, ledger: Ledger, column: str
) -> None:
    spoil(ledger, column)
    if column == "deliveries.received_at":
        # The log below lists the delivery whose time cannot be read: the page says so in the
        # same sentence (never a traceback, never a 500).
        answer = console.get(LOG, headers=VIEWER)
        assert answer.status_code == 503
        error = parse_page(answer.text).find(data_error="console_ledger_unreadable")
        assert column in error.text()
        return

    figures = strip(console)

    assert list(figures) == ["unreadable"]
    assert figures["unreadable"] == (
        f"The health figures cannot be read. The ledger holds a value in {column} that is not "
        "a time as payhooks writes one (ISO 8601 with its offset): something other than "
        "payhooks changed the row."
    )
