"""``payhooks prune`` and ``payhooks backup`` run as processes of their own while a real
receiver (gunicorn, 2 workers) takes signed notifications: nothing acknowledged is lost, the
archive holds exactly what was dropped, and a backup is one consistent moment of the ledger.

Size: ``PAYHOOKS_LOAD_SCALE`` (default 0.2) times 10,000 old deliveries and 2,000 new
notifications (at least 1,000 and 200).
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from payhooks.storage import Ledger, read_archive
from payhooks.verify import get_signer
from tests.support.app import TEST_SECRET
from tests.support.gunicorn_server import HAS_PROC, GunicornServer
from tests.support.load_plan import Delivered, Plan, build_plan, deliver_all
from tests.support.retention import fill_old_deliveries, old_body

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAS_PROC, reason="the gunicorn harness needs /proc"),
]

SCALE = float(os.environ.get("PAYHOOKS_LOAD_SCALE", "0.2"))
OLD = max(1000, round(10_000 * SCALE))
NEW = max(200, round(2000 * SCALE))
NOTIFY = "/payhooks/notifications"
ARCHIVE = re.compile(r"into (\S+\.jsonl\.gz) ")


def _env() -> dict[str, str]:
    """The environment without the developer's ``PAYHOOKS_*`` variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}


def _payhooks(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the console script as its own process."""
    return subprocess.run(
        [sys.executable, "-m", "payhooks.receiver", *args],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def server(tmp_path: Path, database: Path | str) -> Iterator[GunicornServer]:
    with Ledger(database):
        pass  # the schema, before the workers race to make it
    env = {
        "PAYHOOKS_DATABASE": str(database),
        "PAYHOOKS_SECRETS": TEST_SECRET,
        "SECRET_KEY": "retention-load",
    }
    with GunicornServer(
        "payhooks.receiver.demo:create_app()", env=env, cwd=tmp_path, workers=2, preload=True
    ) as running:
        yield running


def _deliver_while(
    server: GunicornServer, database: Path | str, run: Any, *, at: int
) -> tuple[Plan, Delivered]:
    """Deliver a plan's notifications; once ``at`` of them are answered, start ``run`` in a
    thread (joined before returning)."""
    plan = build_plan(NEW, seed=3)
    with Ledger(database) as setup:
        plan.register(setup)
    started = threading.Event()
    worker = threading.Thread(target=run, name="alongside", daemon=True)

    def progress(finished: int) -> None:
        if finished >= at and not started.is_set():
            started.set()
            worker.start()

    delivered = deliver_all(
        server.url(NOTIFY),
        plan.notifications,
        get_signer("standard-webhooks", TEST_SECRET),
        senders=4,
        on_progress=progress,
    )
    assert started.is_set()
    worker.join(timeout=300)
    assert not worker.is_alive()
    return plan, delivered


def _assert_nothing_acknowledged_lost(
    plan: Plan, delivered: Delivered, stored_keys: set[str]
) -> None:
    assert delivered.gave_up == []
    assert set(delivered.statuses()) <= {200, 422, 503, None}
    for notification in plan.notifications:
        (final,) = delivered.finals[notification.webhook_id]
        assert final.status in (200, 422)
        assert notification.webhook_id in stored_keys


def _keys(ledger: Ledger) -> set[str]:
    return {delivery.dedupe_key for delivery in ledger.receiver.deliveries()}


def test_prune_while_the_receiver_runs_loses_nothing_and_archives_what_it_drops(
    server: GunicornServer, database: Path | str, tmp_path: Path
) -> None:
    old_ids = fill_old_deliveries(database, OLD, body_size=700)
    archives = tmp_path / "archives"
    archives.mkdir()
    pruned: list[subprocess.CompletedProcess[str]] = []

    def prune() -> None:
        pruned.append(
            _payhooks(
                "prune",
                "--older-than",
                "7d",
                "--archive",
                str(archives),
                "--batch-size",
                "50",
                "--database",
                str(database),
            )
        )

    plan, delivered = _deliver_while(server, database, prune, at=NEW // 10)

    (result,) = pruned
    assert result.returncode == 0, result.stderr
    assert f"Pruned {OLD} deliveries' bodies and headers" in result.stdout
    assert "Traceback" not in server.log_text()
    with Ledger(database) as ledger:
        _assert_nothing_acknowledged_lost(plan, delivered, _keys(ledger))
        for delivery in ledger.receiver.deliveries():
            expected_empty = delivery.id in set(old_ids)
            assert (delivery.body == b"") is expected_empty, delivery.id
    match = ARCHIVE.search(result.stdout)
    assert match is not None, result.stdout
    archived = {row.id: row.body for row in read_archive(match.group(1))}
    assert sorted(archived) == sorted(old_ids)
    for number, delivery_id in enumerate(old_ids):
        assert archived[delivery_id] == old_body(number, 700)


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.sqlite_only
def test_a_backup_under_load_is_one_consistent_moment(
    server: GunicornServer, database: Path, tmp_path: Path
) -> None:
    fill_old_deliveries(database, OLD // 2)
    copy = tmp_path / "backup.db"
    before: list[int] = []
    backed_up: list[subprocess.CompletedProcess[str]] = []

    def backup() -> None:
        before.append(_rows(database, "SELECT MAX(id) FROM deliveries")[0][0])
        backed_up.append(_payhooks("backup", str(copy), "--database", str(database)))

    plan, delivered = _deliver_while(server, database, backup, at=NEW // 3)

    (result,) = backed_up
    assert result.returncode == 0, result.stderr
    assert _rows(copy, "PRAGMA integrity_check") == [("ok",)]
    with Ledger(database) as source:
        _assert_nothing_acknowledged_lost(plan, delivered, _keys(source))
    # Every delivery committed before the backup started is in it, and the copy is a prefix
    # of the source's deliveries (writers commit in id order): no hole, nothing half-written.
    columns = "id, dedupe_key, status, body_sha256, outcome_id"
    copied = _rows(copy, f"SELECT {columns} FROM deliveries ORDER BY id")  # noqa: S608
    last = copied[-1][0]
    assert last >= before[0]
    prefix = f"SELECT {columns} FROM deliveries WHERE id <= {last} ORDER BY id"  # noqa: S608
    assert copied == _rows(database, prefix)
    # The copy reconciles as the source did at that moment: the same rows for every payment
    # nothing changed after it.
    touched_later = {
        ident
        for (ident,) in _rows(
            database,
            f"SELECT DISTINCT external_identifier FROM deliveries WHERE id > {last}",  # noqa: S608
        )
    }
    with Ledger(database) as source, Ledger(copy, create=False) as backup_ledger:
        copied_rows = {r.external_identifier: r for r in backup_ledger.reconcile()}
        source_rows = {r.external_identifier: r for r in source.reconcile()}
    unchanged = set(source_rows) - touched_later
    assert unchanged <= set(copied_rows)
    for ident in unchanged:
        assert copied_rows[ident] == source_rows[ident], ident
