"""``Ledger.prune``'s ageing of the audit log, on each engine: old entries archived (read back
whole), then deleted through the permit the triggers check; newer entries, the prune's own
entry and every refusal the horizon does not reach stay; a direct change is still refused; a
failed prune deletes nothing."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Callable
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from payhooks.storage import Ledger, StorageError, read_archive
from payhooks.storage.archives import ArchiveError
from tests.support.factories import FixedClock

DAY = timedelta(days=1)
Rows = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def archives(tmp_path: Path) -> Path:
    folder = tmp_path / "archives"
    folder.mkdir()
    return folder


def _entry(ledger: Ledger, number: int) -> int:
    return ledger.console.audit(
        who="ana@example.com",
        role="operator",
        action="reprocess",
        result="processed",
        target=f"delivery {number}",
        note=f"note {number}" if number % 2 else None,
        detail={"number": number},
    )


def _fill(ledger: Ledger, clock: FixedClock) -> tuple[list[int], list[int]]:
    """Five entries and a refusal count 500 days old, then three entries and a count 10 days
    old; (the old entries' ids, the new ones')."""
    old = [_entry(ledger, number) for number in range(5)]
    ledger.console.count_refusal(
        who="vic", role="viewer", action="reprocess", code="console_forbidden_action"
    )
    clock.advance(490 * DAY.total_seconds())
    new = [_entry(ledger, number) for number in range(5, 8)]
    ledger.console.count_refusal(
        who="vic", role="viewer", action="reprocess", code="console_forbidden_action"
    )
    clock.advance(10 * DAY.total_seconds())
    return old, new


def _execute(database: Path | str, statement: str) -> None:
    """Straight through the driver, as a person with the database's password would."""
    if isinstance(database, Path):
        with closing(sqlite3.connect(database)) as lite, lite:
            lite.execute(statement)
        return
    with psycopg.connect(database) as server:
        server.execute(statement)


def test_prune_archives_old_entries_byte_for_byte_then_deletes_them(
    ledger: Ledger, clock: FixedClock, archives: Path, db_rows: Rows
) -> None:
    old, new = _fill(ledger, clock)
    before = db_rows("SELECT * FROM audit_log ORDER BY id")
    old_refusal = db_rows("SELECT * FROM audit_refusals ORDER BY id")[0]

    report = ledger.prune(DAY * 30, archives, audit_older_than=DAY * 400)

    aged = report.audit
    assert aged is not None
    assert aged.archive is not None
    assert (aged.entries, aged.refusals) == (5, 1)
    archived = list(read_archive(aged.archive))
    assert [(row.table, row.id) for row in archived] == [
        *(("audit_log", entry_id) for entry_id in old),
        ("audit_refusals", old_refusal["id"]),
    ]
    for row, stored in zip(archived[:5], before[:5], strict=True):
        assert {"id": row.id, "at": row.received_at, **row.columns} == stored
    assert {"id": archived[-1].id, "minute": archived[-1].received_at, **archived[-1].columns} == (
        old_refusal
    )
    checked = subprocess.run(
        ["sha256sum", "-c", f"{aged.archive.name}.sha256"],
        cwd=archives,
        capture_output=True,
        check=False,
    )
    assert checked.returncode == 0
    kept = ledger.console.audit_log().rows
    assert [entry.id for entry in kept][1:] == new[::-1]
    (own,) = [entry for entry in kept if entry.action == "prune_audit_log"]
    assert own.who == "payhooks prune"
    assert own.id > max(new)
    assert own.detail["entries"] == 5
    assert own.detail["archive"] == aged.archive.name
    assert own.detail["archive_sha256"] == aged.archive_sha256
    assert len(ledger.console.refusals()) == 1
    (permit,) = db_rows("SELECT up_to_id, archive, entries FROM audit_prune_permits")
    assert permit == {"up_to_id": old[-1], "archive": aged.archive.name, "entries": 5}


def test_a_second_prune_keeps_the_first_ones_entry_until_it_too_is_old(
    ledger: Ledger, clock: FixedClock, archives: Path
) -> None:
    _fill(ledger, clock)
    ledger.prune(DAY * 30, archives)
    again = ledger.prune(DAY * 30, archives)

    assert again.audit is not None
    assert again.audit.archive is None
    assert next(entry.action for entry in ledger.console.audit_log().rows) == "prune_audit_log"


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM audit_log",
        "DELETE FROM audit_log WHERE action = 'prune_audit_log'",
        "UPDATE audit_log SET note = 'rewritten'",
        "DELETE FROM audit_prune_permits",
        "UPDATE audit_prune_permits SET up_to_id = 1000000",
    ],
)
def test_after_a_prune_the_log_and_its_permits_still_refuse_any_change(
    ledger: Ledger, clock: FixedClock, archives: Path, database: Path | str, db_rows: Rows,
    statement: str,
) -> None:  # fmt: skip
    _fill(ledger, clock)
    ledger.prune(DAY * 30, archives)
    before = db_rows("SELECT * FROM audit_log ORDER BY id")

    with pytest.raises(Exception, match="append-only") as refused:
        _execute(database, statement)

    assert isinstance(refused.value, sqlite3.IntegrityError | psycopg.errors.RaiseException)
    assert db_rows("SELECT * FROM audit_log ORDER BY id") == before
    assert len(db_rows("SELECT * FROM audit_prune_permits")) == 1


def test_a_dry_run_counts_and_changes_nothing(
    ledger: Ledger, clock: FixedClock, archives: Path, db_rows: Rows
) -> None:
    _fill(ledger, clock)
    before = db_rows("SELECT * FROM audit_log ORDER BY id")

    report = ledger.prune(DAY * 30, archives, dry_run=True)

    assert report.audit is not None
    assert (report.audit.entries, report.audit.refusals, report.audit.archive) == (5, 1, None)
    assert db_rows("SELECT * FROM audit_log ORDER BY id") == before
    assert list(archives.iterdir()) == []


def test_an_audit_archive_that_cannot_be_written_deletes_nothing(
    ledger: Ledger, clock: FixedClock, archives: Path, db_rows: Rows
) -> None:
    _fill(ledger, clock)
    before = db_rows("SELECT * FROM audit_log ORDER BY id")

    with pytest.raises(ArchiveError):
        ledger.prune(DAY * 30, archives / "gone")

    assert db_rows("SELECT * FROM audit_log ORDER BY id") == before
    assert len(ledger.console.refusals()) == 2
    assert db_rows("SELECT * FROM audit_prune_permits") == []


def test_a_prune_stopped_between_its_archive_and_its_permit_deletes_nothing_and_the_next_ages(
    tmp_path: Path, clock: FixedClock, archives: Path
) -> None:
    """The write lock held by another writer when the permit is to be written: the archive is
    on disk, nothing is deleted; the next prune archives the same entries again and deletes."""
    path = tmp_path / "locked.db"
    with Ledger(path, clock=clock, busy_timeout_ms=50) as ledger:
        old, _ = _fill(ledger, clock)
        with closing(sqlite3.connect(path, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(StorageError):
                ledger.prune(DAY * 30, archives)
            other.execute("ROLLBACK")
        assert len(ledger.console.audit_log(limit=100).rows) == 8
        (first,) = archives.glob("*.jsonl.gz")

        report = ledger.prune(DAY * 30, archives)

        assert report.audit is not None
        assert report.audit.archive is not None
        assert [row.id for row in read_archive(first) if row.table == "audit_log"] == old
        assert [row.id for row in read_archive(report.audit.archive)][:5] == old
        assert len(ledger.console.audit_log(limit=100).rows) == 4


@pytest.mark.parametrize("audit_older_than", [DAY * 29, timedelta(0)])
def test_an_audit_horizon_shorter_than_the_bodies_is_refused(
    ledger: Ledger, archives: Path, audit_older_than: timedelta
) -> None:
    with pytest.raises(ValueError, match="audit_older_than"):
        ledger.prune(DAY * 30, archives, audit_older_than=audit_older_than)


def test_the_default_horizon_is_400_days_or_the_bodies_when_longer(
    ledger: Ledger, clock: FixedClock, archives: Path
) -> None:
    _fill(ledger, clock)  # the old entries are 500 days old, the new 10

    longer = ledger.prune(DAY * 501, archives, dry_run=True).audit
    default = ledger.prune(DAY * 30, archives, dry_run=True).audit

    assert longer is not None
    assert default is not None
    assert (longer.entries, default.entries) == (0, 5)
    assert json.dumps(default.horizon.isoformat())  # an aware time
    assert clock() - default.horizon == DAY * 400
