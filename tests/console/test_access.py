"""The authorize hook decides, per request: a role shows the pages, anything else is a 403
page that shows nothing of the ledger."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, Request

from payhooks.console import Console, ConsoleGrant, ConsoleRole
from tests.console.conftest import Deliver
from tests.support.app import AppFactory

PAGES = [
    "/console/deliveries",
    "/console/deliveries/refused",
    "/console/deliveries/1",
    "/console/payments/order-secret",
    "/console/deliveries?window=bogus",
    "/console/no-such-page",
]


def _raises(request: Request) -> str:
    raise RuntimeError("the session store is down")


REFUSING_HOOKS: dict[str, Callable[[Request], Any]] = {
    "returns None": lambda request: None,
    "raises": _raises,
    "returns an unknown role": lambda request: "admin",
    "returns a non-string": lambda request: ["operator"],
    "returns True": lambda request: True,
    "grants an unknown role": lambda request: ConsoleGrant("admin", "ana"),  # type: ignore[arg-type]
    "grants nobody": lambda request: ConsoleGrant(ConsoleRole.OPERATOR, ""),
    "grants a name of two lines": lambda request: ConsoleGrant("operator", "ana\nroot"),  # type: ignore[arg-type]
}


@pytest.fixture
def order_delivered(deliver: Deliver) -> int:
    return deliver(external_identifier="order-secret", transaction_id="ll-secret")


@pytest.mark.parametrize("hook", sorted(REFUSING_HOOKS))
@pytest.mark.parametrize("path", PAGES)
def test_a_hook_that_grants_no_role_gets_a_403_page_with_no_data(
    make_app: AppFactory, order_delivered: int, hook: str, path: str
) -> None:
    app = make_app()
    Console(app, authorize=REFUSING_HOOKS[hook])

    answer = app.test_client().get(path)

    assert answer.status_code == 403
    assert answer.mimetype == "text/html"
    text = answer.get_data(as_text=True)
    assert 'data-error="console_forbidden"' in text
    assert "You are not allowed to see this console." in text
    for secret in ("order-secret", "ll-secret", "25.00", "<table", "Role:"):
        assert secret not in text


@pytest.mark.parametrize("role", ["viewer", "operator", ConsoleRole.VIEWER, ConsoleRole.OPERATOR])
@pytest.mark.parametrize("path", PAGES[:4])
def test_viewer_and_operator_see_every_page_with_their_role_in_the_header(
    make_app: AppFactory, order_delivered: int, role: str, path: str
) -> None:
    app = make_app()
    Console(app, authorize=lambda request: role)

    answer = app.test_client().get(path)

    assert answer.status_code == 200
    assert f'data-role="{ConsoleRole(role).value}"' in answer.get_data(as_text=True)


def test_the_hook_is_asked_on_every_request_with_the_request(
    make_app: AppFactory, order_delivered: int
) -> None:
    asked: list[str] = []

    def hook(request: Request) -> str | None:
        asked.append(request.path)
        return "viewer" if request.cookies.get("staff") == "yes" else None

    app: Flask = make_app()
    Console(app, authorize=hook)
    client = app.test_client()

    refused = client.get("/console/deliveries")
    client.set_cookie("staff", "yes")
    granted = client.get("/console/deliveries")

    assert (refused.status_code, granted.status_code) == (403, 200)
    assert asked == ["/console/deliveries", "/console/deliveries"]


def test_the_stylesheet_is_served_without_asking_the_hook(make_app: AppFactory) -> None:
    asked: list[str] = []
    app = make_app()
    Console(app, authorize=lambda request: asked.append(request.path))

    answer = app.test_client().get("/console/static/console.css")

    assert answer.status_code == 200
    assert answer.mimetype == "text/css"
    assert asked == []


def test_a_hook_that_raises_is_logged_with_its_traceback(
    make_app: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app()
    Console(app, authorize=_raises)

    with caplog.at_level("ERROR", logger="payhooks"):
        answer = app.test_client().get("/console/deliveries")

    assert answer.status_code == 403
    (record,) = [each for each in caplog.records if "authorize hook raised" in each.message]
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "the session store is down"


@pytest.mark.parametrize(
    ("role", "who"),
    [("operator", "ana@example.com"), (ConsoleRole.VIEWER, "Vic Vega")],
)
def test_a_grant_keeps_its_role_as_a_role_and_its_name(role: Any, who: str) -> None:
    grant = ConsoleGrant(role, who)

    assert grant.role is ConsoleRole(role)
    assert grant.who == who


@pytest.mark.parametrize("who", ["", "x" * 201, "ana\x1b[2J", "ana\u202e"])
def test_a_grant_refuses_a_name_the_audit_log_could_not_show_honestly(who: str) -> None:
    with pytest.raises(ValueError, match="who"):
        ConsoleGrant(ConsoleRole.OPERATOR, who)
