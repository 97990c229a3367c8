"""The schema: names of the contract, connection settings, versioned forward migrations."""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlite_utils import Database

from payhooks.storage import (
    SCHEMA_VERSION,
    DeliveryStatus,
    Ledger,
    ReconciliationState,
    SchemaVersionError,
)
from payhooks.storage.reconciliation import RECONCILIATION_VIEW_SQL
from payhooks.storage.sqlite import MIGRATIONS, configure


def test_a_new_file_gets_every_table_and_the_view(tmp_path: Path) -> None:
    with Ledger(tmp_path / "new.db") as ledger:
        db = ledger.database
        assert {"payments", "deliveries", "rejected_deliveries", "outcomes", "returns"} <= set(
            db.table_names()
        )
        assert {"transactions", "identifiers", "listed_identifiers"} <= set(db.table_names())
        assert sorted(db.view_names()) == [
            "identifiers_from_transactions",
            "listed_identifiers_from_service",
            "owed_signals",
            "reconciliation",
            "sync_drift",
            "transactions_from_outcomes",
        ]
        assert {"service_transactions", "sync_runs"} <= set(db.table_names())
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
        assert applied == [
            "0001_initial_schema",
            "0002_delivery_body_hash",
            "0003_reconciliation_reads_the_latest_outcome",
            "0004_rollup_tables",
            "0005_owed_signals",
            "0006_service_transactions",
            "0007_signals_on_outcomes",
            "0008_rollups_by_transaction_key",
            "0009_signals_on_deliveries",
            "0010_flattened_reconciliation_view",
            "0011_listed_identifiers",
            "0012_listed_identifiers_named",
        ]
        assert MIGRATIONS.pending(ledger.database) == []


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


# -- migrating a file written by an earlier payhooks -----------------------------------------


T0_TEXT = "2026-11-21T12:00:00+00:00"


def version_1_file(path: Path) -> None:
    """A ledger file as payhooks with schema version 1 left it, with a few rows."""
    db = Database(path)
    configure(db, busy_timeout_ms=5000)
    MIGRATIONS.apply(db, stop_before="0002_delivery_body_hash")
    conn = db.conn
    conn.execute(
        "INSERT INTO payments (external_identifier, kind, amount_minor, currency, created_at) "
        "VALUES ('order-1', 'transaction', 2500, 'CNY', ?)",
        (T0_TEXT,),
    )
    for n, body in enumerate([b'{"n": 1}', b'{"n": 2}', b""], start=1):
        conn.execute(
            "INSERT INTO deliveries (id, dedupe_key, received_at, headers, body, status, "
            "updated_at) VALUES (?, ?, ?, '{}', ?, ?, ?)",
            (n, f"msg_{n}", T0_TEXT, body, "received" if n == 3 else "processed", T0_TEXT),
        )
    conn.execute(
        "INSERT INTO outcomes (id, delivery_id, transaction_id, external_identifier, flow, "
        "payment_status, state, state_rank, amount, currency, amount_minor, paid_at, "
        "recorded_at) VALUES (7, 1, 'll-1', 'order-1', 'wallet', 'PS', 'succeeded', 2, "
        "'25.00', 'CNY', 2500, '2026-11-21T12:00:00+00:00', '2026-11-21T12:00:00+00:00')"
    )
    conn.execute("UPDATE deliveries SET outcome_id = 7 WHERE id = 1")
    conn.commit()
    db.close()


def test_a_version_1_file_is_migrated_keeping_every_delivery_and_reference(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v1.db"
    version_1_file(path)
    with Ledger(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        conn = ledger.database.conn
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        deliveries = list(ledger.deliveries())
        assert [(d.id, d.dedupe_key, d.status, d.outcome_id) for d in deliveries] == [
            (1, "msg_1", "processed", 7),
            (2, "msg_2", "processed", None),
            (3, "msg_3", "received", None),
        ]
        assert [d.body_sha256 for d in deliveries] == [
            hashlib.sha256(d.body).hexdigest() for d in deliveries
        ]
        assert ledger.state("order-1") is ReconciliationState.PAID
        # The migrated table takes what the new code writes, and still refuses what it must.
        reused = ledger.record_delivery(dedupe_key="msg_1", body=b"other", headers={})
        assert (reused.is_new, reused.reused_key_of) == (True, 1)
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(
                "INSERT INTO outcomes (delivery_id, transaction_id, external_identifier, flow, "
                "payment_status, state, state_rank, amount, currency, amount_minor, paid_at, "
                "recorded_at) VALUES (999, 't', 'o', 'wallet', 'PS', 'succeeded', 2, '1.00', "
                "'USD', 100, 'x', 'x')"
            )
        conn.rollback()
        indexes = {index.name for index in ledger.database.table("deliveries").indexes}
        assert "deliveries_status" in indexes
        # Nothing left behind: no temporary table, foreign keys checked at once again.
        assert conn.execute("SELECT name FROM sqlite_temp_master").fetchall() == []
        assert conn.execute("PRAGMA defer_foreign_keys").fetchone() == (0,)


def test_a_version_1_file_opened_inside_the_callers_transaction_migrates_within_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v1.db"
    version_1_file(path)
    db = Database(path)
    db.begin()
    with Ledger(db) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        assert db.conn.execute("PRAGMA defer_foreign_keys").fetchone() == (0,)
        db.conn.execute("COMMIT")
        assert [d.dedupe_key for d in ledger.deliveries()] == ["msg_1", "msg_2", "msg_3"]
    db.close()


@pytest.mark.parametrize("status", [*DeliveryStatus])
def test_the_deliveries_table_takes_every_delivery_status_and_nothing_else(
    tmp_path: Path, status: DeliveryStatus
) -> None:
    with Ledger(tmp_path / "new.db") as ledger:
        conn = ledger.database.conn
        delivery = ledger.record_delivery(dedupe_key="k", body=b"", headers={})
        conn.execute("UPDATE deliveries SET status = ? WHERE id = ?", (status.value, delivery.id))
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE deliveries SET status = 'lost' WHERE id = ?", (delivery.id,))
        conn.rollback()


def test_a_file_with_an_older_view_gets_the_current_rules(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    db = Database(path)
    configure(db, busy_timeout_ms=5000)
    MIGRATIONS.apply(db, stop_before="0003_reconciliation_reads_the_latest_outcome")
    db.execute("CREATE VIEW reconciliation AS SELECT 'paid' AS state")  # stands for the old one
    db.conn.commit()
    db.close()
    with Ledger(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        ledger.expect_transaction("order-1", 2500, "CNY")
        assert ledger.state("order-1") is ReconciliationState.PENDING
        (sql,) = ledger.database.conn.execute(
            "SELECT sql FROM sqlite_schema WHERE name = 'reconciliation'"
        ).fetchone()
        assert sql == RECONCILIATION_VIEW_SQL


@pytest.mark.sqlite_only  # SQLite's query plans
def test_deliveries_by_status_read_the_partial_index_but_for_processed(ledger: Ledger) -> None:
    """Since 0009 ``deliveries_status`` leaves out ``processed`` (the receiver's usual delivery
    writes no entry in it); a listing of any other status still reads it, in id order."""
    from payhooks.storage.deliveries import _SELECT_INDEXED_STATUS

    ledger.record_delivery(dedupe_key="msg_1", body=b"1", headers={})
    ledger.mark_delivery(1, "processing_error", error="KeyError")
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
    assert [d.id for d in ledger.deliveries("processing_error")] == [1]
    assert list(ledger.deliveries("processed")) == []
