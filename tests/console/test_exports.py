"""The finance page's export through the test client, on both engines: started by a POST with
the session's token (any role), written outside the request into a file any process can
serve, the command line's bytes with their row count and SHA-256, one at a time per person,
downloaded by its starter or an operator; the old GET link exports nothing."""

from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.console import Console
from payhooks.console.export_files import (
    MAX_AGE,
    MAX_KEPT,
    STALE_AFTER,
    ExportFolder,
    ExportRecord,
    ExportState,
)
from payhooks.storage import Ledger
from tests.console.conftest import Clock
from tests.support.app import AppFactory
from tests.support.cli import notification as wallet_body
from tests.support.cli import record_notification, run
from tests.support.console_actions import OPERATOR, ROLE, VIEWER, WHO, grant_hook
from tests.support.console_exports import EXPORTS, FINANCE, start_export, wait_for_export

#: Another viewer than :data:`VIEWER`.
OTHER_VIEWER = {ROLE: "viewer", WHO: "val@example.com"}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def folder(tmp_path: Path) -> ExportFolder:
    return ExportFolder(tmp_path / "exports")


@pytest.fixture
def exporting_app(make_app: AppFactory, clock: Clock, folder: ExportFolder) -> Flask:
    """The receiver and a console whose hook names the person, its exports in ``folder``."""
    app = make_app()
    Console(app, authorize=grant_hook, url_prefix="/console", clock=clock, exports=folder.path)
    return app


@pytest.fixture
def client(exporting_app: Flask) -> FlaskClient:
    return exporting_app.test_client()


@pytest.fixture
def shop(ledger: Ledger) -> Ledger:
    """Three payments registered now, one of them paid."""
    ledger.expect_transaction("order-1", 2500, "CNY")
    ledger.expect_transaction("order-2", 1000, "CNY")
    ledger.expect_transaction("order-3", 700, "EUR")
    record_notification(ledger, wallet_body("order-1", "ll-1", "25.00"))
    return ledger


def _exports(folder: ExportFolder) -> list[str]:
    """Every file in the exports' folder but its lock."""
    if not folder.path.exists():
        return []
    return sorted(name for name in os.listdir(folder.path) if name != ".lock")


def _export_id(location: str) -> str:
    found = re.fullmatch(r"/console/exports/([0-9a-f]{20})", location)
    assert found is not None, location
    return found.group(1)


@pytest.mark.parametrize("case", ["no token", "wrong token"])
def test_a_post_without_the_session_s_token_is_refused_and_starts_nothing(
    client: FlaskClient, shop: Ledger, folder: ExportFolder, case: str
) -> None:
    client.get(FINANCE, headers=VIEWER)  # the session and its token exist
    form = {} if case == "no token" else {"csrf_token": "forged"}

    answer = client.post(EXPORTS, data=form, headers=VIEWER)

    assert answer.status_code == 400
    assert 'data-error="console_csrf_failed"' in answer.get_data(as_text=True)
    assert _exports(folder) == []
    assert shop.console.audit_log().rows == ()  # counted, not an entry
    (counted,) = shop.console.refusals()
    assert (counted.action, counted.code, counted.times) == (
        "export_reconciliation_csv",
        "console_csrf_failed",
        1,
    )


@pytest.mark.parametrize(
    "sent_by",
    [{"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://elsewhere.example"}],
)
def test_a_start_another_site_sent_is_refused_and_recorded_in_nobody_s_name(
    client: FlaskClient, shop: Ledger, folder: ExportFolder, sent_by: dict[str, str]
) -> None:
    page = client.get(FINANCE, headers=VIEWER).get_data(as_text=True)
    real = re.search(r'name="csrf_token" value="([^"]*)"', page).group(1)  # type: ignore[union-attr]

    answer = client.post(EXPORTS, data={"csrf_token": real}, headers={**VIEWER, **sent_by})

    assert answer.status_code == 400
    assert 'data-error="console_csrf_failed"' in answer.get_data(as_text=True)
    assert _exports(folder) == []
    assert not shop.console.audit_log().rows


@pytest.mark.parametrize("headers", [VIEWER, OPERATOR], ids=["viewer", "operator"])
def test_either_role_starts_an_export_and_the_start_is_the_audited_action(
    client: FlaskClient, shop: Ledger, folder: ExportFolder, headers: dict[str, str]
) -> None:
    answer = start_export(client, headers, {"kind": "transaction", "state": ["pending"]})

    assert answer.status_code == 303
    export_id = _export_id(answer.headers["Location"])
    (entry,) = shop.console.audit_log().rows
    assert (entry.who, entry.action, entry.target, entry.result) == (
        headers[WHO],
        "export_reconciliation_csv",
        f"export {export_id}",
        "started",
    )
    assert entry.detail["filter"] == {"kind": "transaction", "state": ["pending"]}
    assert entry.detail["export"] == export_id
    first = client.get(answer.headers["Location"], headers=headers).get_data(as_text=True)
    assert "Export started: this page says when it is ready." in first
    page = wait_for_export(client, answer.headers["Location"], headers)
    assert (page.state, page.rows) == ("ready", 2)


def test_the_old_get_link_exports_nothing_and_leads_to_the_finance_page(
    client: FlaskClient, shop: Ledger, folder: ExportFolder
) -> None:
    answer = client.get("/console/reconciliation.csv?kind=unexpected&state=paid", headers=VIEWER)

    assert answer.status_code == 303
    assert answer.headers["Location"] == f"{FINANCE}?kind=unexpected&state=paid"
    assert not shop.console.audit_log().rows
    assert _exports(folder) == []
    page = client.get(answer.headers["Location"], headers=VIEWER).get_data(as_text=True)
    assert "Exports start from this page now" in page
    assert '<form class="export" method="post" action="/console/exports">' in page


def test_an_export_is_the_command_line_s_bytes_with_its_row_count_and_sha256(
    client: FlaskClient, ledger: Ledger, folder: ExportFolder, database: Path | str
) -> None:
    """Enough rows for many of the writer's chunks, on each engine; the page's figures are
    those of the bytes downloaded, and the bytes are what ``payhooks reconcile --format csv``
    writes for the same rows."""
    count = 2500
    with ledger.transaction():
        for number in range(count):
            ledger.expect_transaction(f"order-{number:05d}", 100 + number, "CNY")
    today = datetime.now(UTC).date()
    since, until = today - timedelta(days=1), today + timedelta(days=1)

    answer = start_export(client, VIEWER, {"from": since.isoformat(), "until": until.isoformat()})
    page = wait_for_export(client, answer.headers["Location"], VIEWER)
    download = client.get(f"{answer.headers['Location']}/reconciliation.csv", headers=VIEWER)

    window = ["--since", since.isoformat(), "--until", until.isoformat()]
    command = run(["reconcile", "--format", "csv", "--database", str(database), *window])
    assert command.exit_code == 0, command.output
    body = download.get_data()
    assert download.status_code == 200
    assert download.mimetype == "text/csv"
    assert "filename=reconciliation.csv" in download.headers["Content-Disposition"]
    assert body == command.stdout_bytes
    assert (page.state, page.rows, page.bytes) == ("ready", count, len(body))
    assert page.sha256 == hashlib.sha256(body).hexdigest()
    export_id = _export_id(answer.headers["Location"])
    assert _exports(folder) == [f"{export_id}.csv", f"{export_id}.json"]
    assert oct(folder.path.stat().st_mode & 0o777) == "0o700"


def test_a_second_export_while_the_first_runs_is_a_429_for_that_person_only(
    client: FlaskClient, shop: Ledger, folder: ExportFolder, clock: Clock
) -> None:
    """A running export is one whose record says so and whose heartbeat is fresh, whichever
    process writes it: here a record written as a writer in another process would."""
    running = folder.start(who=VIEWER[WHO], role="viewer", shown_filter={}, now=clock())

    again = start_export(client, VIEWER)
    other = start_export(client, OTHER_VIEWER)

    assert again.status_code == 429
    page = again.get_data(as_text=True)
    assert 'data-error="console_busy"' in page
    assert "You already have an export running" in page
    assert other.status_code == 303
    assert {record.id for record in folder.records()} == {
        running.id,
        _export_id(other.headers["Location"]),
    }


@pytest.mark.parametrize(
    ("headers", "status"),
    [(VIEWER, 200), (OTHER_VIEWER, 403), ({ROLE: "operator", WHO: "oli@example.com"}, 200)],
    ids=["its starter", "another viewer", "an operator"],
)
def test_an_export_is_seen_and_downloaded_by_its_starter_or_an_operator_only(
    client: FlaskClient, shop: Ledger, headers: dict[str, str], status: int
) -> None:
    location = start_export(client, VIEWER).headers["Location"]
    wait_for_export(client, location, VIEWER)

    page = client.get(location, headers=headers)
    download = client.get(f"{location}/reconciliation.csv", headers=headers)

    assert (page.status_code, download.status_code) == (status, status)
    if status == 403:
        assert "order-1" not in download.get_data(as_text=True)
        assert 'data-error="console_forbidden"' in download.get_data(as_text=True)
    else:
        assert download.get_data(as_text=True).count("\n") == 4  # the header and three rows


def test_a_stale_partial_shows_failed_and_the_next_start_sweeps_it(
    client: FlaskClient, shop: Ledger, folder: ExportFolder, clock: Clock
) -> None:
    """A worker killed mid-export leaves its partial file and a record that says running:
    once its heartbeat is older than the limit, it is failed, and its owner may start again."""
    record = folder.start(who=VIEWER[WHO], role="viewer", shown_filter={}, now=clock())
    folder.partial_path(record.id).write_bytes(b"external_identifier,kind\norder-1,")

    clock.ahead += STALE_AFTER + timedelta(seconds=1)
    page = client.get(f"{EXPORTS}/{record.id}", headers=VIEWER).get_data(as_text=True)
    download = client.get(f"{EXPORTS}/{record.id}/reconciliation.csv", headers=VIEWER)
    again = start_export(client, VIEWER)

    assert 'data-state="failed"' in page
    assert "stopped: the process writing it ended" in page
    assert download.status_code == 409
    assert again.status_code == 303
    assert not folder.partial_path(record.id).exists()
    swept = folder.record(record.id)
    assert swept is not None
    assert (swept.state, swept.error) == (
        ExportState.FAILED,
        "stopped: the process writing it ended",
    )


def test_a_start_deletes_finished_exports_older_than_a_day_and_keeps_a_bounded_number(
    folder: ExportFolder,
) -> None:
    now = datetime(2026, 11, 21, 12, tzinfo=UTC)
    old = [
        ExportRecord(
            id=f"{number:020x}",
            who=f"p{number}",
            role="viewer",
            filter={},
            started_at=now - MAX_AGE - timedelta(minutes=1) + timedelta(seconds=number),
            heartbeat_at=now,
            state=ExportState.READY,
        )
        for number in range(3)
    ]
    recent = [
        ExportRecord(
            id=f"{100 + number:020x}",
            who=f"q{number}",
            role="viewer",
            filter={},
            started_at=now - timedelta(hours=1) + timedelta(seconds=number),
            heartbeat_at=now,
            state=ExportState.READY,
        )
        for number in range(MAX_KEPT + 5)
    ]
    # Running for more than a day, and alive: its writer still needs its files.
    long_running = ExportRecord(
        id="f" * 20,
        who="rui",
        role="viewer",
        filter={},
        started_at=now - 2 * MAX_AGE,
        heartbeat_at=now,
    )
    folder.path.mkdir()
    for record in old + recent:
        folder.save(record)
        folder.csv_path(record.id).write_text("x")
    folder.save(long_running)
    folder.partial_path(long_running.id).write_text("x")

    started = folder.start(who="ana", role="operator", shown_filter={}, now=now)

    finished = [record for record in folder.records() if record.state is ExportState.READY]
    newest = sorted(recent, key=lambda record: record.started_at)[-(MAX_KEPT - 1) :]
    assert {record.id for record in finished} == {record.id for record in newest}
    assert sorted(_exports(folder)) == sorted(
        [f"{record.id}.{suffix}" for record in newest for suffix in ("csv", "json")]
        + [f"{started.id}.json", f"{long_running.id}.csv.partial", f"{long_running.id}.json"]
    )


def test_a_record_changed_by_hand_is_no_export(folder: ExportFolder) -> None:
    folder.path.mkdir()
    (folder.path / f"{'a' * 20}.json").write_text(json.dumps({"id": "a" * 20, "state": "ready"}))

    assert folder.record("a" * 20) is None
    assert folder.record("../../etc/passwd") is None
    assert folder.records() == []
