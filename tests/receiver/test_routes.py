"""Every answer under the URL prefix follows the JSON error contract, over the test client and
over a real HTTP server on loopback; and return URLs are only handed out when they route."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import make_server

from payhooks.receiver import PayHooks, return_url
from tests.support.app import TEST_SECRET, AppFactory
from tests.support.live_server import LiveServer

#: Methods no route under the prefix takes: standard, WebDAV, and made up.
OTHER_METHODS = ["GET", "PUT", "PATCH", "DELETE", "TRACE", "OPTIONS", "PROPFIND", "BREW"]

#: Paths under the prefix that no route serves.
UNKNOWN_PATHS = [
    "/payhooks/notifications/",
    "/payhooks/return/",
    "/payhooks/cancel/",
    "/payhooks/return",
    "/payhooks",
    "/payhooks/",
    "/payhooks/nothing-here",
    "/payhooks//notifications",
    "/payhooks/return/a%0Ab",
]

Answer = tuple[int, dict[str, str], Any]
Ask = Callable[[str, str], Answer]


@pytest.fixture(scope="module")
def shared_app(tmp_path_factory: pytest.TempPathFactory) -> Flask:
    """One app for the module: these tests only read, and a server per test would cost half a
    second each to stop."""
    folder = tmp_path_factory.mktemp("routes")
    app = Flask("payhooks_routes_test", instance_path=str(folder / "instance"))
    app.config.update(
        TESTING=True,
        SECRET_KEY="test-secret-key",
        PAYHOOKS_DATABASE=str(folder / "payhooks.db"),
        PAYHOOKS_SECRETS=[TEST_SECRET],
    )
    PayHooks(app)
    return app


@pytest.fixture(scope="module")
def shared_server(shared_app: Flask) -> Iterator[LiveServer]:
    server = make_server("127.0.0.1", 0, shared_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="live-server", daemon=True)
    thread.start()
    try:
        yield LiveServer(server, f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


@pytest.fixture(params=["test client", "loopback HTTP"])
def ask(request: pytest.FixtureRequest, shared_app: Flask) -> Ask:
    """Send ``method path`` and get the status, lower-cased headers and JSON body (None when
    the body is not JSON), through the test client or a real server."""
    if request.param == "test client":
        client: FlaskClient = shared_app.test_client()

        def through_client(method: str, path: str) -> Answer:
            response = client.open(path, method=method)
            headers = {name.lower(): value for name, value in response.headers.items()}
            return response.status_code, headers, response.get_json(silent=True)

        return through_client
    server: LiveServer = request.getfixturevalue("shared_server")

    def over_http(method: str, path: str) -> Answer:
        reply = server.request(method, path)
        try:
            document = reply.json()
        except ValueError:
            document = None
        return reply.status, reply.headers, document

    return over_http


def _assert_error(document: Any, code: str) -> None:
    assert document is not None, "the answer is not JSON"
    assert set(document) == {"error"}
    assert set(document["error"]) == {"code", "message", "details"}
    assert document["error"]["code"] == code


@pytest.mark.parametrize("method", [m for m in OTHER_METHODS if m != "GET"] + ["GET"])
def test_every_other_method_on_the_webhook_is_a_json_405_with_allow(ask: Ask, method: str) -> None:
    status, headers, document = ask(method, "/payhooks/notifications")

    assert status == 405
    assert headers["allow"] == "POST"
    _assert_error(document, "method_not_allowed")


@pytest.mark.parametrize("route", ["return", "cancel"])
@pytest.mark.parametrize("method", [m for m in OTHER_METHODS if m != "GET"] + ["POST"])
def test_every_other_method_on_a_return_route_is_a_json_405_with_allow(
    ask: Ask, route: str, method: str
) -> None:
    status, headers, document = ask(method, f"/payhooks/{route}/order-1")

    assert status == 405
    assert headers["allow"] == "GET, HEAD"
    _assert_error(document, "method_not_allowed")


@pytest.mark.parametrize("path", UNKNOWN_PATHS)
@pytest.mark.parametrize("method", ["GET", "POST", "PROPFIND"])
def test_every_other_path_under_the_prefix_is_a_json_404(ask: Ask, path: str, method: str) -> None:
    status, _, document = ask(method, path)

    assert status == 404
    _assert_error(document, "not_found")


def test_a_head_under_the_prefix_is_a_404_without_a_body(ask: Ask) -> None:
    status, headers, _ = ask("HEAD", "/payhooks/nothing-here")

    assert status == 404
    assert headers["content-type"] == "application/json"


def test_the_merchants_own_pages_keep_their_own_answers(make_app: AppFactory) -> None:
    app = make_app()

    @app.get("/payhooks/ping")
    def ping() -> str:
        return "ok"

    client = app.test_client()

    assert client.get("/payhooks/ping").get_data(as_text=True) == "ok"
    outside = client.get("/not-ours")
    assert outside.status_code == 404
    assert outside.mimetype == "text/html"


@pytest.mark.parametrize("prefix", ["", "/"])
def test_without_a_prefix_only_the_routes_paths_are_answered_in_json(
    make_app: AppFactory, prefix: str
) -> None:
    client = make_app(PAYHOOKS_URL_PREFIX=prefix).test_client()

    wrong_method = client.open("/notifications", method="PROPFIND")
    elsewhere = client.get("/anything")

    assert wrong_method.status_code == 405
    assert wrong_method.get_json()["error"]["code"] == "method_not_allowed"
    assert elsewhere.status_code == 404
    assert elsewhere.mimetype == "text/html"


# -- return URLs that route ---------------------------------------------------------------


@pytest.mark.parametrize(
    "identifier",
    ["order\n1", "\n", "a\nb\nc", ".", "..", "a/../b", "./x", "x/.", "", "a/./b"],
    ids=repr,
)
@pytest.mark.parametrize("cancel", [False, True])
def test_return_url_refuses_an_identifier_no_url_can_carry(
    app: Flask, identifier: str, cancel: bool
) -> None:
    with app.test_request_context(), pytest.raises(ValueError, match="external_identifier") as info:
        return_url(identifier, cancel)

    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "identifier",
    [
        "order-1",
        "a\x00b",
        "\x7f",
        "a\rb",
        "a\tb",
        " lead",
        "trail ",
        "%0A",
        "a\u2028b",
        "a/.b",
        "...",
        "订单/1",
        "?#",
    ],
    ids=repr,
)
@pytest.mark.parametrize("cancel", [False, True])
def test_every_return_url_handed_out_works_over_http(
    shared_app: Flask, shared_server: LiveServer, identifier: str, cancel: bool
) -> None:
    with shared_app.test_request_context():
        url = urlsplit(return_url(identifier, cancel))

    reply = shared_server.get(f"{url.path}?{url.query}", headers={"Accept": "application/json"})

    assert reply.status == 200, reply.body
    assert reply.json()["external_identifier"] == identifier
