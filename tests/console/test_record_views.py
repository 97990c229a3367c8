"""A delivery's page, a refused request's and a payment's: everything stored about each, linked
both ways (a refused request's claims only to a search, never as a payment), and the 404 page
for what the ledger does not hold."""

from __future__ import annotations

import hashlib
import re

import pytest
from flask.testing import FlaskClient

from payhooks.storage import Ledger
from tests.console.conftest import NOTIFY, ROLE_HEADER, VIEWER, Deliver, forge
from tests.support.app import BodyFactory, SignFunction
from tests.support.page_html import parse_page

#: A role that reads bodies (an operator, by default): what the body's own tests send.
READS_BODIES = {ROLE_HEADER: "operator"}


def _page(
    client: FlaskClient, path: str, status: int = 200, headers: dict[str, str] = VIEWER
) -> str:
    answer = client.get(path, headers=headers)
    assert answer.status_code == status, answer.get_data(as_text=True)
    return answer.get_data(as_text=True)


def test_a_processed_delivery_shows_its_outcome_headers_and_indented_body(
    console: FlaskClient, deliver: Deliver
) -> None:
    delivery_id = deliver(external_identifier="order-1", transaction_id="ll-1")

    text = _page(console, f"/console/deliveries/{delivery_id}", headers=READS_BODIES)

    assert f"Delivery #{delivery_id}" in text
    assert '<span class="badge badge-processed">processed</span>' in text
    assert "<code>PS</code> 25.00 CNY" in text
    assert "<dt>Attempts</dt><dd>1</dd>" in text
    assert '<a class="identifier" href="/console/payments/order-1">' in text
    assert '<td data-label="Name"><code>webhook-id</code></td>' in text
    assert (
        '<td data-label="Name"><code>content-type</code></td>'
        '<td data-label="Value"><code>application/json</code>'
    ) in text
    assert "<dt>Error</dt><dd>none</dd>" in text
    assert '<section class="body-view" data-body-view="indented">' in text
    assert "\n  &#34;merchant_transaction_id&#34;: &#34;order-1&#34;," in text


def test_a_repeated_delivery_counts_its_attempts(
    console: FlaskClient, make_body: BodyFactory, sign: SignFunction
) -> None:
    body = make_body(external_identifier="order-1")
    for _ in range(3):  # the same bytes under the same webhook-id: one delivery, three attempts
        answer = console.post(NOTIFY, data=body, headers=sign(body, msg_id="msg_again"))
        assert answer.status_code == 200

    text = _page(console, f"/console/deliveries/{answer.get_json()['delivery_id']}")

    assert "<dt>Attempts</dt><dd>3</dd>" in text


@pytest.mark.parametrize(
    ("body", "status", "shown"),
    [
        (
            b'{"merchant_transaction_id": "order-9", ',
            400,
            '{"merchant_transaction_id": "order-9", ',
        ),
        (
            b"\x1b[2J not json \\x41 \xe2\x80\xae\nnext line",
            400,
            "\\u001b[2J not json \\x41 \\u202e\nnext line",
        ),
    ],
)
def test_a_body_that_is_not_json_is_shown_only_as_received(
    console: FlaskClient, deliver: Deliver, body: bytes, status: int, shown: str
) -> None:
    delivery_id = deliver(body=body, status=status)

    text = _page(console, f"/console/deliveries/{delivery_id}", headers=READS_BODIES)
    page = parse_page(text)

    assert page.find("pre", data_raw=None).text_as_written() == shown
    assert len(page.find_all("pre")) == 1  # no indented reading of what is not JSON
    assert '<span class="badge badge-malformed_json">malformed json</span>' in text
    assert re.search(r'<dt>Error</dt><dd class="error-text">(?!none)[^<]+</dd>', text)


def test_a_json_body_is_shown_as_sent_numbers_as_written_and_a_repeated_name_kept(
    console: FlaskClient, deliver: Deliver
) -> None:
    """A parser that disagrees with ours could read the other of two same-named members, and
    ``25.00`` read as a float would show as ``25.0``: the page shows the body as signed."""
    body = (
        b'{"merchant_transaction_id": "order-7", "merchant_transaction_id": "order-8", '
        b'"payment_data": {"payment_amount": 25.00, "n": 1e400}}'
    )
    delivery_id = deliver(body=body, status=400)  # refused as ambiguous, and stored

    text = _page(console, f"/console/deliveries/{delivery_id}", headers=READS_BODIES)
    indented = parse_page(text).find("section", data_body_view="indented").text()

    assert indented.count('"merchant_transaction_id":') == 2
    assert "&#34;order-7&#34;" in text
    assert "&#34;order-8&#34;" in text
    assert "&#34;payment_amount&#34;: 25.00," in text
    assert "&#34;n&#34;: 1e400" in text


@pytest.mark.parametrize("delivery_id", ["99", "9223372036854775808", "1" + "0" * 30])
def test_a_delivery_the_ledger_does_not_hold_is_a_404_page(
    console: FlaskClient, deliver: Deliver, delivery_id: str
) -> None:
    deliver()

    text = _page(console, f"/console/deliveries/{delivery_id}", status=404)

    assert 'data-error="console_not_found"' in text
    assert "There is no delivery with this id." in text


def test_a_payment_page_shows_its_reconciliation_and_timeline_linking_each_delivery(
    console: FlaskClient, deliver: Deliver, ledger: Ledger
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    first = deliver(external_identifier="order-1", transaction_id="ll-1")
    again = deliver(external_identifier="order-1", transaction_id="ll-1")

    text = _page(console, "/console/payments/order-1")

    assert '<h1>Payment <code class="identifier">order-1</code></h1>' in text
    assert '<dt>State</dt><dd><span class="badge badge-paid">paid</span></dd>' in text
    assert "<dt>Expected</dt><dd>25.00 CNY</dd>" in text
    assert "<dt>Received</dt><dd>25.00 CNY</dd>" in text
    events = re.findall(r'<tr data-event="(\w+)">', text)
    assert events[0] == "registration"
    assert events.count("delivery") == 2
    assert "outcome" in events
    for delivery_id in (first, again):
        assert f'<a href="/console/deliveries/{delivery_id}">delivery #{delivery_id}</a>' in text
    assert '<span class="badge badge-duplicate">duplicate</span>' in text
    assert 'href="/console/deliveries?identifier=order-1&amp;window=all"' in text
    # the details say times as the "At" column does, not as the command line's ISO 8601
    [outcome] = re.findall(r'<tr data-event="outcome">.*?</tr>', text, re.S)
    assert re.search(r"paid \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", outcome), outcome
    assert "+00:00" not in outcome


def test_a_payment_only_refused_deliveries_name_has_a_story_without_a_reconciliation(
    console: FlaskClient, deliver: Deliver
) -> None:
    delivery_id = deliver(body=b'{"merchant_transaction_id": "order-3"}', status=422)

    text = _page(console, "/console/payments/order-3")

    assert "The ledger keeps no reconciliation for it" in text
    assert f'href="/console/deliveries/{delivery_id}"' in text


@pytest.mark.parametrize("identifier", ["order-404", "order%00-1", "a/b"])
def test_a_payment_the_ledger_does_not_know_is_a_404_page(
    console: FlaskClient, deliver: Deliver, identifier: str
) -> None:
    deliver()

    text = _page(console, f"/console/payments/{identifier}", status=404)

    assert 'data-error="console_not_found"' in text


def test_an_identifier_with_slashes_and_dots_links_to_its_own_page(
    console: FlaskClient, deliver: Deliver
) -> None:
    deliver(external_identifier="a/../b")

    log = _page(console, "/console/deliveries")
    payment = _page(console, "/console/payments/a%2F..%2Fb")

    assert 'href="/console/payments/a%2F..%2Fb"' in log
    assert '<code class="identifier">a/../b</code>' in payment


UNVERIFIED = "Unverified: the signature did not hold; anyone could have sent this"


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_a_refused_request_opens_with_its_facts_and_its_claims_marked_unverified(
    console: FlaskClient, ledger: Ledger, role: str
) -> None:
    body = (
        b'{"ll_transaction_id": "ll-77", "merchant_transaction_id": "order-77", '
        b'"payment_data": {"payment_amount": "25.00", "pad": "' + b"x" * 5000 + b'"}}'
    )
    rejected_id = forge(console, body, ledger)

    answer = console.get(f"/console/deliveries/refused/{rejected_id}", headers={ROLE_HEADER: role})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    page = parse_page(answer.get_data(as_text=True))

    assert page.find("h1").text() == f"Refused request #{rejected_id}"
    facts = dict(
        zip(
            (each.text() for each in page.find_all("dt")),
            (each.text() for each in page.find_all("dd")),
            strict=True,
        )
    )
    assert facts["Remote address"] == "127.0.0.1"
    assert facts["Reason"] == "invalid_signature"
    assert facts["Body"] == (
        f"{len(body)} bytes, of which the first 4096 were kept; SHA-256 of what was kept "
        + hashlib.sha256(body[:4096]).hexdigest()
    )
    claims = page.find("section", data_unverified=None)
    assert claims.find("h2").text() == UNVERIFIED
    named = claims.find(data_named="identifier")
    assert named.find("code").text() == "order-77"
    assert [link.attrs["href"] for link in named.find_all("a")] == [
        "/console/deliveries?q=order-77&window=all"
    ]
    transaction = claims.find(data_named="transaction")
    assert transaction.find("code").text() == "ll-77"
    assert [link.attrs["href"] for link in transaction.find_all("a")] == [
        "/console/deliveries?q=ll-77&window=all"
    ]
    assert "not kept" in claims.find(data_named="webhook-id").text()
    if role == "operator":
        shown = claims.find("pre", data_raw=None).text()
        assert shown.startswith(
            '{"ll_transaction_id": "ll-77", "merchant_transaction_id": "order-77"'
        )
        assert len(shown) == 4096
    else:  # a viewer reads the claims, not the body (docs/console.md#bodies)
        assert claims.find_all("pre") == []
        assert claims.find(data_body_hidden="grant").text().startswith("The body is hidden")
    # A claim is never linked as if it were a payment the ledger vouches for.
    assert [a for a in page.find_all("a") if "/payments/" in a.attrs.get("href", "")] == []


@pytest.mark.parametrize(
    ("body", "shown_identifier", "shown_in_body"),
    [
        (
            b'{"merchant_transaction_id": "<script>alert(1)</script>"}',
            "<script>alert(1)</script>",
            '"merchant_transaction_id": "<script>alert(1)</script>"',
        ),
        (
            '{"merchant_transaction_id": "order-1\u202e2-redro"}'.encode(),
            "order-1\\u202e2-redro",
            "order-1\\u202e2-redro",
        ),
        (
            b'{"merchant_transaction_id": "' + b"A" * 65 + b'"}',
            None,
            "A" * 65,
        ),
        (
            b"\x1b[2J<img src=x onerror=alert(1)>" + b"B" * 4000 + b"\xe2\x80\xae",
            None,
            "\\u001b[2J<img src=x onerror=alert(1)>BBB",
        ),
    ],
    ids=["script-tag", "bidi-override", "identifier-too-long", "long-line-of-controls"],
)
def test_a_refused_requests_hostile_strings_render_as_inert_visible_text(
    console: FlaskClient,
    ledger: Ledger,
    body: bytes,
    shown_identifier: str | None,
    shown_in_body: str,
) -> None:
    rejected_id = forge(console, body, ledger)

    html = _page(console, f"/console/deliveries/refused/{rejected_id}", headers=READS_BODIES)
    page = parse_page(html)

    assert page.find_all("script") == []
    assert page.find_all("img") == []
    assert "\u202e" not in html
    assert "\x1b" not in html
    named = page.find(data_named="identifier")
    if shown_identifier is None:
        assert named.text() == "none readable"
    else:
        assert named.find("code").text() == shown_identifier
    assert shown_in_body in page.find("pre", data_raw=None).text()


@pytest.mark.parametrize("rejected_id", ["99", "9223372036854775808", "1" + "0" * 30])
def test_a_refused_request_the_ledger_does_not_keep_is_the_404_page(
    console: FlaskClient, ledger: Ledger, rejected_id: str
) -> None:
    forge(console, b"{}", ledger)

    page = parse_page(_page(console, f"/console/deliveries/refused/{rejected_id}", status=404))

    assert page.find(data_error="console_not_found").find("h1").text() != ""
    assert "There is no refused request with this id." in page.text()
