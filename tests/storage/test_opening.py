"""Opening a ledger: an existing-only open that leaves other files untouched, and targets shown
without their password."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from payhooks.storage import Ledger, NotALedgerError, redacted


def _another_apps_database(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('Ada')")
    conn.close()


def _digest(folder: Path) -> dict[str, str]:
    return {item.name: hashlib.sha256(item.read_bytes()).hexdigest() for item in folder.iterdir()}


@pytest.mark.parametrize(
    "make",
    [_another_apps_database, lambda path: path.write_text("name,amount\n"), Path.touch],
    ids=["another-apps-sqlite", "not-sqlite", "empty"],
)
def test_an_existing_only_open_refuses_a_file_that_is_not_a_ledger_and_changes_nothing(
    tmp_path: Path, make: object
) -> None:
    path = tmp_path / "app.db"
    make(path)  # type: ignore[operator]
    before = _digest(tmp_path)

    with pytest.raises(NotALedgerError) as exc_info:
        Ledger(path, create=False)

    assert exc_info.value.code == "not_a_ledger"
    assert exc_info.value.message == (
        f"{path} is not a payhooks ledger (it holds no payhooks schema); nothing was changed in it."
    )
    assert _digest(tmp_path) == before  # no table added, no WAL switched on, no lock file


def test_an_existing_only_open_opens_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "payhooks.db"
    with Ledger(path) as ledger:
        ledger.expect_transaction("order-1", 100, "CNY")

    with Ledger(path, create=False) as ledger:
        assert [row.external_identifier for row in ledger.reconcile()] == ["order-1"]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://shop:s3cret@db:5432/ledger", "postgresql://shop:***@db:5432/ledger"),
        ("postgres://shop:p@ss:w@db/ledger", "postgres://shop:***@db/ledger"),
        (
            "postgresql://shop@db/ledger?sslmode=require&password=s3cret",
            "postgresql://shop@db/ledger?sslmode=require&password=***",
        ),
        (
            "postgresql:///ledger?host=/run/pg&PASSWORD=s3cret",
            "postgresql:///ledger?host=/run/pg&PASSWORD=***",
        ),
        ("postgresql://shop@h1:5432,h2:5433/ledger", "postgresql://shop@h1:5432,h2:5433/ledger"),
        ("/var/lib/shop/pay@hooks.db", "/var/lib/shop/pay@hooks.db"),
    ],
)
def test_a_url_is_shown_with_its_password_as_stars(url: str, shown: str) -> None:
    assert redacted(url) == shown
