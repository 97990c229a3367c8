"""The console's walls of cost: a page's reads under one time limit (a count that stops says so,
a page whose rows stop is a 503 that says so), and ledgers (a PostgreSQL pool) of its own
beside the receiver's."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from payhooks.console import Console
from payhooks.console.access import ACCESS_KEY, ConsoleAccess
from payhooks.receiver import config_from_env, load_settings, receiver_state
from payhooks.storage import Ledger
from payhooks.storage.times import to_text
from tests.console.conftest import NOTIFY, VIEWER, header_role
from tests.support.app import AppFactory, BodyFactory, SignFunction
from tests.support.page_html import parse_page

#: Enough rows that counting them takes far longer than a millisecond on any machine.
MANY = 300_000


def _fill_deliveries(ledger: Ledger) -> None:
    """``MANY`` processed deliveries received a minute ago, in one statement."""
    now = to_text(datetime.now(UTC) - timedelta(minutes=1))
    with ledger.database.conn:
        ledger.database.execute(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT ?) "
            "INSERT INTO deliveries (id, dedupe_key, received_at, headers, body, body_sha256, "
            "status, updated_at) SELECT x, 'k-' || x, ?, '{}', X'7B7D', "
            "printf('%064d', x), 'processed', ? FROM n",
            (MANY, now, now),
        )


def _fill_unexpected_payments(ledger: Ledger) -> None:
    """``MANY`` payments nobody expected, opened an hour ago, in one statement."""
    now = to_text(datetime.now(UTC) - timedelta(hours=1))
    with ledger.database.conn:
        ledger.database.execute(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT ?) "
            "INSERT INTO payment_states (external_identifier, state, currency, "
            "received_currency, received_amount_minor, refunded_amount_minor, "
            "charged_back_amount_minor, opened_at, periods_paid, transaction_ids, "
            "unknown_outcomes, refused_deliveries, conflicting_deliveries, updated_at) "
            "SELECT 'stranger-' || x, 'unexpected', 'CNY', 'CNY', 100, 0, 0, ?, 1, "
            "'[]', 0, 0, 0, ? FROM n",
            (MANY, now, now),
        )


def _built_once(tmp_path_factory: pytest.TempPathFactory, fill: Callable[[Ledger], None]) -> Path:
    """A SQLite ledger filled by ``fill``, closed, its WAL checkpointed into the file: the one
    file each test of this module copies, so the ``MANY`` rows are written once, not per test."""
    path = tmp_path_factory.mktemp("limits") / "payhooks.db"
    with Ledger(path) as ledger:
        fill(ledger)
    conn = sqlite3.connect(path)
    try:
        (busy, _, _) = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    assert busy == 0
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # every row is in the file itself
    return path


def _own_copy(built: Path, database: Path | str) -> Path:
    """The test's own copy of ``built`` at its ``database``, before anything opened that."""
    assert isinstance(database, Path), "the big ledgers are SQLite files"
    assert not database.exists()
    shutil.copy(built, database)
    return database


@pytest.fixture(scope="module")
def built_deliveries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built_once(tmp_path_factory, _fill_deliveries)


@pytest.fixture(scope="module")
def built_unexpected_payments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built_once(tmp_path_factory, _fill_unexpected_payments)


@pytest.fixture
def many_deliveries(built_deliveries: Path, database: Path | str) -> Path:
    """The test's database: its own copy of the ledger of ``MANY`` deliveries."""
    return _own_copy(built_deliveries, database)


@pytest.fixture
def many_unexpected_payments(built_unexpected_payments: Path, database: Path | str) -> Path:
    """The test's database: its own copy of the ledger of ``MANY`` unexpected payments."""
    return _own_copy(built_unexpected_payments, database)


def _limited_app(make_app: AppFactory, **options: Any) -> Flask:
    app = make_app()
    Console(app, authorize=header_role, url_prefix="/console", **options)
    return app


@pytest.mark.sqlite_only
def test_a_count_that_runs_past_the_limit_stops_and_the_log_says_so_beside_its_rows(
    make_app: AppFactory, many_deliveries: Path
) -> None:
    client = _limited_app(make_app, time_limit_ms=1).test_client()

    # One row: too few steps for SQLite to be stopped in; counting MANY never fits in 1 ms.
    page = client.get("/console/deliveries?limit=1", headers=VIEWER)

    assert page.status_code == 200
    stopped = parse_page(page.text).find("p", data_stopped=None)
    assert "Showing 1 delivery; stopped counting after 1 ms" in stopped.text()
    assert f"/console/deliveries/{MANY}" in page.text  # the newest row, listed
    assert "data-count=" not in page.text


@pytest.mark.sqlite_only
def test_the_same_log_with_the_default_limit_counts_every_row(
    make_app: AppFactory, many_deliveries: Path
) -> None:
    client = _limited_app(make_app).test_client()

    page = client.get("/console/deliveries?limit=1", headers=VIEWER)

    assert page.status_code == 200
    assert f'data-count="{MANY}"' in page.text
    assert "data-stopped" not in page.text


@pytest.mark.sqlite_only
def test_a_page_whose_rows_run_past_the_limit_is_a_503_that_says_so(
    make_app: AppFactory, many_unexpected_payments: Path
) -> None:
    client = _limited_app(make_app, time_limit_ms=1).test_client()

    # An identifier prefix no row has, newest first: every one of MANY read to find none.
    page = client.get(
        "/console/reconciliation?period=7d&amount_min=999999&currency=EUR", headers=VIEWER
    )

    assert page.status_code == 503
    error = parse_page(page.text).find(data_error="console_time_limit")
    assert "This page stopped after 1 ms, the console's time limit" in error.text()


@pytest.mark.sqlite_only
def test_the_finance_figures_that_run_past_the_limit_stop_and_the_page_says_so(
    make_app: AppFactory, many_unexpected_payments: Path
) -> None:
    client = _limited_app(make_app, time_limit_ms=1).test_client()

    # The period's first row, newest first, is two rows read along the indexes (too few steps
    # for SQLite to be stopped in); the period's figures (MANY grouped) never fit in 1 ms.
    page = client.get("/console/reconciliation?period=7d&limit=1", headers=VIEWER)

    assert page.status_code == 200, page.text
    assert "The figures of this period are not shown: stopped counting after 1 ms" in page.text
    assert "Totals of every matching row" not in page.text
    assert len(re.findall(r"<tr data-identifier=", page.text)) == 1


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"time_limit_ms": 0}, "time_limit_ms"),
        ({"time_limit_ms": 3_600_001}, "time_limit_ms"),
        ({"time_limit_ms": 2.5}, "time_limit_ms"),
        ({"pool_size": 0}, "pool_size"),
        ({"pool_size": 1001}, "pool_size"),
        ({"pool_size": True}, "pool_size"),
    ],
)
def test_a_limit_or_pool_size_out_of_range_is_a_value_error_naming_it(
    options: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        Console(authorize=header_role, **options)


def test_a_mounted_console_reads_through_ledgers_of_its_own_on_the_receivers_database(
    make_app: AppFactory,
) -> None:
    app = _limited_app(make_app, pool_size=3)
    access: ConsoleAccess = app.extensions[ACCESS_KEY]
    receiver = receiver_state(app).ledgers

    assert access.ledgers is not receiver
    assert (access.ledgers.path, access.ledgers.pool_name, access.ledgers.pool_size) == (
        receiver.path,
        "console",
        3,
    )
    assert (receiver.pool_name, receiver.pool_size) == ("receiver", 10)
    assert access.ledgers.read_only is False  # operators act through it
    with app.test_request_context():
        assert access.ledgers.get() is not receiver.get()


@pytest.mark.postgresql_only
def test_a_console_holding_every_connection_of_its_pool_never_stops_a_notification(
    make_app: AppFactory, make_body: BodyFactory, sign: SignFunction
) -> None:
    app = make_app(PAYHOOKS_POSTGRES_POOL_SIZE=1, PAYHOOKS_BUSY_TIMEOUT_MS=500)
    Console(app, authorize=header_role, url_prefix="/console", pool_size=1)
    access: ConsoleAccess = app.extensions[ACCESS_KEY]
    client = app.test_client()
    body = make_body()

    with access.ledgers.get()._engine.read():  # the console's one connection, held
        held = client.get("/console/deliveries", headers=VIEWER)
        stored = client.post(NOTIFY, data=body, headers=sign(body))

    assert held.status_code == 503  # the console waited for its own pool, and gave up
    parse_page(held.text).find(data_error="console_storage_unavailable")
    assert stored.status_code == 200, stored.text
    assert client.get("/console/deliveries", headers=VIEWER).status_code == 200


@pytest.mark.parametrize("size", [0, 1001, True, "10"])
def test_a_receiver_pool_size_out_of_range_is_refused_naming_its_key(size: object) -> None:
    with pytest.raises(ValueError, match="PAYHOOKS_POSTGRES_POOL_SIZE"):
        load_settings({"PAYHOOKS_POSTGRES_POOL_SIZE": size}, require_keys=False)


def test_the_receiver_pool_size_is_read_from_the_environment() -> None:
    config = config_from_env({"PAYHOOKS_POSTGRES_POOL_SIZE": "25"})

    assert load_settings(config, require_keys=False).postgres_pool_size == 25
    assert load_settings({}, require_keys=False).postgres_pool_size == 10


@pytest.mark.sqlite_only
def test_totals_of_a_filter_outside_the_rollup_stop_and_say_so_where_they_would_be(
    make_app: AppFactory, many_unexpected_payments: Path
) -> None:
    """A period long ago (its figures: nothing, at once) and rows registered since 2000: the
    first row is found at once along the index, their totals (every one of MANY read) never
    fit in 1 ms, and the page says so where they would be."""
    client = _limited_app(make_app, time_limit_ms=1).test_client()

    page = client.get(
        "/console/reconciliation?from=2001-01-01&until=2001-01-02&registered_from=2000-01-01"
        "&limit=1",
        headers=VIEWER,
    )

    assert page.status_code == 200, page.text
    note = parse_page(page.text).find("p", data_stopped_totals=None)
    assert "Totals of every matching row: stopped counting after 1 ms" in note.text()
    assert "Totals of every matching row</h2>" not in page.text
