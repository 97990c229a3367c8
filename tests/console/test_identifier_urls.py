"""URLs to a payment survive the browser: whatever its identifier (``.``, ``..``, slashes,
``%2e``, tildes), the console's links and forms name a path a browser sends as written, and
routing gives back exactly that identifier."""

from __future__ import annotations

from urllib.parse import unquote, urljoin, urlsplit

import pytest
from flask import Flask, url_for
from flask.testing import FlaskClient
from hypothesis import given
from hypothesis import strategies as st

from payhooks.console import Console
from payhooks.storage import Ledger
from tests.console.conftest import header_role
from tests.support.console_actions import OPERATOR, VIEWER, token
from tests.support.factories import make_outcome, record
from tests.support.page_html import parse_page

BASE = "http://localhost/console/exceptions"
#: What the URL standard takes for a dot segment (ASCII case-insensitively): a browser
#: removes it, and with ``..`` the segment before it, before it sends the request.
DOT_SEGMENTS = frozenset({".", "%2e", "..", ".%2e", "%2e.", "%2e%2e"})
#: Identifiers a browser would otherwise resolve, or that look like the escape.
AWKWARD = [".", "..", "~.", "~~..", "%2e", ".%2e", "%2E%2E", "a/..", "../b", "/", "./.", "..."]


def _as_a_browser_sends(href: str) -> str:
    """The path a browser requests for a link to ``href`` on the exceptions page.

    ``urljoin`` removes ``.`` and ``..`` segments as a browser does; a browser also removes
    their ``%2e`` spellings, so a path holding one fails here as well.
    """
    segments = urlsplit(href).path.split("/")
    assert not DOT_SEGMENTS & {segment.lower() for segment in segments}, href
    return urlsplit(urljoin(BASE, href)).path


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> Flask:
    """An app with the console's routes on a ledger it never opens: routing alone."""
    app = Flask("routes", instance_path=str(tmp_path_factory.mktemp("routes")))
    Console(app, authorize=header_role, url_prefix="/console", database="never-opened.db")
    return app


def _build(app: Flask, endpoint: str, identifier: str) -> str:
    with app.test_request_context():
        return url_for(f"payhooks_console.{endpoint}", external_identifier=identifier)


@given(st.text(min_size=1, max_size=64))
def test_every_identifier_s_url_is_sent_as_written_and_routes_back_to_it(
    routes: Flask, identifier: str
) -> None:
    adapter = routes.url_map.bind("localhost")
    for endpoint in ("payment", "review", "send_payment_signals"):
        path = _build(routes, endpoint, identifier)

        sent = _as_a_browser_sends(path)

        assert sent == path
        # The server hands routing the path decoded (PATH_INFO).
        matched, arguments = adapter.match(
            unquote(sent), method="GET" if endpoint == "payment" else "POST"
        )
        assert (matched, arguments) == (
            f"payhooks_console.{endpoint}",
            {"external_identifier": identifier},
        )


@pytest.mark.parametrize("identifier", AWKWARD)
def test_a_payment_named_like_a_dot_segment_opens_from_its_link(
    client: FlaskClient, ledger: Ledger, identifier: str
) -> None:
    record(ledger, make_outcome(external_identifier=identifier))
    queue = parse_page(client.get("/console/exceptions", headers=VIEWER).text)
    (href,) = {
        link.attrs["href"]
        for link in queue.find_all("a", **{"class": "identifier"})
        if link.text() == identifier
    }

    page = client.get(_as_a_browser_sends(href), headers=VIEWER)

    assert page.status_code == 200
    assert parse_page(page.text).find("code", **{"class": "identifier"}).text() == identifier


@pytest.mark.parametrize("identifier", AWKWARD)
def test_a_payment_named_like_a_dot_segment_is_reviewed_from_its_form(
    client: FlaskClient, ledger: Ledger, identifier: str
) -> None:
    record(ledger, make_outcome(external_identifier=identifier))
    queue = parse_page(client.get("/console/exceptions", headers=OPERATOR).text)
    row = queue.find("tr", data_exception=identifier)
    action = row.find("form", **{"class": "review"}).attrs["action"]
    form = {"csrf_token": token(client, "/console/exceptions"), "status": "acknowledged"}

    answer = client.post(_as_a_browser_sends(action), data=form, headers=OPERATOR)

    assert answer.status_code == 303, answer.text
    assert list(ledger.console.reviews()) == [identifier]
    (entry,) = ledger.console.audit_log().rows
    assert (entry.action, entry.target) == ("review_exception", identifier)


@pytest.mark.parametrize("identifier", AWKWARD)
def test_a_payment_named_like_a_dot_segment_has_its_signals_sent_and_comes_back_to_its_page(
    acting_app: Flask, client: FlaskClient, ledger: Ledger, identifier: str
) -> None:
    record(ledger, make_outcome(external_identifier=identifier))
    path = _build(acting_app, "send_payment_signals", identifier)
    form = {"csrf_token": token(client, "/console/exceptions")}

    answer = client.post(_as_a_browser_sends(path), data=form, headers=OPERATOR)

    assert answer.status_code == 303, answer.text
    (entry,) = ledger.console.audit_log().rows
    assert (entry.action, entry.target) == ("send_signals", f"payment {identifier}")
    back = client.get(_as_a_browser_sends(answer.headers["Location"]), headers=VIEWER)
    assert parse_page(back.text).find("code", **{"class": "identifier"}).text() == identifier
