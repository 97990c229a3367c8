"""``PAYHOOKS_SQLITE_SYNCHRONOUS`` and the ledger's ``synchronous`` option: FULL by default,
NORMAL only when asked for, anything else refused at start."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlite_utils import Database

from payhooks.receiver import PayHooks
from payhooks.receiver.demo import create_app
from payhooks.receiver.state import receiver_state
from payhooks.storage import Ledger
from payhooks.storage.sqlite import wal_sync
from tests.support.app import TEST_SECRET, AppFactory, BodyFactory, SignFunction

NOTIFY = "/payhooks/notifications"

# What `PRAGMA synchronous` reads back.
_PRAGMA_VALUES = {"NORMAL": 1, "FULL": 2}

needs_proc = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="reads the open descriptors from /proc"
)

# How SQLite syncs its write-ahead log: SQLite's alone.
pytestmark = pytest.mark.sqlite_only


def _pragma(ledger: Ledger) -> int:
    return int(ledger.database.conn.execute("PRAGMA synchronous").fetchone()[0])


def _syncs_every_commit(ledger: Ledger) -> bool:
    """Whether the ledger's commits reach the disk before its writes return: SQLite's own
    FULL, or NORMAL with the ledger syncing the WAL itself (``payhooks.storage.sqlite.wal_sync``)
    after a write: a write is made and the syncs it causes are counted at the system call."""
    if _pragma(ledger) == _PRAGMA_VALUES["FULL"]:
        return True
    synced: list[int] = []
    original = wal_sync._sync

    def counting(fd: int) -> None:
        synced.append(fd)
        original(fd)

    wal_sync._sync = counting
    try:
        ledger.receiver.record_delivery(dedupe_key=f"msg_{uuid.uuid4()}", body=b"{}", headers={})
    finally:
        wal_sync._sync = original
    return bool(synced)


def _database_path(ledger: Ledger) -> str:
    return str(ledger.database.conn.execute("PRAGMA database_list").fetchone()[2])


def _write(ledger: Ledger) -> None:
    ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})


def _receivers_ledger(app: Flask) -> Ledger:
    return receiver_state(app).ledger


@needs_proc
def test_a_ledger_syncs_every_commit_by_default(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        _write(ledger)

        assert ledger.synchronous == "FULL"
        assert _syncs_every_commit(ledger)


@needs_proc
@pytest.mark.parametrize("asked", ["NORMAL", "normal", "FULL", "full"])
def test_a_ledger_takes_either_mode_in_any_case(tmp_path: Path, asked: str) -> None:
    with Ledger(tmp_path / "ledger.db", synchronous=asked) as ledger:
        _write(ledger)

        assert ledger.synchronous == asked.upper()
        assert _syncs_every_commit(ledger) is (asked.upper() == "FULL")


def test_a_full_ledger_on_the_callers_database_leaves_the_syncing_to_sqlite(
    tmp_path: Path,
) -> None:
    # The caller may commit its own transactions, which the ledger would not sync.
    db = Database(tmp_path / "ledger.db")
    try:
        with Ledger(db) as ledger:
            assert _pragma(ledger) == _PRAGMA_VALUES["FULL"]
    finally:
        db.close()


@pytest.mark.parametrize("asked", ["OFF", "EXTRA ", "", "0", None])
def test_a_ledger_refuses_any_other_mode(tmp_path: Path, asked: Any) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        Ledger(tmp_path / "ledger.db", synchronous=asked)
    assert not (tmp_path / "ledger.db").exists()


@needs_proc
def test_the_receiver_syncs_every_commit_by_default(app: Flask) -> None:
    ledger = _receivers_ledger(app)
    _write(ledger)

    assert app.config["PAYHOOKS_SQLITE_SYNCHRONOUS"] == "FULL"
    assert ledger.synchronous == "FULL"
    assert _syncs_every_commit(ledger)


@needs_proc
@pytest.mark.parametrize("asked", ["NORMAL", "normal"])
def test_the_receiver_uses_normal_when_configured(make_app: AppFactory, asked: str) -> None:
    app = make_app(PAYHOOKS_SQLITE_SYNCHRONOUS=asked)
    ledger = _receivers_ledger(app)
    _write(ledger)

    assert ledger.synchronous == "NORMAL"
    assert not _syncs_every_commit(ledger)


def test_the_demo_app_reads_the_setting_from_the_environment(tmp_path: Path) -> None:
    app = create_app(
        environ={
            "PAYHOOKS_SECRETS": TEST_SECRET,
            "PAYHOOKS_DATABASE": str(tmp_path / "demo.db"),
            "PAYHOOKS_SQLITE_SYNCHRONOUS": "NORMAL",
        }
    )

    assert _receivers_ledger(app).synchronous == "NORMAL"


@pytest.mark.parametrize("asked", ["OFF", "fast", "", 1, None])
def test_any_other_setting_stops_init_app_naming_the_key(tmp_path: Path, asked: Any) -> None:
    app = Flask("durability", instance_path=str(tmp_path / "instance"))
    app.config.update(PAYHOOKS_SECRETS=[TEST_SECRET], PAYHOOKS_SQLITE_SYNCHRONOUS=asked)

    with pytest.raises(ValueError, match="PAYHOOKS_SQLITE_SYNCHRONOUS"):
        PayHooks(app)


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_a_deleted_write_ahead_log_is_answered_503_not_acknowledged(
    make_app: AppFactory,
    database: Path,
    make_body: BodyFactory,
    sign: SignFunction,
    synchronous: str,
) -> None:
    """SQLite would go on writing to the deleted log, and a crash would lose every delivery
    acknowledged since: the receiver refuses to acknowledge instead, so the service retries."""
    client = make_app(PAYHOOKS_SQLITE_SYNCHRONOUS=synchronous).test_client()
    first, second = make_body(transaction_id="ll-1"), make_body(transaction_id="ll-2")
    assert client.post(NOTIFY, data=first, headers=sign(first)).status_code == 200
    Path(f"{database}-wal").unlink()

    refused = client.post(NOTIFY, data=second, headers=sign(second))

    assert refused.status_code == 503
    assert refused.get_json()["error"]["code"] == "storage_unavailable"
