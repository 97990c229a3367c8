"""The standalone console's app: the login route, the session it sets, the pages it opens."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import timedelta
from http.cookies import Morsel, SimpleCookie
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from payhooks.console import ConsoleRole
from payhooks.console.access import current_access
from payhooks.console.standalone import ConsoleRun, create_console_app
from payhooks.console.standalone.app import ROLE_KEY, WHO_KEY
from payhooks.storage import Ledger
from tests.support.console_actions import token as page_token
from tests.support.console_exports import start_export, wait_for_export
from tests.support.factories import FixedClock


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def console(database: Path | str, clock: FixedClock) -> Iterator[ConsoleRun]:
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-9", 2500, "CNY")
    run = create_console_app(
        database, role=ConsoleRole.OPERATOR, who="Ana", read_only=True, clock=clock
    )
    yield run
    _close(run.app)


def _close(app: Flask) -> None:
    with app.app_context():
        current_access().ledgers.close()


def test_the_login_sets_the_role_and_the_name_and_drops_the_token_from_the_address(
    console: ConsoleRun,
) -> None:
    client = console.app.test_client()

    login = client.get(console.login_path)

    assert login.status_code == 303
    assert login.headers["Location"] == f"{console.prefix}/deliveries"
    assert console.token.value not in login.headers["Location"]
    with client.session_transaction(f"{console.prefix}/deliveries") as session:
        assert (session[ROLE_KEY], session[WHO_KEY]) == ("operator", "Ana")
    page = client.get(f"{console.prefix}/payments/order-9")
    assert page.status_code == 200
    assert "order-9" in page.text


@pytest.mark.sqlite_only
def test_a_link_opened_after_ten_minutes_is_refused(console: ConsoleRun, clock: FixedClock) -> None:
    clock.advance(timedelta(minutes=10).total_seconds())

    answer = console.app.test_client().get(console.login_path)

    assert answer.status_code == 403
    assert 'data-error="console_forbidden"' in answer.text


@pytest.mark.sqlite_only
def test_each_run_signs_its_sessions_with_a_key_of_its_own(database: Path) -> None:
    Ledger(database).close()
    keys = {
        create_console_app(database, role=ConsoleRole.VIEWER, who="x", read_only=True).app.config[
            "SECRET_KEY"
        ]
        for _ in range(3)
    }

    assert len(keys) == 3
    assert all(len(key) >= 32 for key in keys)


def _set_cookie(answer: TestResponse) -> Morsel[str]:
    (header,) = answer.headers.getlist("Set-Cookie")
    (morsel,) = SimpleCookie(header).values()
    return morsel


def test_the_session_cookie_is_named_for_the_run_and_scoped_to_its_random_prefix(
    console: ConsoleRun,
) -> None:
    """Cookies ignore ports: only a path that no other server on 127.0.0.1 serves keeps the
    browser from sending the session to them."""
    login = console.app.test_client().get(console.login_path)

    cookie = _set_cookie(login)
    assert cookie.key == console.cookie_name
    assert re.fullmatch(r"payhooks_console_[0-9a-f]{16}", cookie.key)
    assert cookie["path"] == console.prefix
    assert re.fullmatch(r"/c/[A-Za-z0-9_-]{22}", console.prefix)  # 128 random bits
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Strict"
    assert login.headers["Location"].startswith(console.prefix + "/")


@pytest.mark.sqlite_only
def test_each_run_has_a_prefix_and_a_cookie_name_of_its_own(database: Path) -> None:
    Ledger(database).close()
    runs = [
        create_console_app(database, role=ConsoleRole.VIEWER, who="x", read_only=True)
        for _ in range(3)
    ]

    assert len({run.prefix for run in runs}) == 3
    assert len({run.cookie_name for run in runs}) == 3
    assert all(run.prefix not in repr(run) for run in runs)


@pytest.mark.parametrize("named_as", ["its_own_name", "the_new_run_s_name"])
def test_a_session_cookie_from_an_earlier_run_is_refused_by_the_next(
    console: ConsoleRun, database: Path | str, named_as: str
) -> None:
    """A kept cookie, replayed to a later run's pages, under either name, is the 403 page
    with nothing from the ledger, and sets no session."""
    earlier = _set_cookie(console.app.test_client().get(console.login_path))
    later = create_console_app(database, role=ConsoleRole.OPERATOR, who="Ana", read_only=True)
    name = earlier.key if named_as == "its_own_name" else later.cookie_name

    answer = later.app.test_client(use_cookies=False).get(
        f"{later.prefix}/payments/order-9", headers={"Cookie": f"{name}={earlier.value}"}
    )

    assert answer.status_code == 403
    assert 'data-error="console_forbidden"' in answer.text
    assert "order-9" not in answer.text
    assert "Set-Cookie" not in answer.headers
    _close(later.app)


def _logged_in(run: ConsoleRun) -> FlaskClient:
    client = run.app.test_client()
    assert client.get(run.login_path).status_code == 303
    return client


def _delivery(database: Path | str) -> int:
    with Ledger(database) as ledger:
        return ledger.receiver.record_delivery(dedupe_key="k-1", body=b"{}", headers={}).id


def test_the_audit_log_names_the_person_who_logged_in(
    console: ConsoleRun, database: Path | str
) -> None:
    delivery_id = _delivery(database)
    run = create_console_app(database, role=ConsoleRole.OPERATOR, who="Ana Lima", read_only=False)
    client = _logged_in(run)
    page = f"{run.prefix}/deliveries/{delivery_id}"

    answer = client.post(f"{page}/download/raw", data={"csrf_token": page_token(client, page, {})})

    assert answer.status_code == 200
    with Ledger(database) as ledger:
        downloaded, viewed = ledger.console.audit_log().rows  # the page showed the body first
    assert (downloaded.who, downloaded.role, downloaded.action) == (
        "Ana Lima",
        "operator",
        "download_raw",
    )
    assert (viewed.who, viewed.action) == ("Ana Lima", "view_body")
    _close(run.app)


@pytest.mark.sqlite_only
def test_a_name_the_audit_log_cannot_take_fails_at_creation(database: Path) -> None:
    Ledger(database).close()

    with pytest.raises(ValueError, match="who"):
        create_console_app(database, role=ConsoleRole.VIEWER, who="a\nb", read_only=True)


def test_a_viewers_refused_action_on_a_read_only_ledger_is_logged_not_a_503(
    console: ConsoleRun, database: Path | str, caplog: pytest.LogCaptureFixture
) -> None:
    """The refusal's count cannot be written to a ledger opened read-only: the refusal's own
    page still follows, and the refusal goes to the log."""
    delivery_id = _delivery(database)
    run = create_console_app(database, role=ConsoleRole.VIEWER, who="Vic", read_only=True)
    client = _logged_in(run)

    with caplog.at_level(logging.WARNING, logger="payhooks"):
        answer = client.post(f"{run.prefix}/deliveries/{delivery_id}/download/raw")

    assert answer.status_code == 403
    assert 'data-error="console_forbidden_action"' in answer.text
    (logged,) = [r.getMessage() for r in caplog.records if "audit log cannot count" in r.message]
    assert "who='Vic'" in logged
    assert "result='refused: console_forbidden_action'" in logged
    with Ledger(database) as ledger:
        assert ledger.console.audit_log().rows == ()
        assert ledger.console.refusals() == ()
    _close(run.app)


def test_a_viewers_export_from_a_read_only_ledger_is_logged_and_served(
    console: ConsoleRun, database: Path | str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    run = create_console_app(
        database, role=ConsoleRole.VIEWER, who="Vic", read_only=True, exports=tmp_path / "out"
    )
    client = _logged_in(run)

    with caplog.at_level(logging.WARNING, logger="payhooks"):
        answer = start_export(client, {}, prefix=run.prefix)
    page = wait_for_export(client, answer.headers["Location"])
    download = client.get(f"{answer.headers['Location']}/reconciliation.csv")
    text = download.text
    download.close()  # as a server does: the file it streams from goes with it

    assert answer.status_code == 303
    assert (page.state, page.rows) == ("ready", 1)
    assert "order-9" in text
    (logged,) = [r.getMessage() for r in caplog.records if "audit log cannot take" in r.message]
    assert "action=export_reconciliation_csv" in logged
    assert "result='started'" in logged
    assert sorted(path.suffix for path in (tmp_path / "out").glob("*.*")) == ["", ".csv", ".json"]
    _close(run.app)


def _body_delivery(database: Path | str) -> int:
    with Ledger(database) as ledger:
        return ledger.receiver.record_delivery(
            dedupe_key="k-body", body=b'{"card_holder": "Lin Wei"}', headers={}
        ).id


def test_a_viewer_of_the_standalone_console_reads_bodies_and_each_read_is_audited(
    console: ConsoleRun, database: Path | str
) -> None:
    """Whoever runs ``payhooks console`` can read the ledger's file, bodies and all: its pages
    show them to every role it lets in, and record each read as the mounted console does."""
    delivery_id = _body_delivery(database)
    run = create_console_app(database, role=ConsoleRole.VIEWER, who="Vic", read_only=False)
    client = _logged_in(run)

    page = client.get(f"{run.prefix}/deliveries/{delivery_id}")

    assert page.status_code == 200
    assert "Lin Wei" in page.text
    assert "data-body-hidden" not in page.text
    with Ledger(database) as ledger:
        (entry,) = ledger.console.audit_log().rows
    assert (entry.who, entry.role, entry.action, entry.target) == (
        "Vic",
        "viewer",
        "view_body",
        f"delivery {delivery_id}",
    )
    _close(run.app)


def test_a_body_read_from_a_read_only_ledger_is_logged_and_shown(
    console: ConsoleRun, database: Path | str, caplog: pytest.LogCaptureFixture
) -> None:
    """A ledger opened read-only cannot take the read's entry: the warning carries it, and the
    page still shows the body (its reader can read the file anyway)."""
    delivery_id = _body_delivery(database)
    run = create_console_app(database, role=ConsoleRole.VIEWER, who="Vic", read_only=True)
    client = _logged_in(run)

    with caplog.at_level(logging.WARNING, logger="payhooks"):
        page = client.get(f"{run.prefix}/deliveries/{delivery_id}")

    assert page.status_code == 200
    assert "Lin Wei" in page.text
    (logged,) = [r.getMessage() for r in caplog.records if "audit log cannot take" in r.message]
    assert "who='Vic'" in logged
    assert f"action=view_body target='delivery {delivery_id}'" in logged
    with Ledger(database) as ledger:
        assert ledger.console.audit_log().rows == ()
    _close(run.app)
