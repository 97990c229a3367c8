"""How fresh the finance page is: the rollup's refresh before it reads, "as of" when the
refresh could not finish, and a closed day revised by a late notification, marked with a
link to that notification's delivery (payhooks.storage.reads.rollup)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from flask.testing import FlaskClient

import payhooks.console.finance_views as finance_views
from payhooks.console import Console
from payhooks.storage import Ledger
from tests.console.conftest import VIEWER, Deliver, header_role
from tests.support.app import AppFactory

PAGE = "/console/reconciliation"


def received(html: str) -> str:
    """The received tile's text."""
    found = re.search(r'data-tile="received">(.*?)</article>', html, re.S)
    assert found is not None
    return found.group(1)


def paid_time(days_ago: int) -> str:
    return (datetime.now(UTC) - timedelta(days=days_ago)).strftime("%Y%m%d%H%M%S")


def test_the_page_brings_the_rollup_up_to_date_before_it_reads(
    console: FlaskClient, ledger: Ledger, deliver: Deliver
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    deliver(external_identifier="order-1", transaction_id="ll-1", payment_time=paid_time(1))
    html = console.get(PAGE, headers=VIEWER).get_data(as_text=True)
    assert "data-as-of" not in html
    assert ledger.vitals().rollup_lag == timedelta(0)
    assert "data-count>1 payment or period<" in received(html)


def test_figures_the_refresh_could_not_reach_are_said_to_be_as_of_their_time(
    console: FlaskClient, ledger: Ledger, deliver: Deliver, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    assert ledger.finance.rollup.refresh().done
    before = datetime.now(UTC)
    deliver(external_identifier="order-1", transaction_id="ll-1", payment_time=paid_time(1))
    monkeypatch.setattr(finance_views, "REFRESH_BUDGET_S", 0)  # a refresh with no time left
    html = console.get(PAGE, headers=VIEWER).get_data(as_text=True)
    [as_of] = re.findall(r'data-as-of="([^"]+)"', html)
    assert before <= datetime.fromisoformat(as_of) <= datetime.now(UTC)
    assert "The figures hold as of" in html
    # received is not counted yet: the tile says what held then, and the page says so
    assert "data-count>1 payment" not in received(html)
    monkeypatch.setattr(finance_views, "REFRESH_BUDGET_S", 5)
    html = console.get(PAGE, headers=VIEWER).get_data(as_text=True)
    assert "data-as-of" not in html
    assert "data-count>1 payment or period<" in received(html)


@pytest.mark.parametrize("query", ["", "?state=paid"], ids=["period", "filtered"])
def test_a_change_waiting_in_the_previous_period_is_said_as_of_not_read_row_by_row(
    console: FlaskClient,
    ledger: Ledger,
    deliver: Deliver,
    monkeypatch: pytest.MonkeyPatch,
    query: str,
) -> None:
    assert ledger.finance.rollup.refresh().done
    before = datetime.now(UTC)
    # an unexpected payment opened and paid 10 days ago: the 7 days before this week's
    deliver(external_identifier="lost-1", transaction_id="ll-1", payment_time=paid_time(10))
    monkeypatch.setattr(finance_views, "REFRESH_BUDGET_S", 0)
    html = console.get(PAGE + query, headers=VIEWER).get_data(as_text=True)
    [as_of] = re.findall(r'data-as-of="([^"]+)"', html)
    assert before <= datetime.fromisoformat(as_of) <= datetime.now(UTC)
    assert ledger.vitals().rollup_lag > timedelta(0)


def test_a_filter_s_totals_hold_as_of_the_overview_when_changes_wait(
    console: FlaskClient, ledger: Ledger, deliver: Deliver, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    assert ledger.finance.rollup.refresh().done
    deliver(external_identifier="order-1", transaction_id="ll-1", payment_time=paid_time(0))
    monkeypatch.setattr(finance_views, "REFRESH_BUDGET_S", 0)

    def received_total() -> str:
        html = console.get(PAGE + "?currency=CNY", headers=VIEWER).get_data(as_text=True)
        found = re.search(
            r'<tr data-total="CNY">.*?data-label="Received[^"]*"[^>]*>([^<]*)<', html, re.S
        )
        assert found is not None, html
        return found.group(1)

    # as the rollup held it, like the tiles the page says are "as of"; then current
    assert received_total() == "0.00"
    monkeypatch.setattr(finance_views, "REFRESH_BUDGET_S", 5)
    assert received_total() == "25.00"


def test_a_late_notification_marks_its_closed_day_revised_with_a_link_to_it(
    console: FlaskClient, ledger: Ledger, deliver: Deliver
) -> None:
    three_days_ago = (datetime.now(UTC) - timedelta(days=3)).date()
    deliver(external_identifier="lost-1", transaction_id="ll-1", payment_time=paid_time(3))
    html = console.get(PAGE + "?view=table", headers=VIEWER).get_data(as_text=True)
    assert "data-revised" not in html
    late = deliver(
        external_identifier="lost-1",
        transaction_id="ll-2",
        amount="3.00",
        payment_time=paid_time(3),
    )
    html = console.get(PAGE + "?view=table", headers=VIEWER).get_data(as_text=True)
    link = f'<a href="/console/deliveries/{late}">delivery {late}</a>'
    assert f'data-revised="{three_days_ago.isoformat()}"' in html
    assert re.search(r"<li data-revised=[^>]*>[^<]*revised [^<]* by " + re.escape(link), html)
    assert re.search(r"data-revised-day>revised by " + re.escape(link), html)


def test_a_read_only_console_says_it_cannot_count_the_changes_rather_than_to_reload(
    make_app: AppFactory, ledger: Ledger, deliver: Deliver, database: Path | str
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    assert ledger.finance.rollup.refresh().done
    deliver(external_identifier="order-1", transaction_id="ll-1", payment_time=paid_time(1))
    app = make_app()
    Console(app, authorize=header_role, url_prefix="/reader", database=database, read_only=True)
    html = app.test_client().get("/reader/reconciliation", headers=VIEWER).get_data(as_text=True)
    assert "data-as-of" in html
    assert "this console cannot bring the totals up to date" in html
    assert "Reload in a moment" not in html
    assert ledger.vitals().rollup_lag > timedelta(0)  # nothing was written
