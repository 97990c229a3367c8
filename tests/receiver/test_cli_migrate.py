"""``payhooks migrate`` on a SQLite file: a file that is not a ledger, and a folder this process
may not write, each refused in one sentence (exit 1) with the file as it was; a file that holds
nothing becomes a ledger."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import pytest

from payhooks.storage import Ledger
from payhooks.storage.sqlite import SCHEMA_VERSION
from tests.support.cli import clean_env, run
from tests.support.read_only import fingerprint, unwritable

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")


def _text(path: Path) -> None:
    path.write_text("order-1,25.00,CNY\n")


def _other_application(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('Ana')")
    conn.close()


def _other_application_in_wal_mode(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.close()


NOT_LEDGERS: dict[str, Callable[[Path], None]] = {
    "text": _text,
    "other_application": _other_application,
    "other_application_wal": _other_application_in_wal_mode,
}


def _folder(tmp_path: Path, writable: bool) -> AbstractContextManager[Path]:
    return nullcontext(tmp_path) if writable else unwritable(tmp_path)


@pytest.mark.parametrize("writable", [True, False], ids=["writable_folder", "unwritable_folder"])
@pytest.mark.parametrize("make", NOT_LEDGERS.values(), ids=NOT_LEDGERS.keys())
def test_a_file_that_is_not_a_ledger_is_refused_in_one_sentence_and_left_as_it_was(
    tmp_path: Path, make: Callable[[Path], None], writable: bool
) -> None:
    path = tmp_path / "shop.db"
    make(path)
    before = fingerprint(path)

    with _folder(tmp_path, writable):
        result = run(["migrate", "--database", str(path)])

    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: {path} is not a payhooks ledger (it holds no payhooks schema); nothing was "
        "changed in it.\n"
    )
    assert fingerprint(path) == before  # the same bytes, never written
    assert [item.name for item in tmp_path.iterdir()] == ["shop.db"]  # no -wal, -shm, lock


def test_a_new_ledger_in_a_folder_this_process_may_not_write_is_one_sentence(
    tmp_path: Path,
) -> None:
    path = tmp_path / "payhooks.db"

    with unwritable(tmp_path):
        result = run(["migrate", "--database", str(path)])

    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: Cannot make a ledger at {path}: this process may not write it or its folder "
        "(SQLite writes its -wal and -shm files beside it); nothing was changed.\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_current_ledger_in_a_folder_this_process_may_not_write_needs_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "payhooks.db"
    Ledger(path).close()
    before = fingerprint(path)

    with unwritable(tmp_path):
        result = run(["migrate", "--database", str(path)])

    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"The ledger at {path} is at schema version {SCHEMA_VERSION}: nothing to do.\n"
    )
    assert fingerprint(path) == before


def test_a_ledger_in_a_missing_folder_is_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "no-such-folder" / "payhooks.db"

    result = run(["migrate", "--database", str(path)])

    assert result.exit_code == 1
    assert result.stderr == f"Error: Cannot make a ledger at {path}: its folder does not exist.\n"


def _zero_length(path: Path) -> None:
    path.touch()


def _no_table(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 7")  # a valid SQLite file, one page, no table
    conn.close()


@pytest.mark.parametrize("make", [_zero_length, _no_table], ids=["zero_length", "no_table"])
def test_a_file_that_holds_nothing_becomes_a_ledger(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    """A zero-length file (what ``touch`` leaves) is an empty database to SQLite, and one with
    no table holds nothing either: making a ledger of it loses nothing."""
    path = tmp_path / "payhooks.db"
    make(path)

    result = run(["migrate", "--database", str(path)])

    assert result.exit_code == 0, result.output
    assert result.stdout == f"Migrated the ledger at {path} from version 0 to {SCHEMA_VERSION}.\n"
    with Ledger(path, create=False) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
