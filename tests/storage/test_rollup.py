"""The rollup tables: always their views, whatever writes them, and the reconciliation over them
always the same as over rows computed from the outcomes at query time."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlite_utils import Database

from payhooks.storage import SCHEMA_VERSION, Ledger, PaymentState, ReconciliationState
from payhooks.storage.listed_identifiers import DRIFT_INPUTS, listed_view_sql
from payhooks.storage.reconciliation import reconciliation_view_sql
from payhooks.storage.rollup import identifiers_view_sql
from payhooks.storage.sqlite import MIGRATIONS, TRIGGERS, configure
from tests.support.factories import T0, make_outcome, record
from tests.support.ledger_ops import (
    CODES,
    apply_expectation,
    apply_listing,
    apply_outcome,
    expectations,
    listings,
    outcomes,
)

IDENTIFIERS = ("a", "b", "c")


def plain_views(conn: sqlite3.Connection) -> None:
    """The reconciliation computed from ``outcomes`` and ``service_transactions`` at query
    time, as temporary views: the identifiers and the listed identifiers over
    ``transactions_from_outcomes`` rather than the stored tables."""
    conn.execute(
        identifiers_view_sql("temp.plain_identifiers", transactions="transactions_from_outcomes")
    )
    conn.execute(listed_view_sql("temp.plain_listed", transactions="transactions_from_outcomes"))
    conn.execute(
        reconciliation_view_sql(
            "temp.plain_reconciliation",
            identifiers="plain_identifiers",
            transactions="transactions_from_outcomes",
            listed="plain_listed",
        )
    )


def rows(conn: sqlite3.Connection, source: str, order: str) -> list[tuple[Any, ...]]:
    return conn.execute(f"SELECT * FROM {source} ORDER BY {order}").fetchall()  # noqa: S608


def assert_rollups_are_their_views(conn: sqlite3.Connection) -> None:
    by_transaction = "external_identifier, transaction_id"
    assert rows(conn, "transactions", by_transaction) == rows(
        conn, "transactions_from_outcomes", by_transaction
    )
    assert rows(conn, "identifiers", "external_identifier") == rows(
        conn, "plain_identifiers", "external_identifier"
    )
    assert rows(conn, "listed_identifiers", "external_identifier") == rows(
        conn, "plain_listed", "external_identifier"
    )
    assert rows(conn, "reconciliation", "external_identifier") == rows(
        conn, "plain_reconciliation", "external_identifier"
    )
    # One row per identifier: no two arms take the same one.
    (repeated,) = conn.execute(
        "SELECT COUNT(*) - COUNT(DISTINCT external_identifier) FROM reconciliation"
    ).fetchone()
    assert repeated == 0


outcome_op = outcomes(IDENTIFIERS, sorted(CODES), [999, 1999, 2999], ["AUD", "EUR", "USD"])
expect_op = expectations(IDENTIFIERS, ["AUD", "EUR", "USD"])
listing_op = listings(IDENTIFIERS)
outcome_example = ("outcome", "a", "t1", "PS", 999, "USD", 0)
sql_op = st.tuples(
    st.sampled_from(["forget", "drop", "move", "rename", "unlist", "rekey"]),
    st.sampled_from(IDENTIFIERS),
    st.integers(0, 5),
)


@settings(max_examples=120, deadline=None)
@given(ops=st.lists(st.one_of(outcome_op, outcome_op, expect_op, listing_op, sql_op), max_size=14))
# The listed transaction's notification arrives after the listing (its identifier is listed).
@example(ops=[("listed", "a", "a", "t1", PaymentState.SUCCEEDED), outcome_example])
def test_the_rollups_follow_every_write_and_reconcile_as_the_outcomes_do(
    ops: list[tuple[Any, ...]],
) -> None:
    with closing(Database(memory=True)) as db, Ledger(db) as ledger:
        conn = ledger.database.conn
        plain_views(conn)
        for op in ops:
            kind, identifier = op[0], op[1]
            if kind == "outcome":
                apply_outcome(ledger, op)
            elif kind == "expect":
                if ledger.state(identifier) in (None, ReconciliationState.UNEXPECTED):
                    apply_expectation(ledger, op)
            elif kind == "listed":
                apply_listing(ledger, op)
            else:
                # What a person might do with an SQL tool: the triggers follow it too.
                nth = op[2]
                with conn:
                    if kind == "forget":
                        conn.execute(
                            "DELETE FROM payments WHERE external_identifier = ?", (identifier,)
                        )
                    elif kind == "drop":
                        conn.execute(
                            "UPDATE deliveries SET outcome_id = NULL WHERE outcome_id = "
                            "(SELECT id FROM outcomes ORDER BY id LIMIT 1 OFFSET ?)",
                            (nth,),
                        )
                        conn.execute(
                            "DELETE FROM outcomes WHERE id = "
                            "(SELECT id FROM outcomes ORDER BY id LIMIT 1 OFFSET ?)",
                            (nth,),
                        )
                    elif kind == "unlist":
                        conn.execute(
                            "DELETE FROM service_transactions WHERE transaction_id = "
                            "(SELECT transaction_id FROM service_transactions "
                            "ORDER BY transaction_id LIMIT 1 OFFSET ?)",
                            (nth,),
                        )
                    elif kind == "rekey":  # a payment's identifier changed in place
                        conn.execute(
                            "UPDATE payments SET external_identifier = ? WHERE "
                            "external_identifier = (SELECT external_identifier FROM payments "
                            "ORDER BY 1 LIMIT 1 OFFSET ?) AND NOT EXISTS (SELECT 1 FROM "
                            "payments WHERE external_identifier = ?)",
                            (identifier, nth % 3, identifier),
                        )
                    elif kind == "move":
                        conn.execute(
                            "UPDATE outcomes SET paid_at = ? WHERE id = "
                            "(SELECT id FROM outcomes ORDER BY id LIMIT 1 OFFSET ?)",
                            ((T0 - timedelta(days=1)).isoformat(), nth),
                        )
                    else:
                        conn.execute(
                            "UPDATE outcomes SET external_identifier = ? WHERE id = "
                            "(SELECT id FROM outcomes ORDER BY id LIMIT 1 OFFSET ?)",
                            (identifier, nth),
                        )
            assert_rollups_are_their_views(conn)


#: Undoing migration 0012: whether anything but the list names a listed identifier.
UNDO_0012 = (
    "DROP VIEW reconciliation",
    "DROP VIEW listed_identifiers_from_service",
    "DROP INDEX listed_identifiers_unnamed",
    "ALTER TABLE listed_identifiers DROP COLUMN named",
)
#: Undoing migrations 0012 and 0011: the listed identifiers (and the views that read them).
UNDO_0011 = (*UNDO_0012, "DROP TABLE listed_identifiers")


def downgrade(path: Path, *statements: str, keep: int) -> None:
    """Take the ledger at ``path`` back to its first ``keep`` migrations: its derived triggers
    dropped, ``statements`` run (each later migration undone, newest first), and the later
    migrations' records deleted."""
    db = Database(path)
    configure(db, busy_timeout_ms=5000)
    for name in TRIGGERS:
        db.execute(f"DROP TRIGGER {name}")
    for statement in statements:
        db.execute(statement)
    for migration in MIGRATIONS.applied(db)[keep:]:
        db.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (migration.name,))
    db.conn.commit()
    db.close()


def version_3_file(path: Path) -> None:
    """A ledger as payhooks left it before the rollup tables: a payment and its outcomes."""
    with Ledger(path) as ledger:
        ledger.expect_subscription("sub-1", 999, "USD", 1999)
        for n, amount in enumerate([999, 1999, 1500]):
            record(
                ledger,
                make_outcome(
                    external_identifier="sub-1",
                    transaction_id=f"ll-{n}",
                    currency="USD",
                    amount_minor=amount,
                    paid_at=T0 + timedelta(days=30 * n),
                ),
            )
        record(ledger, make_outcome(external_identifier="stray", transaction_id="ll-9"))
    downgrade(
        path,
        *UNDO_0011,
        # migration 0009: the owed signals' columns on deliveries, the full status index
        "DROP VIEW owed_signals",
        "DROP INDEX deliveries_signals_owed",
        "ALTER TABLE deliveries DROP COLUMN signals",
        "ALTER TABLE deliveries DROP COLUMN signals_reconciliation",
        "ALTER TABLE deliveries DROP COLUMN signals_sent_at",
        "DROP INDEX deliveries_status",
        "CREATE INDEX deliveries_status ON deliveries (status, id)",
        # migration 0008: the reconciliation's index on outcomes, as 0001 made it
        "CREATE INDEX outcomes_reconciliation ON outcomes (external_identifier, "
        "transaction_id, state_rank, state, paid_at, currency, amount_minor)",
        # migration 0007: 0003's outcomes had an index by delivery
        "CREATE INDEX IF NOT EXISTS outcomes_delivery ON outcomes (delivery_id)",
        # migration 0006, after the rollups (the views that read its columns first)
        "DROP VIEW sync_drift",
        "DROP TABLE service_transactions",
        "DROP TABLE sync_runs",
        "ALTER TABLE payments DROP COLUMN creation",
        "ALTER TABLE payments DROP COLUMN creation_error",
        "ALTER TABLE payments DROP COLUMN creation_failed_at",
        "DROP VIEW identifiers_from_transactions",
        "DROP VIEW transactions_from_outcomes",
        "DROP TABLE identifiers",
        "DROP TABLE transactions",
        # migration 0005 made owed_signals, a table until 0007 turned it into the view above
        keep=3,
    )


def test_a_file_from_before_the_rollups_gets_them_filled_on_opening(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    version_3_file(path)
    with Ledger(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        conn = ledger.database.conn
        assert conn.execute("SELECT COUNT(*) FROM transactions").fetchone() == (4,)
        # 0008 dropped the outcomes' reconciliation index; the refill above did without it.
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_schema")}
        assert "outcomes_reconciliation" not in indexes
        plain_views(conn)
        assert_rollups_are_their_views(conn)
        states = {row.external_identifier: row.state for row in ledger.reconcile()}
        assert states == {
            "sub-1": ReconciliationState.AMOUNT_MISMATCH,
            "stray": ReconciliationState.UNEXPECTED,
        }
        # And the triggers are there: the next write is followed.
        ledger.expect_transaction("stray", 2500, "CNY")
        assert ledger.state("stray") is ReconciliationState.PAID
        assert_rollups_are_their_views(conn)


def listed_file(path: Path, undo: tuple[str, ...], keep: int) -> None:
    """A ledger as payhooks left it at migration ``keep`` (10: before ``listed_identifiers``;
    11: before its ``named``): a payment whose one listed transaction no notification told
    about, an agreeing one, and an identifier only the list names."""
    with Ledger(path) as ledger:
        ledger.expect_transaction("a", 1999, "USD")
        ledger.expect_transaction("b", 1999, "USD")
        apply_outcome(ledger, ("outcome", "b", "t1", "PS", 1999, "USD", 0))
        apply_listing(ledger, ("listed", "a", "a", "t1", PaymentState.SUCCEEDED))
        apply_listing(ledger, ("listed", "b", "b", "t1", PaymentState.SUCCEEDED))
        apply_listing(ledger, ("listed", "c", "c", "t1", PaymentState.SUCCEEDED))
    downgrade(path, *undo, keep=keep)


@pytest.mark.parametrize(("undo", "keep"), [(UNDO_0011, 10), (UNDO_0012, 11)], ids=["v10", "v11"])
def test_a_file_from_before_the_listed_identifiers_gets_them_filled_on_opening(
    tmp_path: Path, undo: tuple[str, ...], keep: int
) -> None:
    path = tmp_path / "old.db"
    listed_file(path, undo, keep)
    with Ledger(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        conn = ledger.database.conn
        assert conn.execute("SELECT * FROM listed_identifiers ORDER BY 1").fetchall() == [
            ("a", "missed_notification", 1),
            ("b", None, 1),
            ("c", "missed_notification", 0),
        ]
        assert ledger.state("a") is ReconciliationState.MISSED_NOTIFICATION
        assert ledger.state("b") is ReconciliationState.PAID
        assert ledger.state("c") is ReconciliationState.UNEXPECTED
        # And the triggers are there: the missed notification arrives, the drift goes; a
        # payment is registered for the identifier only the list named.
        apply_outcome(ledger, ("outcome", "a", "t1", "PS", 1999, "USD", 0))
        assert ledger.state("a") is ReconciliationState.PAID
        ledger.expect_transaction("c", 1999, "USD")
        assert ledger.state("c") is ReconciliationState.MISSED_NOTIFICATION
        plain_views(conn)
        assert_rollups_are_their_views(conn)


def test_a_listed_transactions_drift_reads_only_the_columns_its_update_trigger_watches() -> None:
    """The update trigger on ``service_transactions`` recomputes only when one of
    ``DRIFT_INPUTS`` changes (a sync rewrites ``last_seen_at`` on every row it sees): a column
    the drift reads must be one of them."""
    read = set(re.findall(r"\bs\.(\w+)", listed_view_sql()))
    assert read, listed_view_sql()
    assert read <= set(DRIFT_INPUTS)
