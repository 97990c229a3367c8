"""Shared fixtures: an app with the receiver on a temporary database, a client, a ledger on the
same file, signers, notification bodies, and a real HTTP server on loopback.

The live server is werkzeug's own (``make_server`` in a thread), so end-to-end tests go through
real sockets, real headers and a real chunked or oversized body, not the test client's shortcut.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import BaseWSGIServer, make_server

from payhooks.receiver import PayHooks, receiver_state
from payhooks.storage import Ledger
from payhooks.verify import Signer, get_signer
from tests.support.app import (
    TEST_SECRET,
    AppFactory,
    BodyFactory,
    SignFunction,
    notification_body,
    standard_webhooks_signer,
)
from tests.support.browser import chromium
from tests.support.live_server import LiveServer
from tests.support.postgres import INSTALL_COMMAND, PostgresServer, find_bin_dir

if TYPE_CHECKING:
    from playwright.sync_api import Browser

ENGINES = ("sqlite", "postgresql")
ROOT = Path(__file__).resolve().parents[1]


#: The folders whose tests run on both engines by default: the ledger's own, and the system
#: layer (real servers, kills, the docs walk) whole. Elsewhere the
#: engine is SQLite unless a test (or its module) is marked ``both_engines``: the receiver's,
#: the command line's and the console's tests test payhooks' logic, which is the same on either
#: engine, and each wing keeps end-to-end tests marked to run on PostgreSQL too.
BOTH_ENGINES_FOLDERS = ("tests/storage/", "tests/system/")


def _engines_for(metafunc: pytest.Metafunc) -> tuple[str, ...]:
    definition = metafunc.definition
    if definition.get_closest_marker("sqlite_only") is not None:
        return ENGINES[:1]
    if definition.get_closest_marker("postgresql_only") is not None:
        return ENGINES[1:]
    if definition.get_closest_marker("both_engines") is not None:
        return ENGINES
    where = Path(str(definition.path)).resolve().relative_to(ROOT).as_posix()
    return ENGINES if where.startswith(BOTH_ENGINES_FOLDERS) else ENGINES[:1]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that uses the ``database`` (so ``ledger``, ``app``...) runs on the engines
    :func:`_engines_for` gives: both for the ledger's tests and for tests marked
    ``both_engines``, SQLite alone for the rest; ``sqlite_only`` (WAL sync, the write lock,
    pragmas, the file itself) and ``postgresql_only`` (PostgreSQL's query plans) pin one. The
    PostgreSQL runs carry the ``postgresql`` marker: ``-m 'not postgresql'`` leaves them out."""
    if "engine" in metafunc.fixturenames:
        on_server = {"postgresql": [pytest.mark.postgresql]}
        metafunc.parametrize(
            "engine",
            [
                pytest.param(engine, marks=on_server.get(engine, ()))
                for engine in _engines_for(metafunc)
            ],
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for the PostgreSQL server itself (``postgres_url``, not through the
    ``engine``) carries the ``postgresql`` marker too."""
    for item in items:
        if {"postgres_url", "postgres_server"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgresql)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``pytest -n auto`` (``--dist loadgroup`` in pyproject.toml): the groups of
    :mod:`tests.support.parallel` each run on one worker, one test after another."""
    if config.getoption("dist") != "loadgroup":
        return None
    from tests.support.parallel import make_scheduler

    return make_scheduler(config, log)


def _postgres_unavailable(reason: str) -> None:
    """In CI the PostgreSQL tests must run: fail. A developer without the server: skip, with
    the one command that installs it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the PostgreSQL tests", pytrace=False)
    pytest.skip(f"{reason}; install it with: {INSTALL_COMMAND}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[tuple[PostgresServer, str]]:
    """A real PostgreSQL server for the session, and a template database already migrated
    (each test copies it); stopped after, also when start-up fails."""
    try:
        from payhooks.storage import migrate
        from payhooks.storage.postgresql import close_pools
    except ImportError as err:
        _postgres_unavailable(f"psycopg is not installed ({err})")
    bin_dir = find_bin_dir()
    if bin_dir is None:
        _postgres_unavailable("PostgreSQL's binaries (pg_ctl) are not installed")
        raise AssertionError("unreachable")
    server = PostgresServer(bin_dir)
    try:
        server.start()
        template_url = server.create_database()
        migrate(template_url)
        close_pools()
    except Exception as err:
        server.stop()
        _postgres_unavailable(f"PostgreSQL could not start: {err}")
    try:
        yield server, template_url.rsplit("/", 1)[1]
    finally:
        close_pools()
        server.stop()


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test; dropped after."""
    from payhooks.storage.postgresql import close_pools

    server, template = request.getfixturevalue("postgres_server")
    url = server.create_database(template)
    try:
        yield url
    finally:
        close_pools(url)
        server.drop_database(url)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the whole session (per xdist worker); each test opens its own
    context and page in it."""
    yield from chromium()


@pytest.fixture
def secret() -> str:
    return TEST_SECRET


@pytest.fixture
def database(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Path | str:
    """The ledger's target on the test's engine: a SQLite file's path, or a fresh PostgreSQL
    database's URL."""
    if engine == "postgresql":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return tmp_path / "payhooks.db"


@pytest.fixture
def make_app(tmp_path: Path, database: Path | str, secret: str) -> Iterator[AppFactory]:
    """Build an app with the receiver mounted; keyword arguments are config overrides.

    After the test, each app's waiting marks of sent signals are written and its ledger for this
    thread closed here, rather than whenever a garbage collection reaches the app: a test's
    files are closed when it ends, and no mark lands in a later test's database."""
    made: list[Flask] = []

    def factory(**config: Any) -> Flask:
        app = Flask("payhooks_test", instance_path=str(tmp_path / "instance"))
        app.config.update(
            TESTING=True,
            SECRET_KEY="test-secret-key",
            PAYHOOKS_DATABASE=str(database),
            PAYHOOKS_SECRETS=[secret],
        )
        app.config.update(config)
        PayHooks(app)
        made.append(app)
        return app

    yield factory
    for app in made:
        receiver_state(app).ledgers.close()


@pytest.fixture
def app(make_app: AppFactory) -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def ledger(database: Path | str) -> Iterator[Ledger]:
    """The test's own ledger on the app's database: register payments, read states."""
    with Ledger(database) as opened:
        yield opened


@pytest.fixture
def signer(secret: str) -> Signer:
    """payhooks' own Standard Webhooks signer for the test secret."""
    return get_signer("standard-webhooks", secret)


@pytest.fixture
def sign(secret: str) -> SignFunction:
    """Sign a body with the ``standardwebhooks`` package: an independent sender.

    ``sign(body, msg_id=..., timestamp=...)`` returns the three headers.
    """
    return standard_webhooks_signer(secret)


@pytest.fixture
def make_body() -> BodyFactory:
    """Build a notification body in one of the three forms, as the service writes it."""
    return notification_body


@pytest.fixture
def serve() -> Iterator[Callable[[Flask], LiveServer]]:
    """Serve any app on a free loopback port; every server is shut down after the test."""
    started: list[tuple[BaseWSGIServer, threading.Thread]] = []

    def start(app: Flask) -> LiveServer:
        server = make_server("127.0.0.1", 0, app, threaded=True)
        # A short poll: shutdown() waits for the loop to notice (0.5 s by default).
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="live-server",
            daemon=True,
        )
        thread.start()
        started.append((server, thread))
        return LiveServer(server, f"http://127.0.0.1:{server.server_port}")

    yield start
    for server, thread in started:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


@pytest.fixture
def live_server(app: Flask, serve: Callable[[Flask], LiveServer]) -> LiveServer:
    return serve(app)


@pytest.fixture
def db_rows(database: Path | str) -> Callable[..., list[dict[str, Any]]]:
    """Query the database directly, as finance tools do: ``db_rows("SELECT ... ?", value)``
    (``?`` placeholders on either engine)."""

    def query(sql: str, *params: Any) -> list[dict[str, Any]]:
        if isinstance(database, str):
            import psycopg
            from psycopg.rows import dict_row

            with psycopg.connect(database, autocommit=True, row_factory=dict_row) as pg:
                return list(pg.execute(sql.replace("?", "%s"), params))  # type: ignore[arg-type,unused-ignore]
        conn = sqlite3.connect(database)
        try:
            conn.row_factory = sqlite3.Row
            return [dict(row) for row in conn.execute(sql, params)]
        finally:
            conn.close()

    return query
