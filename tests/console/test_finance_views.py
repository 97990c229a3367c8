"""The finance page and its export through the test client, on both engines: the period and
the filters come from the URL, the rows and totals follow them, the export (the page's form)
is exactly the filtered rows in the command line's bytes, and a bad value is a 400 page
naming it, on the page and in the form."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from html import unescape
from urllib.parse import parse_qsl

import pytest
from flask.testing import FlaskClient
from werkzeug.datastructures import MultiDict
from werkzeug.test import TestResponse

from payhooks.receiver.cli.reports import write_report
from payhooks.receiver.visible_text import visible
from payhooks.storage import Ledger
from tests.console.conftest import ROLE_HEADER, VIEWER, Deliver
from tests.support.app import BodyFactory
from tests.support.console_actions import token as page_token
from tests.support.console_exports import start_export, wait_for_export
from tests.support.page_html import Element, parse_page

PAGE = "/console/reconciliation"
CSV = "/console/reconciliation.csv"
EXPORTS = "/console/exports"
#: Markup and a bidi override, arriving as an identifier nobody registered.
HOSTILE = '"><script>alert(1)</script>\u202ex'
#: A spreadsheet formula, arriving the same way.
FORMULA = '=HYPERLINK("http://x")'


def paid_time(days_ago: int) -> str:
    """A ``payment_time`` ``days_ago`` days back, well inside the default seven days."""
    return (datetime.now(UTC) - timedelta(days=days_ago)).strftime("%Y%m%d%H%M%S")


@pytest.fixture
def shop(ledger: Ledger, deliver: Deliver) -> Ledger:
    """Registered today: a paid order, an underpaid one, a pending one in EUR; and two
    payments nobody expected, with a hostile and a formula identifier."""
    ledger.expect_transaction("order-1", 2500, "CNY")
    ledger.expect_transaction("order-2", 1000, "CNY")
    ledger.expect_transaction("order-3", 700, "EUR")
    when = paid_time(1)
    deliver(external_identifier="order-1", transaction_id="ll-1", payment_time=when)
    deliver(external_identifier="order-2", transaction_id="ll-2", amount="9.00", payment_time=when)
    deliver(external_identifier=HOSTILE, transaction_id="ll-h", payment_time=when)
    deliver(external_identifier=FORMULA, transaction_id="ll-f", payment_time=when)
    return ledger


def identifiers(html: str) -> list[str]:
    """The rows' identifiers, in the page's order (the override shown as its escape, read
    back)."""
    found = re.findall(r'<tr data-identifier="([^"]*)"', html)
    return [unescape(text).replace("\\u202e", "\u202e") for text in found]


def exported(console: FlaskClient, query: str = "") -> str:
    """The CSV the finance page's export form writes for ``query``, once ready."""
    started = start_export(console, VIEWER, MultiDict(parse_qsl(query)))
    assert started.status_code == 303, started.get_data(as_text=True)
    page = wait_for_export(console, started.headers["Location"], VIEWER)
    assert page.state == "ready"
    download = console.get(f"{started.headers['Location']}/reconciliation.csv", headers=VIEWER)
    assert download.status_code == 200
    assert download.mimetype == "text/csv"
    return download.get_data(as_text=True)


def export_form(console: FlaskClient, query: str) -> TestResponse:
    """The export's POST with the session's token and ``query``'s values as its fields."""
    token = page_token(console, PAGE, VIEWER)
    return console.post(EXPORTS, data=MultiDict([("csrf_token", token), *parse_qsl(query)]),
                        headers=VIEWER)  # fmt: skip


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_both_roles_read_the_page_with_its_tiles_chart_rows_and_totals(
    console: FlaskClient, shop: Ledger, role: str
) -> None:
    page = console.get(PAGE, headers={ROLE_HEADER: role})
    html = page.get_data(as_text=True)

    assert page.status_code == 200
    assert '<a href="/console/reconciliation">Reconciliation</a>' in html
    assert html.count('class="tile"') == 8
    assert 'role="img"' in html
    assert sorted(identifiers(html)) == sorted(["order-1", "order-2", "order-3", HOSTILE, FORMULA])
    assert re.search(r'data-total="CNY">.*?<td data-label="Payments">4</td>', html, re.S)


def test_nobody_without_a_role_sees_it(console: FlaskClient, shop: Ledger) -> None:
    for path in (PAGE, CSV, f"{EXPORTS}/{'0' * 20}"):
        answer = console.get(path)
        assert answer.status_code == 403
        assert "order-1" not in answer.get_data(as_text=True)


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("state=amount_mismatch", ["order-2"]),
        ("state=paid&state=pending", ["order-1", "order-3"]),
        ("preset=needs_person", sorted(["order-2", HOSTILE, FORMULA])),
        ("currency=EUR", ["order-3"]),
        ("kind=unexpected", sorted([HOSTILE, FORMULA])),
        ("kind=transaction&q=order-", ["order-1", "order-2", "order-3"]),
        ("q=order-2", ["order-2"]),
        ("currency=CNY&amount_min=10.00&amount_max=24.99", ["order-2"]),
        ("currency=CNY&amount_min=10.01", ["order-1", HOSTILE, FORMULA]),
        ("period=today&state=failed", []),
    ],
)
def test_filters_in_the_url_select_the_rows_and_the_csv(
    console: FlaskClient, shop: Ledger, query: str, shown: list[str]
) -> None:
    page = console.get(f"{PAGE}?{query}", headers=VIEWER)
    text = exported(console, query)

    assert page.status_code == 200
    assert sorted(identifiers(page.get_data(as_text=True))) == sorted(shown)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [row["external_identifier"].removeprefix("'") for row in rows] == [
        visible(one) for one in sorted(shown)
    ]


def test_the_csv_is_the_command_line_s_bytes_for_the_same_rows(
    console: FlaskClient, shop: Ledger
) -> None:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    since, until = today - timedelta(days=6), today + timedelta(days=1)
    expected = io.StringIO()
    rows = sorted(shop.reconcile(since=since, until=until), key=lambda r: r.external_identifier)
    write_report(rows, expected, "csv")

    text = exported(console)

    assert text == expected.getvalue()
    assert len(rows) == 5


def test_the_csv_neutralises_formulas_from_webhook_bodies(
    console: FlaskClient, shop: Ledger
) -> None:
    text = exported(console, "kind=unexpected")

    cells = [row[0] for row in csv.reader(io.StringIO(text))][1:]
    assert "'" + FORMULA in cells
    assert FORMULA not in cells
    # The bidi override that would show the row as another is written as its escape.
    assert "\u202e" not in text
    assert '"""><script>alert(1)</script>\\u202ex"' in text


def test_hostile_identifiers_are_inert_and_visible_on_the_page(
    console: FlaskClient, shop: Ledger
) -> None:
    html = console.get(PAGE, headers=VIEWER).get_data(as_text=True)

    assert "<script>alert(1)" not in html
    assert "\u202e" not in html
    assert "&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;\\u202ex" in html
    assert "/console/payments/%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E%E2%80%AEx" in html


def test_the_chart_is_svg_without_style_and_its_table_shows_the_same_series(
    console: FlaskClient, shop: Ledger
) -> None:
    chart = console.get(PAGE, headers=VIEWER).get_data(as_text=True)
    table = console.get(f"{PAGE}?view=table", headers=VIEWER).get_data(as_text=True)

    assert chart.count("<svg") == 2  # CNY and EUR, never one scale for both
    assert "style=" not in chart
    assert "<style" not in chart
    assert 'href="/console/reconciliation?view=table"' in chart
    assert "<svg" not in table
    assert 'class="series"' in table
    assert "received 84.00 CNY in all" in chart
    received = re.findall(r'<td data-label="Received">([0-9.]+)</td>', table)
    assert sum(map(Decimal, received)) == Decimal("84.00")


def test_pages_go_by_cursor_and_the_totals_cover_every_page(
    console: FlaskClient, shop: Ledger
) -> None:
    first = console.get(f"{PAGE}?limit=2", headers=VIEWER).get_data(as_text=True)
    next_link = unescape(re.search(r'rel="next" href="([^"]*)"', first).group(1))  # type: ignore[union-attr]
    second = console.get(next_link, headers=VIEWER).get_data(as_text=True)

    assert len(identifiers(first)) == 2
    assert not set(identifiers(second)) & set(identifiers(first))
    assert len(identifiers(first) + identifiers(second)) == 4
    assert re.search(r'data-total="CNY">.*?<td data-label="Payments">4</td>', second, re.S)


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("period=1y", "period"),
        ("from=2026-02-30&until=2026-03-02", "from"),
        ("from=2026-11-01", "from and until"),
        ("from=2026-11-02&until=2026-11-01", "until"),
        ("period=7d&from=2026-11-01&until=2026-11-02", "period"),
        ("state=lost", "state"),
        ("preset=urgent", "preset"),
        ("currency=eur", "currency"),
        ("currency=ABC", "currency"),
        ("kind=refund", "kind"),
        ("amount_min=5", "amount_min"),
        ("currency=JPY&amount_max=5.5", "amount_max"),
        ("currency=EUR&amount_min=1e3", "amount_min"),
        ("paid_from=yesterday", "paid_from"),
        ("q=" + "a" * 65, "q"),
        ("after=a%00", "after"),
        ("limit=0", "limit"),
        ("limit=%C2%B2", "limit"),
        ("view=pie", "view"),
    ],
)
def test_a_bad_value_is_a_400_page_naming_it(
    console: FlaskClient, ledger: Ledger, query: str, named: str
) -> None:
    for answer in (console.get(f"{PAGE}?{query}", headers=VIEWER), export_form(console, query)):
        html = answer.get_data(as_text=True)
        assert answer.status_code == 400
        assert 'data-error="console_bad_query"' in html
        assert named in html
        assert "Traceback" not in html


#: The period before ``from=0001-01-01`` (or any period whose equal-length predecessor starts
#: before year 1) cannot exist, and the page compares with it.
TOO_EARLY = "from is too early"


@pytest.mark.parametrize(
    ("query", "refusal"),
    [
        ("from=0001-01-01&until=0001-01-02", TOO_EARLY),
        ("from=0001-01-01&until=0002-01-01", TOO_EARLY),
        ("from=0001-01-02&until=0001-01-03", None),  # its predecessor is 0001-01-01
        ("from=0001-01-02&until=0001-01-04", TOO_EARLY),  # its predecessor would start in year 0
        ("from=0003-12-31&until=0006-12-31", TOO_EARLY),  # weeks, the predecessor in year 0
        ("from=9999-12-30&until=9999-12-31", None),  # by the hour, up to the last day
        ("from=9999-11-01&until=9999-12-31", None),  # by the day
        ("from=9997-01-05&until=9999-12-31", None),  # by the week: the last week is cut short
        ("registered_from=0001-01-01&registered_until=9999-12-31", None),
        ("paid_from=0001-01-01&paid_until=9999-12-31", None),
    ],
)
def test_periods_at_the_calendar_s_edges_are_served_or_a_400_naming_from(
    console: FlaskClient, shop: Ledger, query: str, refusal: str | None
) -> None:
    shown, export = console.get(f"{PAGE}?{query}", headers=VIEWER), export_form(console, query)
    if refusal is None:
        assert shown.status_code == 200, shown.get_data(as_text=True)
        assert export.status_code == 303, export.get_data(as_text=True)
        assert wait_for_export(console, export.headers["Location"], VIEWER).state == "ready"
        return
    for answer in (shown, export):
        page = parse_page(answer.get_data(as_text=True))
        assert answer.status_code == 400
        error = page.find("section", **{"data-error": "console_bad_query"})
        assert error.find("h1").text().startswith(refusal)


def _cells(row: Element) -> dict[str, str]:
    """A table row's cells by their column (each cell's ``data-label``)."""
    return {cell.attrs["data-label"]: cell.text() for cell in row.find_all("td")}


def test_each_tile_count_says_whether_it_counts_payments_or_periods(
    console: FlaskClient, shop: Ledger
) -> None:
    page = parse_page(console.get(PAGE, headers=VIEWER).get_data(as_text=True))

    counted = {
        (tile.attrs["data-tile"], line.attrs["data-currency"]): line.find(data_count=None).text()
        for tile in page.find_all("article", data_tile=None)
        for line in tile.find_all("li")
    }

    assert counted[("expected", "CNY")] == "2 payments"
    assert counted[("expected", "EUR")] == "1 payment"
    assert counted[("received", "CNY")] == "4 payments or periods"
    assert counted[("paid", "CNY")] == "1 payment or period"
    assert counted[("mismatches", "CNY")] == "3 payments"  # order-2 and the two unexpected
    assert all(
        re.fullmatch(r"\d+ (payments?|payments? or periods?)", text) for text in counted.values()
    ), counted


@pytest.fixture
def refunds(ledger: Ledger, deliver: Deliver, make_body: BodyFactory) -> Ledger:
    """Registered today, all paid yesterday: order-1 then refunded in part (the notification
    says no amount), order-4 refunded in full, order-5 kept."""
    when = paid_time(1)
    for identifier, amount_minor, amount in (("order-1", 2500, "25.00"), ("order-4", 1000, "10.00"),
                                             ("order-5", 500, "5.00")):  # fmt: skip
        ledger.expect_transaction(identifier, amount_minor, "CNY")
        transaction = identifier.replace("order", "ll")
        deliver(
            external_identifier=identifier,
            transaction_id=transaction,
            amount=amount,
            payment_time=when,
        )
    # ``deliver``'s own ``status`` is the answer's: the payment status goes in the body.
    for identifier, amount, code in (("order-1", "25.00", "PR"), ("order-4", "10.00", "RS")):
        transaction = identifier.replace("order", "ll")
        deliver(
            body=make_body(
                external_identifier=identifier,
                transaction_id=transaction,
                amount=amount,
                status=code,
                payment_time=when,
            )
        )
    return ledger


def test_rows_and_totals_show_refunded_and_net_and_a_partial_refund_as_amount_unknown(
    console: FlaskClient, refunds: Ledger
) -> None:
    page = parse_page(console.get(PAGE, headers=VIEWER).get_data(as_text=True))

    rows = {
        row.attrs["data-identifier"]: _cells(row)
        for row in page.find("table", **{"class": "finance-rows"}).find_all("tr")
        if "data-identifier" in row.attrs
    }
    assert {name: (cells["Received"], cells["Refunded"], cells["Net"])
            for name, cells in rows.items()} == {
        "order-1": ("25.00", "amount unknown", "at most 25.00"),
        "order-4": ("10.00", "10.00", "0.00"),
        "order-5": ("5.00", "", "5.00"),
    }  # fmt: skip
    totals = page.find("table", **{"class": "totals"})
    headers = [cell.text() for cell in totals.find_all("th")]
    assert headers == [
        "Currency",
        "Payments",
        "Expected",
        "Received, of the rows opened in the period",
        "Refunded",
        "Net",
        "Difference",
    ]
    assert _cells(totals.find("tr", data_total="CNY")) == {
        "Currency": "CNY",
        "Payments": "3",
        "Expected": "40.00",
        "Received, of the rows opened in the period": "40.00",
        "Refunded": "10.00 + amount unknown (1 partly refunded)",
        "Net": "at most 30.00",
        "Difference": "0.00",
    }


def test_the_totals_received_column_names_the_matching_rows_when_dates_select_them(
    console: FlaskClient, refunds: Ledger
) -> None:
    today = datetime.now(UTC).date()
    url = f"{PAGE}?paid_from={today - timedelta(days=2)}&paid_until={today + timedelta(days=1)}"
    page = parse_page(console.get(url, headers=VIEWER).get_data(as_text=True))

    headers = [cell.text() for cell in page.find("table", **{"class": "totals"}).find_all("th")]

    assert "Received, of the matching rows" in headers
    assert "Received, of the rows opened in the period" not in headers
