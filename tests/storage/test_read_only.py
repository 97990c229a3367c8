"""``Ledger(read_only=True)``: reads work, nothing is written, nothing is migrated."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from payhooks.storage import (
    Ledger,
    NotALedgerError,
    SchemaBehindError,
    StorageUnavailableError,
)
from tests.support.postgres import PostgresServer


def test_a_read_only_ledger_reads_and_refuses_every_write(database: Path | str) -> None:
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")

    with Ledger(database, read_only=True) as reader:
        assert reader.state("order-1") is not None
        with pytest.raises(StorageUnavailableError):
            reader.expect_transaction("order-2", 100, "CNY")
        assert reader.health().code == "ledger_read_only"

    with Ledger(database) as ledger:
        assert ledger.state("order-2") is None


@pytest.mark.sqlite_only
def test_opening_a_sqlite_file_read_only_changes_no_byte_of_it(database: Path) -> None:
    with Ledger(database) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
    before = hashlib.sha256(database.read_bytes()).hexdigest()

    with Ledger(database, read_only=True) as reader:
        assert reader.row("order-1") is not None

    assert hashlib.sha256(database.read_bytes()).hexdigest() == before


@pytest.mark.sqlite_only
def test_a_file_without_the_schema_is_not_migrated_when_opened_read_only(
    database: Path,
) -> None:
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()

    with pytest.raises(NotALedgerError):
        Ledger(database, read_only=True)

    with sqlite3.connect(database) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert tables == {"notes"}


@pytest.mark.postgresql
def test_a_postgresql_database_behind_is_schema_behind_when_opened_read_only(
    postgres_server: tuple[PostgresServer, str],
) -> None:
    from payhooks.storage.postgresql import close_pools

    server, _ = postgres_server
    url = server.create_database()
    try:
        with pytest.raises(SchemaBehindError) as exc_info:
            Ledger(url, read_only=True)
        assert exc_info.value.code == "schema_behind"
        assert "payhooks migrate" in exc_info.value.message
    finally:
        close_pools(url)
        server.drop_database(url)
