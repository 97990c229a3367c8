"""The standalone console's app: the login route, the session it sets, the pages it opens."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.receiver.standalone import LoginToken, create_console_app
from payhooks.receiver.standalone.app import ROLE_KEY, WHO_KEY
from payhooks.receiver.web.console import ConsoleRole
from payhooks.receiver.web.console.access import current_access
from payhooks.storage import Ledger
from tests.support.console_actions import token as page_token
from tests.support.factories import FixedClock


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def console(database: Path | str, clock: FixedClock) -> Iterator[tuple[Flask, LoginToken]]:
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-9", 2500, "CNY")
    app, token = create_console_app(
        database, role=ConsoleRole.OPERATOR, who="Ana", read_only=True, clock=clock
    )
    yield app, token
    with app.app_context():
        current_access().ledgers.close()


def test_the_login_sets_the_role_and_the_name_and_drops_the_token_from_the_address(
    console: tuple[Flask, LoginToken],
) -> None:
    app, token = console
    client = app.test_client()

    login = client.get(f"/console/login?token={token.value}")

    assert login.status_code == 303
    assert login.headers["Location"] == "/console/deliveries"
    assert token.value not in login.headers["Location"]
    with client.session_transaction("/console/deliveries") as session:
        assert (session[ROLE_KEY], session[WHO_KEY]) == ("operator", "Ana")
    page = client.get("/console/payments/order-9")
    assert page.status_code == 200
    assert "order-9" in page.text


@pytest.mark.sqlite_only
def test_a_link_opened_after_ten_minutes_is_refused(
    console: tuple[Flask, LoginToken], clock: FixedClock
) -> None:
    app, token = console
    clock.advance(timedelta(minutes=10).total_seconds())

    answer = app.test_client().get(f"/console/login?token={token.value}")

    assert answer.status_code == 403
    assert 'data-error="console_forbidden"' in answer.text


@pytest.mark.sqlite_only
def test_each_run_signs_its_sessions_with_a_key_of_its_own(database: Path) -> None:
    Ledger(database).close()
    keys = {
        create_console_app(database, role=ConsoleRole.VIEWER, who="x", read_only=True)[0].config[
            "SECRET_KEY"
        ]
        for _ in range(3)
    }

    assert len(keys) == 3
    assert all(len(key) >= 32 for key in keys)


def _logged_in(app: Flask, token: LoginToken) -> FlaskClient:
    client = app.test_client()
    assert client.get(f"/console/login?token={token.value}").status_code == 303
    return client


def _delivery(database: Path | str) -> int:
    with Ledger(database) as ledger:
        return ledger.receiver.record_delivery(dedupe_key="k-1", body=b"{}", headers={}).id


def test_the_audit_log_names_the_person_who_logged_in(
    console: tuple[Flask, LoginToken], database: Path | str
) -> None:
    delivery_id = _delivery(database)
    app, token = create_console_app(
        database, role=ConsoleRole.OPERATOR, who="Ana Lima", read_only=False
    )
    client = _logged_in(app, token)

    answer = client.post(
        f"/console/deliveries/{delivery_id}/download/raw",
        data={"csrf_token": page_token(client, f"/console/deliveries/{delivery_id}", {})},
    )

    assert answer.status_code == 200
    with Ledger(database) as ledger:
        (entry,) = ledger.console.audit_log().rows
    assert (entry.who, entry.role, entry.action) == ("Ana Lima", "operator", "download_raw")
    with app.app_context():
        current_access().ledgers.close()


@pytest.mark.sqlite_only
def test_a_name_the_audit_log_cannot_take_fails_at_creation(database: Path) -> None:
    Ledger(database).close()

    with pytest.raises(ValueError, match="who"):
        create_console_app(database, role=ConsoleRole.VIEWER, who="a\nb", read_only=True)


def test_a_viewers_refused_action_on_a_read_only_ledger_is_logged_not_a_503(
    console: tuple[Flask, LoginToken], database: Path | str, caplog: pytest.LogCaptureFixture
) -> None:
    """The refusal's entry cannot be written to a ledger opened read-only: the refusal's own
    page still follows, and the entry goes to the log."""
    delivery_id = _delivery(database)
    app, token = create_console_app(database, role=ConsoleRole.VIEWER, who="Vic", read_only=True)
    client = _logged_in(app, token)

    with caplog.at_level(logging.WARNING, logger="payhooks"):
        answer = client.post(f"/console/deliveries/{delivery_id}/download/raw")

    assert answer.status_code == 403
    assert 'data-error="console_forbidden_action"' in answer.text
    (logged,) = [r.getMessage() for r in caplog.records if "audit log cannot take" in r.message]
    assert "who='Vic'" in logged
    assert "result='refused: console_forbidden_action'" in logged
    with Ledger(database) as ledger:
        assert ledger.console.audit_log().rows == ()
    with app.app_context():
        current_access().ledgers.close()


def test_a_viewers_export_from_a_read_only_ledger_is_logged_and_served(
    console: tuple[Flask, LoginToken], database: Path | str, caplog: pytest.LogCaptureFixture
) -> None:
    app, token = create_console_app(database, role=ConsoleRole.VIEWER, who="Vic", read_only=True)
    client = _logged_in(app, token)

    with caplog.at_level(logging.WARNING, logger="payhooks"):
        answer = client.get("/console/reconciliation.csv")
    text = answer.text
    answer.close()  # as a server does: the export's temporary file goes with it

    assert answer.status_code == 200
    assert "order-9" in text
    (logged,) = [r.getMessage() for r in caplog.records if "audit log cannot take" in r.message]
    assert "action=export_reconciliation_csv" in logged
    assert "result='1 rows'" in logged
    with app.app_context():
        current_access().ledgers.close()
