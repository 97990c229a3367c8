"""The owed signals, kept on the row of the delivery that recorded the outcome since migration
0009: owing, listing and marking them through the ledger, the ``owed_signals`` view, the partial
index of what is still owed, and the move of an older file's signals (a table of their own
before 0007, on the outcomes from 0007) onto the deliveries."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlite_utils import Database

from payhooks.storage import SCHEMA_VERSION, Ledger, OwedSignal, StorageError
from payhooks.storage.owed_signals import COLUMNS
from payhooks.storage.rollup import OUTCOME_COLUMNS
from payhooks.storage.sqlite import MIGRATIONS, configure
from payhooks.storage.sqlite.schema import _MIGRATION_NAMES
from payhooks.storage.times import from_text
from tests.support.engines import tables
from tests.support.factories import make_outcome, record

SUCCEEDED = ["notification-received", "payment-succeeded"]
_VIEW = (
    "SELECT outcome_id, delivery_id, signal, position, reconciliation, owed_at, sent_at "
    "FROM owed_signals ORDER BY outcome_id, position"
)


def _owe(ledger: Ledger, names: list[str], transaction_id: str = "ll-1") -> tuple[int, int]:
    recorded = record(ledger, make_outcome(transaction_id=transaction_id))
    delivery_id = int(
        tables(ledger)
        .execute("SELECT delivery_id FROM outcomes WHERE id = ?", (recorded.outcome_id,))
        .fetchone()[0]
    )
    ledger.owe_signals(
        recorded.outcome_id, delivery_id=delivery_id, signals=names, reconciliation="paid"
    )
    return recorded.outcome_id, delivery_id


def test_owed_signals_are_listed_in_order_until_marked_sent(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    first, delivery = _owe(ledger, SUCCEEDED)
    second, other = _owe(ledger, ["notification-received"], transaction_id="ll-2")
    (owed_at,) = (
        tables(ledger).execute("SELECT recorded_at FROM outcomes WHERE id = ?", (first,)).fetchone()
    )

    owed = ledger.owed_signals()

    assert owed[:2] == [
        OwedSignal(first, delivery, "notification-received", 0, "paid", owed_at, None),
        OwedSignal(first, delivery, "payment-succeeded", 1, "paid", owed_at, None),
    ]
    assert [(row.outcome_id, row.signal) for row in owed[2:]] == [(second, "notification-received")]
    assert ledger.owed_signals(other) == owed[2:]
    assert ledger.mark_signals_sent(first) == 2
    assert ledger.mark_signals_sent(first) == 0  # nothing was still owed
    assert ledger.owed_signals() == owed[2:]
    assert ledger.owed_signals(delivery) == []


def test_many_marks_are_written_at_once_each_with_its_own_time(ledger: Ledger) -> None:
    first, _ = _owe(ledger, SUCCEEDED)
    second, _ = _owe(ledger, ["notification-received"], transaction_id="ll-2")
    third, _ = _owe(ledger, ["notification-received"], transaction_id="ll-3")
    early, late = (datetime(2026, 11, 23, 4, minute, tzinfo=UTC) for minute in (1, 2))

    assert ledger.mark_many_signals_sent({first: early, second: late}) == 3
    assert ledger.mark_many_signals_sent({first: late}) == 0  # sent already: kept as it was
    assert ledger.mark_many_signals_sent({}) == 0

    sent = dict(tables(ledger).execute("SELECT outcome_id, sent_at FROM owed_signals").fetchall())
    assert {key: from_text(value) if value else None for key, value in sent.items()} == {
        first: early,
        second: late,
        third: None,
    }


def test_a_mark_without_a_time_zone_is_refused(ledger: Ledger) -> None:
    outcome_id, _ = _owe(ledger, SUCCEEDED)

    with pytest.raises(ValueError, match="sent_at"):
        ledger.mark_many_signals_sent({outcome_id: datetime(2026, 11, 23, 4, 1)})
    assert len(ledger.owed_signals()) == 2


def test_the_view_has_a_row_per_owed_signal_sent_or_not(ledger: Ledger) -> None:
    outcome_id, delivery_id = _owe(ledger, SUCCEEDED)
    ledger.mark_signals_sent(outcome_id)

    rows = tables(ledger).execute(_VIEW).fetchall()

    assert [row[:5] for row in rows] == [
        (outcome_id, delivery_id, "notification-received", 0, "paid"),
        (outcome_id, delivery_id, "payment-succeeded", 1, "paid"),
    ]
    (recorded_at, sent_at) = (
        tables(ledger)
        .execute(
            "SELECT o.recorded_at, d.signals_sent_at FROM outcomes AS o "
            "JOIN deliveries AS d ON d.id = o.delivery_id WHERE o.id = ?",
            (outcome_id,),
        )
        .fetchone()
    )
    assert sent_at is not None
    assert {row[5:] for row in rows} == {(recorded_at, sent_at)}


def test_owing_again_keeps_the_first_and_owing_none_stores_nothing(ledger: Ledger) -> None:
    outcome_id, delivery_id = _owe(ledger, ["notification-received", "notification-received"])
    ledger.owe_signals(
        outcome_id, delivery_id=delivery_id, signals=["payment-failed"], reconciliation="failed"
    )
    _, nothing_delivery = _owe(ledger, [], transaction_id="ll-2")

    assert [(row.signal, row.reconciliation) for row in ledger.owed_signals()] == [
        ("notification-received", "paid")
    ]
    stored = tables(ledger).execute(
        "SELECT signals FROM deliveries WHERE id IN (?, ?) ORDER BY id",
        (delivery_id, nothing_delivery),
    )
    assert stored.fetchall() == [('["notification-received"]',), (None,)]
    assert ledger.owed_signals(nothing_delivery) == []


def test_signals_owed_for_an_outcome_the_delivery_did_not_record_are_refused(
    ledger: Ledger,
) -> None:
    outcome_id, delivery_id = _owe(ledger, SUCCEEDED)

    with pytest.raises(StorageError, match="no outcome"):
        ledger.owe_signals(
            outcome_id, delivery_id=delivery_id + 1, signals=SUCCEEDED, reconciliation="paid"
        )
    with pytest.raises(StorageError, match="no outcome"):
        ledger.owe_signals(
            outcome_id + 1, delivery_id=delivery_id, signals=SUCCEEDED, reconciliation="paid"
        )


def test_the_rollups_follow_every_column_of_outcomes_and_the_signals_are_on_deliveries(
    ledger: Ledger,
) -> None:
    """An outcome column missing from the rollup trigger would leave the rollups stale when
    it changes; the signals live on the delivery, so marking them never touches an outcome."""

    def columns(table: str) -> set[str]:
        if ledger.engine == "sqlite":
            sql = "SELECT name FROM pragma_table_info(?)"
        else:
            sql = "SELECT column_name FROM information_schema.columns WHERE table_name = ?"
        return {name for (name,) in tables(ledger).execute(sql, (table,)).fetchall()}

    assert columns("outcomes") == set(OUTCOME_COLUMNS)
    assert set(COLUMNS) <= columns("deliveries")


@pytest.mark.sqlite_only  # counts SQLite's changes, triggers' included
def test_owing_and_marking_sent_leave_the_rollups_alone(ledger: Ledger) -> None:
    recorded = record(ledger, make_outcome())
    conn = ledger.database.conn

    before = conn.total_changes
    ledger.owe_signals(recorded.outcome_id, delivery_id=1, signals=SUCCEEDED, reconciliation="paid")
    ledger.mark_signals_sent(recorded.outcome_id)

    assert conn.total_changes - before == 2  # the delivery's row, twice; no rollup row


@pytest.mark.sqlite_only  # SQLite's query plan
def test_what_is_still_owed_is_found_through_the_partial_index(ledger: Ledger) -> None:
    from payhooks.storage.owed_signals import _MARK_SENT, _UNSENT

    conn = ledger.database.conn
    for sql, params in (
        (f"{_UNSENT} ORDER BY d.outcome_id", ()),
        (_MARK_SENT, ("2026-11-21T12:00:00+00:00", 1)),
    ):
        plan = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
        assert "USING INDEX deliveries_signals_owed" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
    # One delivery's are read by its primary key.
    plan = " ".join(
        row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {_UNSENT} AND d.id = ?", (1,))
    )
    assert "USING INTEGER PRIMARY KEY" in plan, plan
    # The index holds the deliveries still owing and nothing else.
    (index_sql,) = conn.execute(
        "SELECT sql FROM sqlite_schema WHERE name = 'deliveries_signals_owed'"
    ).fetchone()
    assert index_sql.endswith("WHERE signals IS NOT NULL AND signals_sent_at IS NULL")


# -- the moves: from the owed_signals table onto the outcomes (0007), then onto the deliveries
# (0009), from every earlier version -----------------------------------------------------------

T0 = "2026-11-21T12:00:00+00:00"
#: (id, outcome_id, delivery_id, signal, reconciliation, owed_at, sent_at) as 0005's table held
#: them: outcome 7 owes two, outcome 8 had its one sent, outcome 9 one of its two (so it is
#: still owed: sending again is allowed, losing one is not); outcome 10 owes none.
OLD_OWED = [
    (1, 7, 1, "notification-received", "paid", T0, None),
    (2, 7, 1, "payment-succeeded", "paid", T0, None),
    (3, 8, 2, "notification-received", "unexpected", T0, "2026-11-21T12:00:01+00:00"),
    (4, 9, 3, "notification-received", "failed", T0, "2026-11-21T12:00:02+00:00"),
    (5, 9, 3, "payment-failed", "failed", T0, None),
]

#: (outcome_id, signals, signals_reconciliation, signals_sent_at) as 0007 moves OLD_OWED.
MOVED = [
    (7, '["notification-received","payment-succeeded"]', "paid", None),
    (8, '["notification-received"]', "unexpected", "2026-11-21T12:00:01+00:00"),
    (9, '["notification-received","payment-failed"]', "failed", None),
    (10, None, None, None),
]
_ON_OUTCOMES = _MIGRATION_NAMES.index("0007_signals_on_outcomes") + 1


def old_file(path: Path, version: int) -> None:
    """A ledger file at schema ``version``, with four outcomes of four deliveries and, from
    version 5 on, the owed signals of :data:`OLD_OWED` (in 0005's table, or from 0007 on the
    outcomes as 0007 moved them)."""
    db = Database(path)
    configure(db, busy_timeout_ms=5000)
    MIGRATIONS.apply(db, stop_before=_MIGRATION_NAMES[version])
    conn = db.conn
    # Version 1 has no body_sha256 (0002 computes it).
    digest = ", ?" if version >= 2 else ""
    for n in range(1, 5):
        conn.execute(
            "INSERT INTO deliveries (id, dedupe_key, received_at, headers, body, status, "  # noqa: S608
            f"updated_at{digest and ', body_sha256'}) "
            f"VALUES (?, ?, ?, '{{}}', x'00', 'processed', ?{digest})",
            (n, f"msg_{n}", T0, T0, *([hashlib.sha256(b"\x00").hexdigest()] if digest else [])),
        )
        conn.execute(
            "INSERT INTO outcomes (id, delivery_id, transaction_id, external_identifier, flow, "
            "payment_status, state, state_rank, amount, currency, amount_minor, paid_at, "
            "recorded_at) VALUES (?, ?, ?, ?, 'wallet', 'PS', 'succeeded', 2, '25.00', 'CNY', "
            "2500, ?, ?)",
            (n + 6, n, f"ll-{n}", f"order-{n}", T0, T0),
        )
        conn.execute("UPDATE deliveries SET outcome_id = ? WHERE id = ?", (n + 6, n))
    if version >= _ON_OUTCOMES:
        conn.executemany(
            "UPDATE outcomes SET signals = ?, signals_reconciliation = ?, signals_sent_at = ? "
            "WHERE id = ?",
            [(signals, state, sent_at, outcome) for outcome, signals, state, sent_at in MOVED],
        )
    elif version >= 5:
        conn.executemany("INSERT INTO owed_signals VALUES (?, ?, ?, ?, ?, ?, ?)", OLD_OWED)
    conn.commit()
    db.close()


# Every version before 0009: before 0007 the owed signals were a table of their own, from 0007
# on the outcomes.
@pytest.mark.parametrize(
    "version", range(1, _MIGRATION_NAMES.index("0009_signals_on_deliveries") + 1)
)
def test_every_earlier_sqlite_version_moves_its_owed_signals_onto_their_deliveries(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / f"v{version}.db"
    old_file(path, version)

    with Ledger(path) as ledger:
        conn = ledger.database.conn
        assert ledger.schema_version == SCHEMA_VERSION
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        kinds = dict(conn.execute("SELECT name, type FROM sqlite_schema"))
        assert kinds["owed_signals"] == "view"
        assert kinds["deliveries_signals_owed"] == "index"
        assert "outcomes_signals_owed" not in kinds  # 0009 dropped it
        assert "owed_signals_unsent" not in kinds
        assert "outcomes_delivery" not in kinds  # 0007 dropped it: see migrations 0007
        assert "outcomes_reconciliation" not in kinds  # 0008 dropped it
        stored = conn.execute(
            "SELECT outcome_id, signals, signals_reconciliation, signals_sent_at "
            "FROM deliveries ORDER BY id"
        ).fetchall()
        assert {row[1] for row in conn.execute("PRAGMA table_info('outcomes')")} == set(
            OUTCOME_COLUMNS
        )
        if version < 5:  # no owed signals before 0005
            assert stored == [(n, None, None, None) for n in range(7, 11)]
            assert ledger.owed_signals() == []
            return
        assert stored == MOVED
        assert [(row.outcome_id, row.signal) for row in ledger.owed_signals()] == [
            (7, "notification-received"),
            (7, "payment-succeeded"),
            (9, "notification-received"),
            (9, "payment-failed"),
        ]
        # The view gives back the old table's rows, but for the ids and the partly sent one.
        assert [row[:5] for row in conn.execute(_VIEW)] == [
            (outcome, delivery, signal, position, state)
            for (outcome, delivery, signal, state), position in zip(
                [row[1:5] for row in OLD_OWED], [0, 1, 0, 0, 1], strict=True
            )
        ]
        assert ledger.mark_signals_sent(9) == 2
        assert ledger.owed_signals(3) == []


def test_the_old_table_is_dropped_only_with_its_rows_moved(tmp_path: Path) -> None:
    """The move and the drop are one transaction: a failure between them keeps the table."""
    path = tmp_path / "v6.db"
    old_file(path, 6)
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TRIGGER refuse BEFORE UPDATE ON outcomes BEGIN SELECT RAISE(ABORT, 'no'); END"
    )
    conn.commit()
    conn.close()

    with pytest.raises(StorageError):
        Ledger(path)

    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM owed_signals").fetchone() == (5,)
        kind = conn.execute("SELECT type FROM sqlite_schema WHERE name = 'owed_signals'")
        assert kind.fetchone() == ("table",)
    finally:
        conn.close()


@pytest.mark.sqlite_only  # SQLite's query plans
def test_no_index_looks_outcomes_up_by_delivery(
    ledger: Ledger,
) -> None:
    """Why 0007 dropped ``outcomes_delivery`` (and 0009 ``outcomes_signals_owed``): the owed
    signals are read from the deliveries, and the foreign key from outcomes to deliveries is
    checked on the parent's primary key when an outcome is written (deliveries are never
    deleted, the one case that would look outcomes up by delivery). A new query by delivery
    needs an index of its own: this fails to say so."""
    record(ledger, make_outcome())
    conn = ledger.database.conn
    indexes = [row[1] for row in conn.execute("PRAGMA index_list('outcomes')")]
    by_delivery = {
        index
        for index in indexes
        if ("delivery_id",) in conn.execute("SELECT name FROM pragma_index_info(?)", (index,))
    }
    assert by_delivery == set()


def test_a_delivery_holding_one_outcomes_signals_is_never_pointed_at_another(
    ledger: Ledger,
) -> None:
    """A delivery can hold one outcome's signals: recording another outcome on it (only a
    parser that reads its body otherwise could) is refused, and the signals stay owed."""
    outcome_id, delivery_id = _owe(ledger, SUCCEEDED)

    with pytest.raises(StorageError, match="recorded another outcome"):
        ledger.record_outcome(make_outcome(transaction_id="ll-2"), delivery_id=delivery_id)

    assert [row.outcome_id for row in ledger.owed_signals(delivery_id)] == [outcome_id] * 2
    stored = ledger.delivery(delivery_id)
    assert stored is not None
    assert stored.outcome_id == outcome_id


def test_migration_0009_refuses_to_drop_signals_it_cannot_move(tmp_path: Path) -> None:
    """Outcome 7 owes signals, but its delivery points at outcome 8: moving them to the
    delivery would lose them, so the migration fails and the file stays at version 8."""
    path = tmp_path / "v8.db"
    old_file(path, _MIGRATION_NAMES.index("0009_signals_on_deliveries"))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE deliveries SET outcome_id = 8 WHERE id = 1")
    conn.commit()
    conn.close()

    with pytest.raises(StorageError, match="cannot move"):
        Ledger(path)

    conn = sqlite3.connect(path)
    try:
        owed = conn.execute("SELECT signals FROM outcomes WHERE id = 7").fetchone()
        assert owed == ('["notification-received","payment-succeeded"]',)
    finally:
        conn.close()
