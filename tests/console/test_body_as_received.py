"""A notification as it was received: a delivery's body and a refused request's kept start shown
exactly as their bytes arrived (escaped, never re-serialized), with the size and the SHA-256
recorded on receipt, beside the indented reading; the same permission and audit as any body;
reached from a finance row in two clicks; and readable on a phone."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.storage import Ledger
from payhooks.storage.reads import AuditEntry, RejectedDelivery
from payhooks.verify import DEFAULT_SCHEME, get_signer
from tests.console.conftest import NOTIFY, ROLE_HEADER, VIEWER, Deliver, forge
from tests.support.app import BodyFactory
from tests.support.browser import BROWSER_TIMEOUT_MS, SCREENS
from tests.support.cli import notification, record_notification
from tests.support.factories import T0, FixedClock
from tests.support.live_server import LiveServer
from tests.support.page_html import bytes_as_shown, parse_page

if TYPE_CHECKING:
    from playwright.sync_api import Browser

OPERATOR = {ROLE_HEADER: "operator"}
#: A notification whose strings carry markup and JSON escapes: valid, processed, and shown
#: byte for byte (the escapes as the service wrote them, not as a parser would re-write them).
HOSTILE_JSON = (
    b'{"ll_transaction_id": "ll-h", "merchant_transaction_id": "order-h", "payment_data": '
    b'{"payment_status": "PS", "payment_amount": "25.00", "payment_currency_code": "CNY", '
    b'"payment_time": "20261121120000", "note": "<script>alert(1)</script>\\u001b[31m\\u00e9"}}'
)
#: Bytes no JSON parser takes: a terminal escape, markup, a CRLF, bytes that are not UTF-8.
HOSTILE_BYTES = b"<script>alert(1)</script>\x1b[31mred\r\n\xff\xfe\xe2\x80\xae end \\x41"
_RAW = re.compile(r'<pre class="body raw" data-raw>(.*?)</pre>', re.DOTALL)


def _deliver_any(client: FlaskClient, secret: str, body: bytes, ledger: Ledger) -> int:
    """Send ``body`` (any bytes: payhooks' own signer signs bytes, not text) signed; the
    stored delivery's id."""
    answer = client.post(NOTIFY, data=body, headers=get_signer(DEFAULT_SCHEME, secret).sign(body))
    assert answer.status_code in (200, 400), answer.text
    return ledger.receiver.delivery_log(limit=1).rows[0].id


def _views(ledger: Ledger) -> list[AuditEntry]:
    return [entry for entry in ledger.console.audit_log().rows if entry.action == "view_body"]


def _raw_block(html: str) -> str:
    (block,) = _RAW.findall(html)
    return str(block)


def _facts(html: str) -> dict[str, str]:
    page = parse_page(html)
    return dict(
        zip(
            (each.text() for each in page.find_all("dt")),
            (each.text() for each in page.find_all("dd")),
            strict=True,
        )
    )


@pytest.mark.parametrize(
    ("body", "indented"),
    [(HOSTILE_JSON, True), (HOSTILE_BYTES, False)],
    ids=["json-with-markup-and-escapes", "controls-and-invalid-utf-8"],
)
def test_a_delivery_shows_its_exact_bytes_inert_with_the_size_and_sha256_of_receipt(
    console: FlaskClient, ledger: Ledger, secret: str, body: bytes, indented: bool
) -> None:
    delivery_id = _deliver_any(console, secret, body, ledger)

    html = console.get(f"/console/deliveries/{delivery_id}", headers=OPERATOR).text
    page = parse_page(html)

    assert bytes_as_shown(_raw_block(html)) == body
    assert page.find_all("script") == []
    assert "\x1b" not in html
    assert "\u202e" not in html
    assert _facts(html)["Body"] == (
        f"{len(body)} bytes, SHA-256 {hashlib.sha256(body).hexdigest()} "
        "(recorded on receipt; the bytes shown have it)"
    )
    views = [each.attrs["data-body-view"] for each in page.find_all("section", data_body_view=None)]
    assert views == (["raw", "indented"] if indented else ["raw"])


def test_the_raw_view_keeps_json_escapes_as_sent_where_the_indented_reading_decodes_them(
    console: FlaskClient, deliver: Deliver
) -> None:
    delivery_id = deliver(body=HOSTILE_JSON)

    page = parse_page(console.get(f"/console/deliveries/{delivery_id}", headers=OPERATOR).text)

    raw = page.find("section", data_body_view="raw").find("pre").text()
    reading = page.find("section", data_body_view="indented").find("pre").text()
    assert '"note": "<script>alert(1)</script>\\u001b[31m\\u00e9"' in raw
    assert '"note": "<script>alert(1)</script>\\u001b[31mé"' in reading


def test_stored_bytes_that_no_longer_have_the_sha256_of_receipt_are_said_to_have_changed(
    console: FlaskClient, deliver: Deliver, database: Path | str
) -> None:
    body = notification("order-1", "ll-1")
    delivery_id = deliver(body=body)
    with sqlite3.connect(database) as connection:  # what a restore from a bad copy would do
        connection.execute(
            "UPDATE deliveries SET body = ? WHERE id = ?", (body.replace(b"25", b"95"), delivery_id)
        )

    html = console.get(f"/console/deliveries/{delivery_id}", headers=VIEWER).text

    check = parse_page(html).find(data_sha256_check="differs")
    assert check.attrs["class"] == "error-text"
    assert hashlib.sha256(body.replace(b"25", b"95")).hexdigest() in check.text()
    assert "they changed after they were received" in check.text()
    assert parse_page(html).find("code", data_sha256=None).text() == (
        hashlib.sha256(body).hexdigest()
    )


def test_a_pruned_delivery_says_where_its_body_went_and_keeps_its_sha256_of_receipt(
    console: FlaskClient, database: Path | str, tmp_path: Path
) -> None:
    body = notification("order-1", "ll-1")
    with Ledger(database, clock=FixedClock(T0)) as old:
        record_notification(old, body, "key-1")
        old.signals.mark_sent(old.signals.claim(lease=timedelta(minutes=1)))
        (row,) = old.receiver.delivery_log().rows
    with Ledger(database) as ledger:
        assert ledger.prune(timedelta(days=1), tmp_path).pruned_deliveries == 1
        pruned_into = ledger.receiver.delivery(row.id).pruned_into  # type: ignore[union-attr]

        html = console.get(f"/console/deliveries/{row.id}", headers=OPERATOR).text

        assert pruned_into
        facts = _facts(html)["Body"]
        assert f"into {pruned_into}, where it is kept byte for byte" in facts
        assert "payhooks restore-pruned puts it back" in facts
        assert facts.endswith(f"SHA-256 as received {hashlib.sha256(body).hexdigest()}")
        assert _RAW.search(html) is None
        assert _views(ledger) == []


def test_a_refused_request_shows_its_kept_start_as_received_and_says_nobody_vouches_for_it(
    console: FlaskClient, ledger: Ledger
) -> None:
    """A start cut inside a character shows the cut as bytes that are not UTF-8, not as a
    character that was never sent."""
    kept = RejectedDelivery.KEPT_BYTES
    body = HOSTILE_BYTES + b"x" * (kept - len(HOSTILE_BYTES) - 1) + "é and more".encode()
    rejected_id = forge(console, body, ledger)

    html = console.get(f"/console/deliveries/refused/{rejected_id}", headers=OPERATOR).text
    page = parse_page(html)

    assert bytes_as_shown(_raw_block(html)) == body[:kept]
    assert _raw_block(html).endswith(
        '<span class="mark mark-bytes" title="bytes that are not '
        'UTF-8, one \\xNN each">\\xc3</span>'
    )
    assert page.find_all("script") == []
    assert "\x1b" not in html
    assert page.find("p", data_kept=None).text() == (
        f"Only the first {kept} bytes of a refused request are kept: these are {kept} of its "
        f"{len(body)}, cut where the limit fell (a character cut there shows as bytes that are "
        "not UTF-8). Nobody vouches for them."
    )
    assert _facts(html)["Body"] == (
        f"{len(body)} bytes, of which the first {kept} were kept; SHA-256 of what was kept "
        + hashlib.sha256(body[:kept]).hexdigest()
    )
    assert page.find("section", data_unverified=None).find("pre", data_raw=None)


def test_a_short_refused_request_is_kept_whole(console: FlaskClient, ledger: Ledger) -> None:
    rejected_id = forge(console, b'{"merchant_transaction_id": "order-1"}', ledger)

    html = console.get(f"/console/deliveries/refused/{rejected_id}", headers=OPERATOR).text

    assert parse_page(html).find("p", data_kept=None).text() == (
        f"Only the first {RejectedDelivery.KEPT_BYTES} bytes of a refused request are kept: "
        "this one's 38 are all here. Nobody vouches for them."
    )
    assert bytes_as_shown(_raw_block(html)) == b'{"merchant_transaction_id": "order-1"}'


@pytest.mark.parametrize("kind", ["delivery", "refused request"])
def test_the_raw_view_is_a_body_view_held_back_by_the_grant_and_audited_once_with_the_reading(
    console: FlaskClient, deliver: Deliver, ledger: Ledger, kind: str
) -> None:
    if kind == "delivery":
        path = f"/console/deliveries/{deliver(body=HOSTILE_JSON)}"
    else:
        path = f"/console/deliveries/refused/{forge(console, HOSTILE_JSON, ledger)}"

    hidden = console.get(path, headers=VIEWER).text
    elsewhere = console.get(path, headers=OPERATOR | {"Sec-Fetch-Site": "cross-site"}).text
    assert _views(ledger) == []
    shown = console.get(path, headers=OPERATOR).text

    for page in (hidden, elsewhere):
        assert _RAW.search(page) is None
        assert "alert(1)" not in page
        assert "data-body-view" not in page
    assert bytes_as_shown(_raw_block(shown)) == HOSTILE_JSON
    (entry,) = _views(ledger)  # one reading, two views of it: one entry
    assert (entry.target or "").startswith(kind)


def test_a_finance_row_reaches_the_bytes_as_received_in_two_clicks(
    console: FlaskClient, deliver: Deliver, ledger: Ledger
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = notification("order-1", "ll-1")
    delivery_id = deliver(body=body)

    finance = parse_page(console.get("/console/reconciliation", headers=OPERATOR).text)
    (row_link,) = [
        a.attrs["href"] for a in finance.find_all("a") if "/payments/" in a.attrs.get("href", "")
    ]
    payment = parse_page(console.get(row_link, headers=OPERATOR).text)
    (delivery_link,) = {
        a.attrs["href"]
        for a in payment.find_all("a")
        if "/deliveries/" in a.attrs["href"] and a.attrs["href"].rsplit("/", 1)[-1].isdigit()
    }
    html = console.get(delivery_link, headers=OPERATOR).text

    assert (row_link, delivery_link) == (
        "/console/payments/order-1",
        f"/console/deliveries/{delivery_id}",
    )
    assert bytes_as_shown(_raw_block(html)) == body


def test_the_raw_block_wraps_inside_its_box_at_a_phone_s_width(
    console_app: Flask,
    make_body: BodyFactory,
    secret: str,
    serve: Callable[[Flask], LiveServer],
    browser: Browser,
    ledger: Ledger,
) -> None:
    """One line of 3,000 characters without a space, and a long run of marks: the page keeps
    to the screen, and the block keeps to the page (it wraps; nothing scrolls sideways)."""
    body = make_body(note="n" * 3_000) + b"\xff" * 300
    delivery_id = _deliver_any(console_app.test_client(), secret, body, ledger)
    server = serve(console_app)
    context = browser.new_context(**SCREENS["phone"], extra_http_headers=OPERATOR)
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        page = context.new_page()
        page.goto(f"{server.url}/console/deliveries/{delivery_id}")
        block = page.locator("pre[data-raw]")
        sizes = block.evaluate(
            "pre => ({scroll: pre.scrollWidth, client: pre.clientWidth, "
            "right: pre.getBoundingClientRect().right})"
        )
        page_width = page.evaluate("document.documentElement.scrollWidth")
        viewport = page.evaluate("window.innerWidth")
    finally:
        context.close()

    assert block is not None
    assert page_width <= viewport
    assert sizes["scroll"] <= sizes["client"]
    assert sizes["right"] <= viewport
