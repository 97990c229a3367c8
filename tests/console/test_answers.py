"""Every answer under the console's prefix carries the security headers: pages, error pages,
refusals, the stylesheet, and the app's own answers for what the console has no rule for."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from tests.console.conftest import VIEWER, Deliver

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

#: (method, path, role headers, the status expected): every page and every kind of answer.
ANSWERS = [
    ("GET", "/console/deliveries", VIEWER, 200),
    ("GET", "/console/deliveries?status=processed&window=all&limit=1", VIEWER, 200),
    ("GET", "/console/deliveries/refused", VIEWER, 200),
    ("GET", "/console/deliveries/1", VIEWER, 200),
    ("GET", "/console/payments/order-1", VIEWER, 200),
    ("HEAD", "/console/deliveries", VIEWER, 200),
    ("GET", "/console/static/console.css", {}, 200),
    ("GET", "/console/", VIEWER, 302),
    ("GET", "/console", VIEWER, 308),
    ("GET", "/console/deliveries?window=1y", VIEWER, 400),
    ("GET", "/console/deliveries", {}, 403),
    ("GET", "/console/deliveries/99", VIEWER, 404),
    ("GET", "/console/payments/order-404", VIEWER, 404),
    ("GET", "/console/static/nothing.css", {}, 404),
    ("GET", "/console/what", VIEWER, 404),
    ("POST", "/console/deliveries", VIEWER, 405),
    ("DELETE", "/console/deliveries/1", VIEWER, 405),
]


@pytest.mark.parametrize(
    ("method", "path", "headers", "status"),
    ANSWERS,
    ids=[f"{method} {path} {status}" for method, path, _, status in ANSWERS],
)
def test_every_console_answer_carries_the_security_headers(
    console: FlaskClient,
    deliver: Deliver,
    method: str,
    path: str,
    headers: dict[str, str],
    status: int,
) -> None:
    deliver()

    answer = console.open(path, method=method, headers=headers)

    assert answer.status_code == status
    assert {name: answer.headers.get(name) for name in HEADERS} == HEADERS


def test_the_receiver_s_own_answers_keep_their_headers(console: FlaskClient) -> None:
    answer = console.get("/payhooks/return/order-1")

    assert answer.headers.get("Content-Security-Policy") != HEADERS["Content-Security-Policy"]
    assert "X-Frame-Options" not in answer.headers


@pytest.mark.parametrize("path", ["/console/deliveries", "/console/deliveries/1"])
def test_a_page_has_no_script_no_inline_style_and_a_phone_viewport(
    console: FlaskClient, deliver: Deliver, path: str
) -> None:
    deliver()

    text = console.get(path, headers=VIEWER).get_data(as_text=True)

    assert "<script" not in text
    assert "<style" not in text
    assert " style=" not in text
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
    assert '<link rel="stylesheet" href="/console/static/console.css">' in text
