"""The schema: names of the contract, connection settings, versioned forward migrations."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlite_utils import Database

from bench.write_pages import btree_names, read_wal
from payhooks.storage import DeliveryStatus, Ledger, ReconciliationState
from payhooks.storage.errors import SchemaVersionError
from payhooks.storage.sqlite import MIGRATIONS, SCHEMA_VERSION
from tests.support.factories import make_outcome, record


def test_a_new_file_gets_every_table_and_the_view(tmp_path: Path) -> None:
    with Ledger(tmp_path / "new.db") as ledger:
        db = ledger.database
        assert set(db.table_names()) == {
            "_sqlite_migrations",
            "audit_log",
            "audit_prune_permits",
            "audit_refusals",
            "exception_reviews",
            "finance_days",
            "finance_days_opened",
            "finance_days_paid",
            "finance_hours_opened",
            "finance_hours_paid",
            "finance_rollup_dirty",
            "finance_rollup_pending",
            "finance_rollup_sources",
            "finance_rollup_state",
            "payments",
            "creation_attempts",
            "deliveries",
            "rejected_deliveries",
            "outcomes",
            "owed_signals",
            "signal_receivers",
            "signal_runs",
            "payment_states",
            "returns",
            "service_transaction_moves",
            "service_transactions",
            "sync_runs",
            "sync_unstorable_items",
        }
        assert sorted(db.view_names()) == ["reconciliation", "sync_drift"]
        triggers = db.conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'")
        assert sorted(name for (name,) in triggers) == [
            "audit_log_no_delete",
            "audit_log_no_update",
            "audit_prune_permits_no_delete",
            "audit_prune_permits_no_update",
        ]
        assert ledger.schema_version == SCHEMA_VERSION


def test_the_connection_is_in_wal_with_foreign_keys_and_the_busy_timeout(tmp_path: Path) -> None:
    with Ledger(tmp_path / "new.db", busy_timeout_ms=1234) as ledger:
        conn = ledger.database.conn
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (1234,)


def test_applied_migrations_are_recorded_by_name(tmp_path: Path) -> None:
    with Ledger(tmp_path / "new.db") as ledger:
        applied = [m.name for m in MIGRATIONS.applied(ledger.database)]
        assert applied == ["0.1.0"]


def test_an_empty_existing_file_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with Ledger(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        assert ledger.expect_transaction("order-1", 2500, "CNY")


def test_a_file_with_the_merchants_own_tables_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with closing(Database(path)) as merchants:
        merchants.table("orders").insert({"id": 1, "total": 2500}, pk="id")
    with Ledger(path) as ledger:
        assert ledger.database["orders"].count == 1
        assert "payments" in ledger.database.table_names()


def test_reopening_a_current_file_keeps_its_data_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger(path) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
    with Ledger(path) as reopened:
        assert reopened.database.conn.total_changes == 0
        assert reopened.state("order-1") is ReconciliationState.PENDING
        assert len(MIGRATIONS.applied(reopened.database)) == SCHEMA_VERSION


def test_a_file_migrated_by_a_newer_payhooks_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger(path) as ledger:
        ledger.database.table("_sqlite_migrations").insert(
            {"migration_set": "payhooks", "name": "0099_from_the_future", "applied_at": "x"}
        )
    with pytest.raises(SchemaVersionError) as exc_info:
        Ledger(path)
    assert exc_info.value.code == "schema_too_new"
    assert "0099_from_the_future" in exc_info.value.message


def test_writes_join_a_transaction_the_caller_already_opened(tmp_path: Path) -> None:
    db = Database(tmp_path / "app.db")
    with Ledger(db) as ledger:
        db.begin()
        ledger.expect_transaction("order-1", 2500, "CNY")
        assert db.conn.in_transaction
        db.rollback()
        assert ledger.state("order-1") is None
        with db.atomic():
            ledger.expect_transaction("order-2", 2500, "CNY")
        assert ledger.state("order-2") is ReconciliationState.PENDING
    # The caller's database stays open: the ledger did not open it.
    assert db.execute("SELECT COUNT(*) FROM payments").fetchone() == (1,)
    db.close()


def test_a_new_file_opened_inside_the_callers_transaction_migrates_within_it(
    tmp_path: Path,
) -> None:
    db = Database(tmp_path / "app.db")
    db.begin()
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    with Ledger(db) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        ledger.expect_transaction("order-1", 2500, "CNY")
        db.rollback()
        assert "payments" not in db.table_names()
    db.close()


def test_foreign_keys_tie_outcomes_to_stored_deliveries(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        conn = ledger.database.conn
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(
                "INSERT INTO outcomes (delivery_id, transaction_id, external_identifier, flow, "
                "payment_status, state, state_rank, amount, currency, amount_minor, paid_at, "
                "recorded_at) VALUES (999, 't', 'o', 'wallet', 'PS', 'succeeded', 2, '1.00', "
                "'USD', 100, 'x', 'x')"
            )
        conn.rollback()


def test_a_negative_busy_timeout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="busy_timeout_ms"):
        Ledger(tmp_path / "x.db", busy_timeout_ms=-1)


@pytest.mark.parametrize("status", [*DeliveryStatus])
def test_the_deliveries_table_takes_every_delivery_status_and_nothing_else(
    tmp_path: Path, status: DeliveryStatus
) -> None:
    with Ledger(tmp_path / "new.db") as ledger:
        conn = ledger.database.conn
        delivery = ledger.receiver.record_delivery(dedupe_key="k", body=b"", headers={})
        conn.execute("UPDATE deliveries SET status = ? WHERE id = ?", (status.value, delivery.id))
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE deliveries SET status = 'lost' WHERE id = ?", (delivery.id,))
        conn.rollback()


@pytest.mark.sqlite_only  # SQLite's query plans
def test_deliveries_by_status_read_the_partial_index_but_for_processed(ledger: Ledger) -> None:
    """``deliveries_status`` leaves out ``processed`` (the receiver's usual delivery
    writes no entry in it); a listing of any other status still reads it, in id order."""
    from payhooks.storage.deliveries import _SELECT_INDEXED_STATUS

    ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"1", headers={})
    ledger.receiver.mark_delivery(1, "processing_error", error="KeyError")
    conn = ledger.database.conn
    plan = " ".join(
        row[3]
        for row in conn.execute(f"EXPLAIN QUERY PLAN {_SELECT_INDEXED_STATUS}", ("received",))
    )
    assert "USING INDEX deliveries_status" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    (index_sql,) = conn.execute(
        "SELECT sql FROM sqlite_schema WHERE name = 'deliveries_status'"
    ).fetchone()
    assert index_sql.endswith("WHERE status <> 'processed'")
    assert [d.id for d in ledger.receiver.deliveries("processing_error")] == [1]
    assert list(ledger.receiver.deliveries("processed")) == []


@pytest.mark.sqlite_only  # SQLite's pages and write-ahead log
def test_a_delivery_writes_no_index_entry_that_no_read_needs(ledger: Ledger) -> None:
    """Issue 38's WAL pages per delivery: a delivery stored before its payment is known has
    no entry in ``deliveries_identifier`` (partial), and a payment's row stored anew with its
    kind unchanged leaves ``payment_states_order`` unwritten (SQLite rewrites an index whenever
    its column is in the ``SET``, changed or not). A kind that changes is still stored."""
    conn = ledger.database.conn

    def identifier_entries() -> int:
        return int(
            conn.execute(
                "SELECT COALESCE(SUM(ncell), 0) FROM dbstat "
                "WHERE name = 'deliveries_identifier' AND pagetype = 'leaf'"
            ).fetchone()[0]
        )

    delivery = ledger.receiver.record_delivery(dedupe_key="msg_0", body=b"0", headers={})
    assert delivery.status is DeliveryStatus.RECEIVED
    assert identifier_entries() == 0
    record(ledger, make_outcome(external_identifier="order-1"))  # unexpected: kind NULL
    ledger.expect_transaction("order-1", 2500, "CNY")  # the kind changes, and is stored
    assert conn.execute("SELECT kind FROM payment_states").fetchall() == [("transaction",)]
    assert identifier_entries() == 1

    (path,) = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"]
    assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone() == (0, 0, 0)
    record(ledger, make_outcome(transaction_id="ll-2", payment_status="PS2"))
    pages, _ = read_wal(Path(f"{path}-wal").read_bytes())
    names = btree_names(Path(path))
    written = {names.get(page) for page in pages}
    assert {"payment_states", "deliveries_identifier"} <= written, written
    assert "payment_states_order" not in written, written
    assert conn.execute("SELECT kind FROM payment_states").fetchall() == [("transaction",)]
