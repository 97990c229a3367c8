"""``GET {prefix}/health``: 200 when the ledger could store a notification now, 503 with the
reason's code otherwise, found with real faults (a lock held, an immutable file, a full disk,
a read-only database, PostgreSQL stopped) and without writing anything itself.

Each process answers from its last probe for a second (:mod:`payhooks.receiver.web.health_cache`):
a test that makes a fault after a healthy answer asks until the answer changes."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from payhooks.receiver import PayHooks, receiver_state
from payhooks.receiver.web.health import health_cache
from payhooks.storage import Ledger, migrate
from payhooks.storage.sqlite import SCHEMA_VERSION
from tests.support.app import TEST_SECRET, AppFactory
from tests.support.disks import small_tmpfs
from tests.support.live_server import eventually
from tests.support.postgres import PostgresServer, find_bin_dir

_HEALTH = "/payhooks/health"


def _health(app: Flask) -> tuple[int, dict[str, Any], dict[str, str]]:
    answer = app.test_client().get(_HEALTH)
    return answer.status_code, answer.get_json(), dict(answer.headers)


def _code(app: Flask) -> str | None:
    status, document, _ = _health(app)
    return None if status == 200 else document["error"]["code"]


def _becomes(app: Flask, code: str | None) -> bool:
    """Whether the answer turns to ``code`` (None: healthy) once the kept one is stale."""
    return eventually(lambda: _code(app) == code)


@pytest.fixture
def app_on(tmp_path: Path) -> Iterator[AppFactory]:
    """An app with the receiver on the target given as ``PAYHOOKS_DATABASE``; its thread's
    ledger closed after the test."""
    made: list[Flask] = []

    def factory(**config: Any) -> Flask:
        app = Flask("payhooks_health", instance_path=str(tmp_path / "instance"))
        app.config.update(PAYHOOKS_SECRETS=[TEST_SECRET], **config)
        PayHooks(app)
        made.append(app)
        return app

    yield factory
    for app in made:
        receiver_state(app).ledgers.close()


def test_a_ledger_that_can_be_written_is_healthy(make_app: AppFactory, engine: str) -> None:
    status, document, headers = _health(make_app())

    assert (status, document) == (
        200,
        {"status": "ok", "engine": engine, "schema_version": SCHEMA_VERSION},
    )
    assert headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
@pytest.mark.sqlite_only
def test_health_answers_only_get_with_a_json_405(app: Flask, method: str) -> None:
    answer = app.test_client().open(_HEALTH, method=method)

    assert answer.status_code == 405
    assert answer.get_json()["error"]["code"] == "method_not_allowed"
    assert answer.headers["Allow"] == "GET, HEAD"


@pytest.mark.sqlite_only
def test_a_hundred_checks_write_nothing_to_a_sqlite_ledger(
    make_app: AppFactory, database: Path
) -> None:
    app = make_app()
    assert _code(app) is None
    watcher = sqlite3.connect(database)
    wal = Path(f"{database}-wal")
    before = (watcher.execute("PRAGMA data_version").fetchone(), wal.stat().st_size)
    before_mtime = database.stat().st_mtime_ns

    for _ in range(100):
        assert _code(app) is None

    after = (watcher.execute("PRAGMA data_version").fetchone(), wal.stat().st_size)
    watcher.close()
    assert after == before
    assert database.stat().st_mtime_ns == before_mtime


@pytest.mark.postgresql
def test_a_hundred_checks_take_no_postgresql_transaction_id(
    app_on: AppFactory, postgres_url: str
) -> None:
    import psycopg

    app = app_on(PAYHOOKS_DATABASE=postgres_url)
    assert _code(app) is None
    next_xid = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        before = conn.execute(next_xid).fetchone()
        for _ in range(100):
            assert _code(app) is None
        after = conn.execute(next_xid).fetchone()

    assert after == before


@pytest.mark.parametrize("threads", [2, 32])
def test_concurrent_checks_within_a_second_probe_the_ledger_once(
    make_app: AppFactory, threads: int
) -> None:
    app = make_app()
    start = threading.Barrier(threads)
    statuses: list[int] = []

    def check() -> None:
        start.wait()
        statuses.append(app.test_client().get(_HEALTH).status_code)

    workers = [threading.Thread(target=check) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert statuses == [200] * threads
    assert health_cache(app).probes == 1


@pytest.mark.sqlite_only
def test_a_write_lock_held_for_less_than_the_busy_timeout_keeps_the_receiver_in_rotation(
    make_app: AppFactory, database: Path
) -> None:
    app = make_app(PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS=20, PAYHOOKS_BUSY_TIMEOUT_MS=60_000)
    assert _code(app) is None  # the thread's ledger is open before the lock is taken
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    codes: list[str | None] = []

    def three_probes_under_the_lock() -> bool:
        codes.append(_code(app))
        return health_cache(app).probes >= 4

    try:
        assert eventually(three_probes_under_the_lock)
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    assert set(codes) == {None}


@pytest.mark.sqlite_only
def test_a_write_lock_held_past_the_busy_timeout_is_ledger_locked_until_it_goes(
    make_app: AppFactory, database: Path
) -> None:
    app = make_app(PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS=50, PAYHOOKS_BUSY_TIMEOUT_MS=1)
    assert _code(app) is None
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")

    assert _becomes(app, "ledger_locked")
    status, document, headers = _health(app)
    assert (status, document["error"]["code"]) == (503, "ledger_locked")
    assert headers["Retry-After"]

    holder.execute("ROLLBACK")
    holder.close()
    assert _becomes(app, None)


@contextlib.contextmanager
def _immutable(path: Path) -> Iterator[None]:
    """``chattr +i``: even root may not write the file (which a ``chmod`` does not do)."""
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not possible here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.sqlite_only
def test_a_file_this_process_may_not_write_is_ledger_read_only(
    make_app: AppFactory, database: Path
) -> None:
    app = make_app()
    assert _code(app) is None

    with _immutable(database):
        assert not os.access(database, os.W_OK)
        assert _becomes(app, "ledger_read_only")

    assert _becomes(app, None)


@pytest.mark.sqlite_only
def test_free_space_under_the_threshold_is_ledger_disk_full(
    make_app: AppFactory, database: Path
) -> None:
    free = shutil.disk_usage(database.parent).free

    assert _code(make_app(PAYHOOKS_HEALTH_MIN_FREE_BYTES=free + 2**40)) == "ledger_disk_full"
    assert _code(make_app(PAYHOOKS_HEALTH_MIN_FREE_BYTES=0)) is None


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A real 4 MiB file system (tmpfs), mounted for the test; skipped where mounting is not
    allowed (not root, or a container without the capability)."""
    with small_tmpfs("4m") as folder:
        yield folder


@pytest.mark.sqlite_only
def test_a_disk_really_filled_is_ledger_disk_full_until_space_is_freed(
    make_app: AppFactory, small_disk: Path
) -> None:
    app = make_app(
        PAYHOOKS_DATABASE=str(small_disk / "payhooks.db"), PAYHOOKS_HEALTH_MIN_FREE_BYTES=2**20
    )
    assert _code(app) is None
    filler = small_disk / "filler"
    # Unbuffered, and the suppress outside the file: a buffered file's close would flush what
    # the last write left behind and raise ENOSPC again, past the suppress.
    with contextlib.suppress(OSError), filler.open("wb", buffering=0) as out:
        while True:  # until the file system says ENOSPC
            out.write(b"\0" * 65536)

    assert _becomes(app, "ledger_disk_full")

    filler.unlink()
    assert _becomes(app, None)


@pytest.mark.postgresql
def test_a_database_that_starts_transactions_read_only_is_ledger_read_only(
    app_on: AppFactory, postgres_url: str, postgres_server: tuple[PostgresServer, str]
) -> None:
    server, _ = postgres_server
    name = postgres_url.rsplit("/", 1)[1]
    server.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")

    assert _code(app_on(PAYHOOKS_DATABASE=postgres_url)) == "ledger_read_only"


@pytest.mark.postgresql
def test_a_role_that_may_only_select_is_ledger_read_only(
    app_on: AppFactory, postgres_url: str, postgres_server: tuple[PostgresServer, str]
) -> None:
    server, _ = postgres_server
    name = postgres_url.rsplit("/", 1)[1]
    role = f"reader_{name}"
    server.execute(f"CREATE ROLE {role} LOGIN")
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    reader_url = postgres_url.replace("postgresql://payhooks@", f"postgresql://{role}@")

    assert _code(app_on(PAYHOOKS_DATABASE=reader_url)) == "ledger_read_only"


@pytest.mark.postgresql
def test_a_database_not_migrated_is_ledger_migration_pending(
    app_on: AppFactory, postgres_server: tuple[PostgresServer, str]
) -> None:
    from payhooks.storage.postgresql import close_pools

    server, _ = postgres_server
    url = server.create_database()
    try:
        assert _code(app_on(PAYHOOKS_DATABASE=url)) == "ledger_migration_pending"
    finally:
        close_pools(url)
        server.drop_database(url)


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[tuple[PostgresServer, str]]:
    """A PostgreSQL server of this test's own, which it may stop and start again."""
    from payhooks.storage.postgresql import close_pools

    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL's binaries (pg_ctl) are not installed")
    server = PostgresServer(bin_dir)
    try:
        server.start()
        url = server.create_database()
        migrate(url)
        yield server, url
    finally:
        close_pools()
        server.stop()


@pytest.mark.postgresql
@pytest.mark.system
def test_postgresql_stopped_is_ledger_unavailable_and_healthy_again_once_restarted(
    own_postgres: tuple[PostgresServer, str], app_on: AppFactory
) -> None:
    server, url = own_postgres
    app = app_on(PAYHOOKS_DATABASE=url, PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS=500)
    assert _code(app) is None

    server.halt()
    assert _becomes(app, "ledger_unavailable")
    status, document, _ = _health(app)
    assert (status, document["error"]["code"]) == (503, "ledger_unavailable")

    server.start_again()
    assert eventually(lambda: _code(app) is None, timeout=60)


@pytest.mark.sqlite_only
def test_a_healthy_answer_and_a_refusal_name_no_payment(
    make_app: AppFactory, database: Path
) -> None:
    app = make_app(PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS=20, PAYHOOKS_BUSY_TIMEOUT_MS=1)
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-secretive", 100, "CNY")
    healthy = app.test_client().get(_HEALTH).text
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    assert _becomes(app, "ledger_locked")
    refused = app.test_client().get(_HEALTH).text
    holder.execute("ROLLBACK")
    holder.close()

    assert "order-secretive" not in refused + healthy
    assert TEST_SECRET not in refused + healthy
