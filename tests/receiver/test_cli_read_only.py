"""The commands that only read a ledger, on a ledger in a folder this process may not write: they
open it read-only (as ``payhooks console --role viewer`` does), read it, and leave the folder
and the file as they were; ``backup`` tells a ledger it cannot read from a file that is not
one."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from payhooks.storage import Ledger
from tests.support.cli import clean_env, notification, record_notification, run
from tests.support.read_only import fingerprint, unwritable

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture
def ledger_folder(tmp_path: Path) -> Path:
    """``tmp_path/shared/payhooks.db``: order-1 expected and paid, its signals sent; closed, so
    its -wal and -shm are gone, as when no receiver runs (its write lock's file stays)."""
    folder = tmp_path / "shared"
    folder.mkdir()
    with Ledger(folder / "payhooks.db") as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        record_notification(ledger, notification("order-1"), "key-1")
        ledger.signals.mark_sent(ledger.signals.claim(lease=timedelta(minutes=1)))
    assert _names(folder) == ["payhooks.db", "payhooks.db.lock"]
    return folder


def _names(folder: Path) -> list[str]:
    return sorted(item.name for item in folder.iterdir())


READING_COMMANDS: dict[str, tuple[list[str], str]] = {
    "check": (["check"], "ok silence"),
    "reconcile": (["reconcile"], "order-1"),
    "deliveries_list": (["deliveries", "list"], "1 delivery(ies) match."),
    "deliveries_show": (["deliveries", "show", "1"], "key-1"),
    "show": (["show", "order-1"], "order-1"),
    "prune_dry_run": (["prune", "--older-than", "1d", "--dry-run"], "nothing was changed"),
    "backup": (["backup", "{tmp}/copy.db"], "Backed up"),
}


@pytest.mark.sqlite_only
@pytest.mark.parametrize(("args", "shown"), READING_COMMANDS.values(), ids=READING_COMMANDS.keys())
def test_a_reading_command_reads_a_ledger_in_a_folder_it_may_not_write(
    ledger_folder: Path, tmp_path: Path, args: list[str], shown: str
) -> None:
    ledger = ledger_folder / "payhooks.db"
    before = fingerprint(ledger)
    command = [part.format(tmp=tmp_path) for part in args]

    with unwritable(ledger_folder):
        result = run([*command, "--database", str(ledger)])

    assert result.exit_code == 0, result.output + result.stderr
    assert shown in result.stdout
    assert result.stderr == ""
    assert fingerprint(ledger) == before
    assert _names(ledger_folder) == ["payhooks.db", "payhooks.db.lock"]  # no -wal, no -shm


@pytest.mark.sqlite_only
def test_backup_of_a_ledger_it_cannot_read_says_so_and_not_that_it_is_no_ledger(
    ledger_folder: Path, tmp_path: Path
) -> None:
    """A ``-wal`` beside the ledger means a connection may be writing, so it is not opened
    ``immutable``; with no ``-shm`` and a folder SQLite cannot create one in, it cannot be read
    at all. That is a failure to read a ledger (exit 1), never "not a payhooks ledger"."""
    ledger = ledger_folder / "payhooks.db"
    (ledger_folder / "payhooks.db-wal").touch()
    dest = tmp_path / "copy.db"

    with unwritable(ledger_folder):
        result = run(["backup", str(dest), "--database", str(ledger)])

    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: Cannot read the ledger at {ledger}: ")
    assert result.stderr.count("\n") == 1
    assert "not a payhooks ledger" not in result.stderr
    assert not dest.exists()
