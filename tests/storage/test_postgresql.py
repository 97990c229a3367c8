"""What is PostgreSQL's alone: migrations (from empty, from every earlier version, several
hosts at once), refusing an unmigrated database, its errors as the ledger's, the pool across
``fork()``, several processes on one database, and the copy from SQLite.

Against a real server (the ``postgres_server`` fixture); the shared behaviour of the ledger is
tested on both engines by the other modules.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.storage import (
    DeliveryStatus,
    Ledger,
    ListedTransaction,
    PaymentState,
    ReconciliationState,
    StorageError,
    StorageUnavailableError,
    migrate,
)
from payhooks.storage.postgresql import close_pools
from payhooks.storage.reads import FinanceFilter
from payhooks.storage.sqlite import SCHEMA_VERSION
from tests.support.cli import run
from tests.support.engines import tables
from tests.support.factories import FixedClock, make_outcome, record
from tests.support.ledger_ops import (
    apply_expectation,
    apply_listing,
    apply_outcome,
    expectations,
    listings,
    outcomes,
)
from tests.support.postgres import PostgresServer


@pytest.fixture
def server(postgres_server: tuple[PostgresServer, str]) -> PostgresServer:
    return postgres_server[0]


@pytest.fixture
def empty_url(server: PostgresServer) -> Iterator[str]:
    """A database with nothing in it: no table, no migration."""
    url = server.create_database()
    try:
        yield url
    finally:
        close_pools(url)
        server.drop_database(url)


def _migrations(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute("SELECT name FROM payhooks_migrations")]


# -- migrations ------------------------------------------------------------------------------


def test_an_unmigrated_database_is_refused_until_payhooks_migrate(empty_url: str) -> None:
    with pytest.raises(StorageUnavailableError, match="payhooks migrate"):
        Ledger(empty_url)

    assert migrate(empty_url) == (0, SCHEMA_VERSION)
    assert migrate(empty_url) == (SCHEMA_VERSION, SCHEMA_VERSION)
    with Ledger(empty_url) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        assert ledger.engine == "postgresql"


def test_the_schema_has_only_the_audit_logs_triggers_and_the_same_tables_as_sqlite(
    empty_url: str, tmp_path: Path
) -> None:
    migrate(empty_url)
    with psycopg.connect(empty_url, autocommit=True) as conn:
        triggers = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname"
        )
        assert triggers.fetchall() == [
            ("audit_log_no_change",),
            ("audit_log_no_delete",),
            ("audit_log_no_truncate",),
            ("audit_prune_permits_no_change",),
            ("audit_prune_permits_no_truncate",),
        ]
        pg_tables = {
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchall()
        }
    with Ledger(tmp_path / "same.db") as sqlite_ledger:
        database = sqlite_ledger.database
        sqlite_tables = set(database.table_names()) | set(database.view_names())
    assert pg_tables - {"payhooks_migrations"} == sqlite_tables - {"_sqlite_migrations"}


def test_postgresql_has_sqlites_migrations_by_name_in_order() -> None:
    from payhooks.storage.postgresql import MIGRATIONS as POSTGRES_MIGRATIONS
    from payhooks.storage.sqlite.schema import _MIGRATION_NAMES

    assert [name for name, _ in POSTGRES_MIGRATIONS] == _MIGRATION_NAMES


def test_several_hosts_migrating_at_once_take_turns(empty_url: str) -> None:
    results: list[object] = []

    def deploy() -> None:
        try:
            results.append(migrate(empty_url)[1])
        except Exception as err:  # pragma: no cover - what the test would report
            results.append(err)

    threads = [threading.Thread(target=deploy) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results == [SCHEMA_VERSION] * 6
    assert len(_migrations(empty_url)) == SCHEMA_VERSION


def test_a_database_migrated_by_a_newer_payhooks_is_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO payhooks_migrations VALUES ('payhooks', '9999_future', '2030-01-01')"
        )
    with pytest.raises(StorageError) as exc_info:
        Ledger(postgres_url)
    assert exc_info.value.code == "schema_too_new"


def test_payhooks_migrate_migrates_a_url(empty_url: str) -> None:
    result = run(["migrate", "--database", empty_url])
    assert result.exit_code == 0, result.output
    assert f"from version 0 to {SCHEMA_VERSION}" in result.output
    assert "nothing to do" in run(["migrate", "--database", empty_url]).output


# -- errors ------------------------------------------------------------------------------------


def test_a_server_that_cannot_be_reached_is_unavailable(server: PostgresServer) -> None:
    url = f"postgresql://payhooks@127.0.0.1:{server.port}/no_such_database"
    try:
        with pytest.raises(StorageUnavailableError):
            Ledger(url, busy_timeout_ms=300)
    finally:
        close_pools(url)


def test_a_row_locked_past_the_busy_timeout_is_unavailable(postgres_url: str) -> None:
    with (
        psycopg.connect(postgres_url) as other,
        Ledger(postgres_url, busy_timeout_ms=200) as ledger,
    ):
        other.execute(
            "INSERT INTO payments (external_identifier, kind, amount_minor, currency, created_at)"
            " VALUES ('order-1', 'transaction', 1, 'CNY', '2026-01-01T00:00:00+00:00')"
        )  # uncommitted: its key is locked
        with pytest.raises(StorageUnavailableError) as exc_info:
            ledger.expect_transaction("order-1", 1, "CNY")
        assert isinstance(exc_info.value.__cause__, psycopg.errors.LockNotAvailable)
        other.rollback()
        assert ledger.expect_transaction("order-1", 1, "CNY") is True


def test_an_unknown_delivery_is_refused_and_the_transaction_goes_on(postgres_url: str) -> None:
    with Ledger(postgres_url) as ledger, ledger.transaction():
        delivery = ledger.receiver.record_delivery(dedupe_key="k", body=b"{}", headers={})
        with pytest.raises(StorageError, match="no delivery"):
            ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id + 99)
        ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id)
    with Ledger(postgres_url) as ledger:
        assert ledger.receiver.delivery(delivery.id).status is DeliveryStatus.PROCESSED  # type: ignore[union-attr]


# -- processes -----------------------------------------------------------------------------------


def test_a_forked_child_uses_its_own_pool_and_the_parent_keeps_working(
    postgres_url: str,
) -> None:
    with Ledger(postgres_url) as ledger:
        ledger.expect_transaction("parent-1", 100, "CNY")
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit status
            try:
                # The parent's ledger, carried across the fork, and a new one: both use the
                # child's own pool, never the parent's connections.
                ledger.expect_transaction("child-1", 100, "CNY")
                with Ledger(postgres_url) as child:
                    child.expect_transaction("child-2", 100, "CNY")
                    status = 0 if child.state("parent-1") is not None else 1
            except BaseException:
                status = 2
            os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        ledger.expect_transaction("parent-2", 100, "CNY")
        assert ledger.state("child-1") is ReconciliationState.PENDING
        assert ledger.state("child-2") is ReconciliationState.PENDING


def _writer(url: str, index: int, report: str) -> None:
    """One host: the same notifications as every other, a few of its own."""
    close_pools()
    results: dict[str, Any] = {"new": 0}
    with Ledger(url, busy_timeout_ms=30_000) as ledger:
        for n in range(30):
            outcome = make_outcome(external_identifier=f"order-{n}", transaction_id=f"ll-{n}")
            with ledger.transaction():
                delivery = ledger.receiver.record_delivery(
                    dedupe_key=f"msg-{n}", body=f"body-{n}".encode(), headers={}
                )
                recorded = ledger.receiver.record_outcome(outcome, delivery_id=delivery.id)
            results["new"] += recorded.is_new
            ledger.expect_transaction(f"order-{n}", 2500, "CNY")
    Path(report).write_text(json.dumps(results))


def test_several_processes_on_one_database_lose_and_double_nothing(
    postgres_url: str, tmp_path: Path
) -> None:
    context = multiprocessing.get_context("spawn")
    reports = [tmp_path / f"writer-{n}.json" for n in range(4)]
    processes = [
        context.Process(target=_writer, args=(postgres_url, n, str(reports[n]))) for n in range(4)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0

    assert sum(json.loads(report.read_text())["new"] for report in reports) == 30
    with Ledger(postgres_url) as ledger:
        sql = tables(ledger)
        assert sql.execute("SELECT COUNT(*), SUM(attempts) FROM deliveries").fetchone() == (30, 120)
        assert sql.execute("SELECT COUNT(*) FROM outcomes").fetchone() == (30,)
        assert sql.execute(
            "SELECT COUNT(*) FROM payment_states WHERE kind IS NOT NULL"
        ).fetchone() == (30,)
        assert {row.state for row in ledger.reconcile()} == {ReconciliationState.PAID}


# -- copy from SQLite ----------------------------------------------------------------------------


def _sqlite_ledger(path: Path) -> None:
    with Ledger(path) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        ledger.expect_subscription("sub-1", 999, "USD", 1999, metadata={"plan": "pro"})
        record(ledger, make_outcome())
        record(ledger, make_outcome(external_identifier="stranger", transaction_id="ll-9"))
        ledger.receiver.record_delivery(
            dedupe_key="raw", body=bytes(range(256)), headers={"a": "b"}
        )
        ledger.receiver.record_return("order-1", "return", "Authorised")
        ledger.receiver.record_rejected(
            reason="bad_signature", body=b"\x00forged", remote_addr="10.0.0.1"
        )
        # The sync's records: a creation failure, a complete run and an interrupted one.
        ledger.expect_transaction("order-2", 100, "CNY")
        ledger.service.mark_creation_failed("order-2", reason="400 refused", certain=True)
        run = ledger.service.begin_sync(max_age=timedelta(0))
        ledger.service.record_service_page(
            run.id,
            [ListedTransaction("ll-7", "listed-only", "PS", PaymentState.SUCCEEDED, "CNY", 5)],
            "cursor-1",
        )
        ledger.service.end_sync(run.id)
        ledger.service.end_sync(
            ledger.service.begin_sync(max_age=timedelta(0), resume=False).id, error="cut"
        )


def test_copy_ledger_copies_every_table_and_checks_the_copy(tmp_path: Path, empty_url: str) -> None:
    source = tmp_path / "old.db"
    _sqlite_ledger(source)

    result = run(["copy-ledger", str(source), empty_url])

    assert result.exit_code == 0, result.output
    assert "checks out" in result.output
    with Ledger(source) as old, Ledger(empty_url) as new:
        assert list(new.receiver.deliveries()) == list(old.receiver.deliveries())
        assert list(new.reconcile()) == list(old.reconcile())
        assert new.signals.owed() == old.signals.owed()
        assert new.service.creation_failure("order-2") == old.service.creation_failure("order-2")
        assert new.service.last_sync() == old.service.last_sync()
        assert list(new.service.sync_drift()) == list(old.service.sync_drift())
        # A new sync run continues after the copied ids.
        assert new.service.begin_sync(max_age=timedelta(0), resume=False).id == 3
        # New rows continue after the copied ids.
        last = max(delivery.id for delivery in old.receiver.deliveries())
        assert new.receiver.record_delivery(dedupe_key="next", body=b"", headers={}).id == last + 1


def test_copy_ledger_refuses_a_database_that_holds_a_ledger(
    tmp_path: Path, postgres_url: str
) -> None:
    source = tmp_path / "old.db"
    _sqlite_ledger(source)
    with Ledger(postgres_url) as ledger:
        ledger.expect_transaction("already-here", 1, "CNY")

    result = run(["copy-ledger", str(source), postgres_url])

    assert result.exit_code == 1
    assert "already holds a ledger" in result.output


def test_copy_ledger_says_which_table_it_copies(tmp_path: Path, empty_url: str) -> None:
    source = tmp_path / "old.db"
    _sqlite_ledger(source)

    result = run(["copy-ledger", str(source), empty_url])

    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[:2] == ["Copying payments...", "Copying creation_attempts..."]


def test_copy_ledger_refuses_a_source_that_is_not_a_ledger_and_leaves_it(
    tmp_path: Path, empty_url: str
) -> None:
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    conn.close()
    before = source.read_bytes()

    result = run(["copy-ledger", str(source), empty_url])

    assert result.exit_code == 2
    assert "is not a payhooks ledger" in result.stderr
    assert source.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["shop.db"]


# -- the same reconciliation on both engines -----------------------------------------------------

# Every code but PC: the comparison was written before cancellations had their own code.
_outcome_op = outcomes(
    ["a", "b", "c"], ["CB", "PF", "PS", "RS", "WP", "ZZ"], [999, 1999], ["EUR", "USD"]
)
_expect_op = expectations(["a", "b", "c"], ["EUR"])
_listing_op = listings(["a", "b", "c"])


def _apply(ledger: Ledger, ops: list[tuple[Any, ...]]) -> None:
    for n, op in enumerate(ops):
        if op[0] == "outcome":
            apply_outcome(ledger, op, dedupe_key=f"op-{n}")
        elif op[0] == "listed":
            apply_listing(ledger, op)
        else:
            apply_expectation(ledger, op)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(st.one_of(_outcome_op, _outcome_op, _expect_op, _listing_op), max_size=12).filter(
        lambda ops: (
            len({op[1] for op in ops if op[0] == "expect"})
            == len([op for op in ops if op[0] == "expect"])
        )
    )
)
def test_both_engines_reconcile_the_same_writes_alike(
    ops: list[tuple[Any, ...]], postgres_url: str
) -> None:
    with Ledger(postgres_url, clock=FixedClock()) as pg:
        tables(pg).execute(
            "TRUNCATE signal_runs, signal_receivers, owed_signals, outcomes, deliveries, "
            "creation_attempts, payments, payment_states, service_transactions, "
            "sync_unstorable_items, sync_runs RESTART IDENTITY"
        )
        with (
            tempfile.TemporaryDirectory() as folder,
            Ledger(Path(folder) / "l.db", clock=FixedClock()) as lite,
        ):
            _apply(lite, ops)
            _apply(pg, ops)
            assert list(pg.reconcile()) == list(lite.reconcile())
            assert pg.summary() == lite.summary()
            assert list(pg.service.sync_drift()) == list(lite.service.sync_drift())
            # Ids may differ (PostgreSQL spends one on an insert that conflicts): compare the rest.
            assert [(s.signal, s.position, s.reconciliation) for s in pg.signals.owed()] == [
                (s.signal, s.position, s.reconciliation) for s in lite.signals.owed()
            ]


# -- streaming --------------------------------------------------------------------------------


def test_a_stream_apart_reads_on_a_connection_of_its_own_never_one_of_the_pool_s(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export reads for as long as its rows take: on a connection opened for it, so the
    pool the receiver answers from lends nothing meanwhile; and the connection is gone when
    the stream is."""
    from payhooks.storage.postgresql import dedicated, pool_for

    monkeypatch.setattr(dedicated, "DEDICATED_BATCH_ROWS", 2)
    probe_sql = (
        "SELECT state, query FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name = %s"
    )
    with Ledger(postgres_url) as ledger:
        for number in range(5):
            ledger.expect_transaction(f"order-{number}", 2500, "CNY")
        rows = ledger.finance.rows(FinanceFilter(), connection_apart=True)
        first = next(rows)
        stats = pool_for(postgres_url, busy_timeout_ms=5000).get_stats()
        with psycopg.connect(postgres_url, autocommit=True) as probe:  # a fresh view each time
            during = probe.execute(probe_sql, (dedicated.APPLICATION_NAME,)).fetchall()
            rest = list(rows)
            after = probe.execute(probe_sql, (dedicated.APPLICATION_NAME,)).fetchall()

    assert stats["pool_size"] - stats["pool_available"] == 0  # none of the pool's lent out
    assert [(state, query.split(" FROM ")[0]) for state, query in during] == [
        ("idle in transaction", "FETCH FORWARD 2")
    ]
    assert after == []
    assert [first.external_identifier, *(row.external_identifier for row in rest)] == [
        f"order-{number}" for number in range(5)
    ]


def test_reconcile_streams_from_a_server_side_cursor_a_batch_at_a_time(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report over a million payments must not hold them all in the client's memory (the
    goal measured by ``bench.reconcile --postgres``: under 200 MB while streaming 10^6 rows).
    So after its first row, ``reconcile()`` has fetched one batch from a cursor the server
    holds, not the whole result: seen from another session, its connection sits in an open
    transaction whose last statement is a ``FETCH`` of one batch."""
    from payhooks.storage.postgresql import engine

    monkeypatch.setattr(engine, "STREAM_BATCH_ROWS", 2)
    with Ledger(postgres_url) as ledger:
        for number in range(5):
            ledger.expect_transaction(f"order-{number}", 2500, "CNY")
        rows = ledger.reconcile()
        first = next(rows)
        with psycopg.connect(postgres_url) as probe:
            found = probe.execute(
                "SELECT state, query FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND query LIKE 'FETCH%'"
            ).fetchall()
        rest = list(rows)

    assert [(state, query.split(" FROM ")[0]) for state, query in found] == [
        ("idle in transaction", "FETCH FORWARD 2")
    ]
    assert [first.external_identifier, *(row.external_identifier for row in rest)] == [
        f"order-{number}" for number in range(5)
    ]
