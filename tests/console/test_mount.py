"""Mounting the console: never by PayHooks alone, only with a hook, under its own prefix."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from payhooks.console import Console, ConsoleRole
from tests.console.conftest import VIEWER, header_role
from tests.support.app import AppFactory


@pytest.mark.parametrize(
    "path", ["/console", "/console/", "/console/deliveries", "/console/payments/order-1"]
)
def test_payhooks_alone_mounts_no_console(make_app: AppFactory, path: str) -> None:
    client = make_app().test_client()

    answer = client.get(path, headers=VIEWER)

    assert answer.status_code == 404
    assert b"payhooks console" not in answer.data


@pytest.mark.parametrize("authorize", [None, "viewer", ConsoleRole.VIEWER, 42])
def test_an_authorize_hook_that_is_missing_or_not_callable_is_a_value_error_naming_it(
    authorize: Any,
) -> None:
    with pytest.raises(ValueError, match="authorize") as exc_info:
        Console(authorize=authorize)

    assert "authorize is required" in str(exc_info.value)


def test_no_authorize_at_all_is_a_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match="authorize"):
        Console()


@pytest.mark.parametrize(
    "prefix", ["", "/", "console", "/payhooks", "/payhooks/", "/payhooks/console"]
)
def test_a_prefix_that_is_empty_relative_or_over_the_receiver_s_is_a_value_error(
    make_app: AppFactory, prefix: str
) -> None:
    with pytest.raises(ValueError, match="url_prefix"):
        Console(make_app(), authorize=header_role, url_prefix=prefix)


def test_init_app_mounts_one_console_object_on_several_apps(make_app: AppFactory) -> None:
    console = Console(authorize=header_role, url_prefix="/support")
    apps = [make_app(), make_app()]
    for app in apps:
        console.init_app(app)

    for app in apps:
        answer = app.test_client().get("/support/deliveries", headers=VIEWER)
        assert answer.status_code == 200


def test_mounting_before_payhooks_is_a_runtime_error_naming_payhooks(tmp_path: Any) -> None:
    with pytest.raises(RuntimeError, match="PayHooks"):
        Console(Flask("bare", instance_path=str(tmp_path)), authorize=header_role)


def test_mounting_twice_on_one_app_is_a_runtime_error(console_app: Flask) -> None:
    with pytest.raises(RuntimeError, match="already"):
        Console(console_app, authorize=header_role, url_prefix="/other")


def test_the_console_root_leads_to_the_delivery_log(console_app: Flask) -> None:
    answer = console_app.test_client().get("/console/", headers=VIEWER)

    assert answer.status_code == 302
    assert answer.headers["Location"] == "/console/deliveries"


def test_a_receiver_under_the_console_s_prefix_is_a_value_error(make_app: AppFactory) -> None:
    app = make_app(PAYHOOKS_URL_PREFIX="/support/hooks")

    with pytest.raises(ValueError, match="PAYHOOKS_URL_PREFIX"):
        Console(app, authorize=header_role, url_prefix="/support")
