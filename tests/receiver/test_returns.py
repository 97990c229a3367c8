"""The customer's return: signed URLs, the ledger's view over the browser's word, the answers."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient
from itsdangerous import TimestampSigner, URLSafeTimedSerializer
from markupsafe import escape

from payhooks.receiver import return_url
from payhooks.receiver.web.returns import RETURN_SALT, customer_view
from payhooks.storage import Ledger, ReconciliationState
from tests.support.app import AppFactory, BodyFactory, SignFunction

JSON = {"Accept": "application/json"}

Rows = Callable[..., list[dict[str, Any]]]


def _path(app: Flask, external_identifier: str = "order-1", *, cancel: bool = False) -> str:
    with app.test_request_context():
        return return_url(external_identifier, cancel=cancel, _external=False)


def _notify(client: FlaskClient, body: bytes, sign: SignFunction) -> None:
    response = client.post("/payhooks/notifications", data=body, headers=sign(body))
    assert response.status_code == 200


def test_return_url_is_absolute_and_carries_a_token(app: Flask) -> None:
    with app.test_request_context(base_url="https://shop.example"):
        url = return_url("order-1")

    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == (
        "https",
        "shop.example",
        "/payhooks/return/order-1",
    )
    assert parse_qs(parts.query)["token"]


def test_a_customer_back_with_authorised_and_no_notification_is_processing_never_paid(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")

    response = client.get(_path(app) + "&resultCode=Authorised", headers=JSON)

    assert response.status_code == 200
    assert response.get_json() == {
        "external_identifier": "order-1",
        "state": "processing",
        "confirmed": False,
        "result_code": "Authorised",
    }
    assert ledger.state("order-1") == "pending"


def test_a_wallet_return_without_result_code_is_processing(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    response = client.get(_path(app), headers=JSON)

    assert response.get_json()["state"] == "processing"
    assert response.get_json()["result_code"] is None


def test_after_the_verified_notification_the_return_is_paid(
    app: Flask, client: FlaskClient, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    _notify(client, make_body("orchestrator"), sign)

    response = client.get(_path(app) + "&resultCode=Refused", headers=JSON)

    assert response.get_json()["state"] == "paid"
    assert response.get_json()["confirmed"] is True


@pytest.mark.parametrize(
    ("result_code", "state"),
    [
        ("Refused", "failed"),
        ("Error", "failed"),
        ("Cancelled", "cancelled"),
        ("Authorised", "processing"),
        ("Whatever", "processing"),
    ],
)
def test_the_browser_word_is_a_hint_only_until_the_ledger_knows(
    result_code: str, state: str, app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    response = client.get(_path(app) + f"&resultCode={result_code}", headers=JSON)

    assert response.get_json()["state"] == state
    assert response.get_json()["confirmed"] is False


def test_a_failed_notification_makes_the_return_failed_and_confirmed(
    app: Flask, client: FlaskClient, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    _notify(client, make_body("wallet", status="PF"), sign)

    response = client.get(_path(app) + "&resultCode=Authorised", headers=JSON)

    assert response.get_json()["state"] == "failed"
    assert response.get_json()["confirmed"] is True


def test_the_cancel_route_records_a_cancel(
    app: Flask, client: FlaskClient, ledger: Ledger, db_rows: Rows
) -> None:
    response = client.get(_path(app, cancel=True), headers=JSON)

    assert response.get_json()["state"] == "cancelled"
    assert db_rows("SELECT external_identifier, kind, result_code FROM returns") == [
        {"external_identifier": "order-1", "kind": "cancel", "result_code": None}
    ]


def _forged_token(app: Flask) -> str:
    return URLSafeTimedSerializer("not-the-key", salt=RETURN_SALT).dumps(
        {"id": "order-1", "kind": "return"}
    )


@pytest.mark.parametrize(
    "make_path",
    [
        pytest.param(lambda app: "/payhooks/return/order-1", id="missing-token"),
        pytest.param(lambda app: "/payhooks/return/order-1?token=garbage", id="garbage-token"),
        pytest.param(
            lambda app: f"/payhooks/return/order-1?token={_forged_token(app)}", id="forged-token"
        ),
        pytest.param(
            lambda app: _path(app, "order-2").replace("order-2", "order-1", 1),
            id="token-for-another-payment",
        ),
        pytest.param(
            lambda app: _path(app, cancel=True).replace("/cancel/", "/return/"),
            id="cancel-token-on-return-route",
        ),
    ],
)
def test_a_missing_or_wrong_token_is_a_404_that_records_nothing(
    make_path: Callable[[Flask], str],
    app: Flask,
    client: FlaskClient,
    ledger: Ledger,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")

    response = client.get(make_path(app), headers=JSON)

    assert response.status_code == 404
    assert response.get_json()["error"]["code"] == "not_found"
    assert db_rows("SELECT * FROM returns") == []


def test_a_404_is_the_same_whether_or_not_the_payment_exists(
    client: FlaskClient, ledger: Ledger
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")

    known = client.get("/payhooks/return/order-1?token=x", headers=JSON)
    unknown = client.get("/payhooks/return/no-such-order?token=x", headers=JSON)

    assert known.status_code == unknown.status_code == 404
    assert known.get_data() == unknown.get_data()


class _HourAgoSigner(TimestampSigner):
    def get_timestamp(self) -> int:
        return int(time.time()) - 3600


@pytest.mark.parametrize(("signer", "status"), [(TimestampSigner, 200), (_HourAgoSigner, 404)])
def test_a_token_older_than_the_max_age_is_a_404(
    signer: type[TimestampSigner], status: int, make_app: AppFactory, ledger: Ledger
) -> None:
    app = make_app(PAYHOOKS_RETURN_MAX_AGE=60)
    token = URLSafeTimedSerializer("test-secret-key", salt=RETURN_SALT, signer=signer).dumps(
        {"id": "order-1", "kind": "return"}
    )

    response = app.test_client().get(f"/payhooks/return/order-1?token={token}", headers=JSON)

    assert response.status_code == status


def test_the_html_page_is_escaped_and_uncached(app: Flask, client: FlaskClient) -> None:
    identifier = "<script>alert(1)</script>"

    response = client.get(_path(app, identifier), headers={"Accept": "text/html"})

    assert response.status_code == 200
    assert response.mimetype == "text/html"
    assert identifier not in response.get_data(as_text=True)
    assert "&lt;script&gt;" in response.get_data(as_text=True)
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Referrer-Policy"] == "no-referrer"


def test_the_template_can_be_overridden_by_the_app(make_app: AppFactory, tmp_path: Path) -> None:
    templates = tmp_path / "templates" / "payhooks"
    templates.mkdir(parents=True)
    (templates / "return.html").write_text("custom {{ view.state }}")
    app = make_app()
    app.template_folder = str(tmp_path / "templates")

    response = app.test_client().get(_path(app))

    assert response.get_data(as_text=True) == "custom processing"


def test_a_configured_merchant_page_gets_a_303(make_app: AppFactory) -> None:
    app = make_app(
        PAYHOOKS_RETURN_REDIRECT="https://shop.example/orders/{external_identifier}?s={state}"
    )

    response = app.test_client().get(_path(app, "order 1/a"))

    assert response.status_code == 303
    assert response.headers["Location"] == "https://shop.example/orders/order%201%2Fa?s=processing"


def test_return_url_refuses_clearly_without_a_secret_key(make_app: AppFactory) -> None:
    app = make_app(SECRET_KEY=None)

    with app.test_request_context(), pytest.raises(ValueError, match="SECRET_KEY"):
        return_url("order-1")


def test_a_wrong_method_on_a_return_route_gets_a_json_405(app: Flask, client: FlaskClient) -> None:
    response = client.post(_path(app))

    assert response.status_code == 405
    assert response.get_json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("ledger_state", "kind", "result_code", "expected"),
    [
        (ReconciliationState.PAID, "cancel", "Cancelled", ("paid", True)),
        (ReconciliationState.REFUNDED, "return", None, ("paid", True)),
        (ReconciliationState.AMOUNT_MISMATCH, "return", "Authorised", ("processing", False)),
        (ReconciliationState.UNEXPECTED, "return", "Refused", ("failed", False)),
        (ReconciliationState.CANCELLED, "return", "Authorised", ("cancelled", True)),
        (ReconciliationState.PENDING, "cancel", "Authorised", ("cancelled", False)),
        (None, "return", None, ("processing", False)),
    ],
)
def test_the_ledger_view_wins_over_the_query_string(
    ledger_state: ReconciliationState | None,
    kind: Any,
    result_code: str | None,
    expected: tuple[str, bool],
) -> None:
    view = customer_view("order-1", kind, result_code, ledger_state)

    assert (view.state, view.confirmed) == expected


@pytest.mark.sqlite_only  # reads or locks the SQLite file itself
def test_a_locked_ledger_answers_a_json_503(
    make_app: AppFactory, ledger: Ledger, database: Path
) -> None:
    app = make_app(PAYHOOKS_BUSY_TIMEOUT_MS=50)
    path = _path(app)
    blocker = sqlite3.connect(database, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        response = app.test_client().get(path, headers=JSON)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()

    assert response.status_code == 503
    assert response.get_json()["error"]["code"] == "storage_unavailable"
    assert response.headers["Retry-After"].isdigit()


def test_a_head_request_answers_but_records_no_visit(
    app: Flask, client: FlaskClient, ledger: Ledger, db_rows: Rows
) -> None:
    response = client.head(_path(app) + "&resultCode=Authorised", headers=JSON)

    assert response.status_code == 200
    assert response.get_data() == b""
    assert db_rows("SELECT * FROM returns") == []


@pytest.mark.parametrize(
    ("template", "location"),
    [
        (
            "/orders/{external_identifier}?payment={state}",
            "/orders/order%201%2Fa?payment=processing",
        ),
        ("/done", "/done"),
        ("https://shop.example/o/{external_identifier}", "https://shop.example/o/order%201%2Fa"),
        (
            "http://localhost:5000?id={external_identifier}",
            "http://localhost:5000?id=order%201%2Fa",
        ),
        ("https://shop.example#{state}", "https://shop.example#processing"),
        ("/o/{{literal}}/{state}", "/o/%7Bliteral%7D/processing"),
    ],
)
def test_a_redirect_template_fills_in_url_quoted_values(
    template: str, location: str, make_app: AppFactory, ledger: Ledger
) -> None:
    app = make_app(PAYHOOKS_RETURN_REDIRECT=template)

    response = app.test_client().get(_path(app, "order 1/a"))

    assert response.status_code == 303
    assert response.headers["Location"] == location


@pytest.mark.parametrize(
    "template",
    [
        pytest.param("/orders/{order}", id="unknown-field"),
        pytest.param("/orders/{}", id="positional-field"),
        pytest.param("/orders/{0}", id="numbered-field"),
        pytest.param("/orders/{state.__class__}", id="attribute-access"),
        pytest.param("/orders/{external_identifier[0]}", id="index-access"),
        pytest.param("/orders/{state!r}", id="conversion"),
        pytest.param("/orders/{state:>10}", id="format-spec"),
        pytest.param("/orders/{state", id="unclosed-brace"),
        pytest.param("/orders/}", id="single-closing-brace"),
        pytest.param("//evil.example/{state}", id="protocol-relative"),
        pytest.param("/\\evil.example/{state}", id="backslash"),
        pytest.param("/\t/evil.example", id="tab"),
        pytest.param("/orders/ {state}", id="space"),
        pytest.param("orders/{state}", id="relative-path"),
        pytest.param("{state}", id="placeholder-first"),
        pytest.param("javascript:alert(1)//{state}", id="javascript-scheme"),
        pytest.param("ftp://files.example/{state}", id="other-scheme"),
        pytest.param("https://{external_identifier}.shop.example/", id="placeholder-in-host"),
        pytest.param("https://shop.example{external_identifier}", id="host-not-ended"),
        pytest.param("https://user@evil.example/{state}", id="userinfo"),
        pytest.param("https:///{state}", id="no-host"),
        pytest.param(42, id="not-a-string"),
    ],
)
def test_a_redirect_template_that_cannot_work_safely_fails_at_start_naming_the_key(
    template: Any, make_app: AppFactory
) -> None:
    with pytest.raises(ValueError, match="PAYHOOKS_RETURN_REDIRECT"):
        make_app(PAYHOOKS_RETURN_REDIRECT=template)


@pytest.mark.parametrize("template", [None, ""])
def test_no_redirect_template_renders_the_page(
    template: str | None, make_app: AppFactory, ledger: Ledger
) -> None:
    app = make_app(PAYHOOKS_RETURN_REDIRECT=template)

    response = app.test_client().get(_path(app))

    assert response.status_code == 200
    assert response.mimetype == "text/html"


@pytest.mark.parametrize("identifier", ["/0", "a//b", "order/1/", "订单 1?#%", "x" * 64], ids=repr)
def test_every_identifier_gets_a_return_url_that_works(
    app: Flask, client: FlaskClient, ledger: Ledger, identifier: str
) -> None:
    with app.test_request_context():
        url = return_url(identifier)

    response = client.get(url, headers=JSON)

    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["external_identifier"] == identifier


#: What Chromium and Firefox send when a person follows a link.
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
SHOP = "https://shop.example/cart"


@pytest.mark.parametrize(
    ("headers", "mimetype"),
    [
        (BROWSER, "text/html"),
        ({"Accept": "text/html"}, "text/html"),
        ({}, "application/json"),
        ({"Accept": "*/*"}, "application/json"),
        (JSON, "application/json"),
        ({"Accept": "application/json, text/html;q=0.5"}, "application/json"),
    ],
    ids=["browser", "html", "no-accept", "anything", "json", "json-first"],
)
def test_a_bad_return_link_is_a_page_for_a_browser_and_json_for_a_script(
    headers: dict[str, str], mimetype: str, make_app: AppFactory
) -> None:
    app = make_app(PAYHOOKS_SHOP_URL=SHOP)

    response = app.test_client().get("/payhooks/return/order-1?token=expired", headers=headers)

    assert (response.status_code, response.mimetype) == (404, mimetype)
    assert response.headers["Cache-Control"] == "no-store"
    message = "This payment link has expired or is not valid."
    if mimetype == "application/json":
        assert response.get_json()["error"]["code"] == "not_found"
        assert response.get_json()["error"]["message"] == message
    else:
        page = response.get_data(as_text=True)
        assert f"<h1>{message}</h1>" in page
        assert f'<a class="primary" href="{SHOP}">Back to the shop</a>' in page


def test_a_browser_gets_an_error_page_for_any_error_under_the_prefix(
    app: Flask, client: FlaskClient
) -> None:
    wrong_method = client.post(_path(app), headers=BROWSER)
    no_route = client.get("/payhooks/elsewhere", headers=BROWSER)

    assert (wrong_method.status_code, wrong_method.mimetype) == (405, "text/html")
    assert wrong_method.headers["Allow"] == "GET, HEAD"
    assert (no_route.status_code, no_route.mimetype) == (404, "text/html")
    assert "<title>Page not found</title>" in no_route.get_data(as_text=True)


@pytest.mark.parametrize(
    ("query", "title", "link"),
    [
        ("&resultCode=Authorised", "Payment being confirmed", "Back to the shop"),
        ("&resultCode=Refused", "Payment failed", "Try again"),
        ("&resultCode=Cancelled", "Payment cancelled", "Try again"),
    ],
)
def test_each_state_has_its_title_and_a_link_to_the_shop(
    query: str, title: str, link: str, make_app: AppFactory
) -> None:
    app = make_app(PAYHOOKS_SHOP_URL=SHOP)

    page = app.test_client().get(_path(app) + query).get_data(as_text=True)

    assert f"<title>{title}</title>" in page
    assert f'<a class="primary" href="{SHOP}">{link}</a>' in page
    assert '<meta name="viewport"' in page
    assert "<script" not in page


def test_a_paid_return_is_titled_payment_received(
    app: Flask, client: FlaskClient, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    _notify(client, make_body("orchestrator"), sign)

    page = client.get(_path(app)).get_data(as_text=True)

    assert "<title>Payment received</title>" in page
    assert "<a " not in page  # no PAYHOOKS_SHOP_URL, no link


@pytest.mark.parametrize(
    "url", ["/", "/shop?from=payment", "https://shop.example", "http://x.example/a"]
)
def test_a_shop_url_is_a_path_or_an_http_url(url: str, make_app: AppFactory) -> None:
    app = make_app(PAYHOOKS_SHOP_URL=url)

    page = app.test_client().get(_path(app) + "&resultCode=Refused").get_data(as_text=True)

    assert f'href="{escape(url)}"' in page


@pytest.mark.parametrize(
    "url", ["//evil.example", "javascript:alert(1)", "shop.example", "https://", "/a b", 42]
)
def test_a_shop_url_that_could_leave_the_site_fails_at_start_naming_the_key(
    url: object, make_app: AppFactory
) -> None:
    with pytest.raises(ValueError, match="PAYHOOKS_SHOP_URL"):
        make_app(PAYHOOKS_SHOP_URL=url)
