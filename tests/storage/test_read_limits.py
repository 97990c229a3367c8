"""``Ledger.read_time_limit``: a read past its limit is stopped on the database itself (SQLite
interrupts the statement, PostgreSQL cancels it) and raised with a stable code; writes never
are; on each engine."""

from __future__ import annotations

import sqlite3
import time

import pytest

from payhooks.storage import Ledger, ReadTimeLimitError

#: A read that runs for seconds unless stopped: SQLite counts a hundred million numbers,
#: PostgreSQL sleeps.
SLOW = {
    "sqlite": (
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 100000000) "
        "SELECT count(*) FROM n"
    ),
    "postgresql": "SELECT pg_sleep(5)",
}


def _slow_read(ledger: Ledger) -> None:
    with ledger._engine.read() as conn:
        conn.execute(SLOW[ledger.engine]).fetchall()


def _interrupted_on_the_database(err: BaseException | None, engine: str) -> bool:
    """Whether the driver's error says the server (or SQLite) stopped the statement."""
    if engine == "sqlite":
        code = getattr(err, "sqlite_errorcode", None)
        return isinstance(err, sqlite3.OperationalError) and code == sqlite3.SQLITE_INTERRUPT
    import psycopg

    return isinstance(err, psycopg.errors.QueryCanceled)


def test_a_read_past_its_limit_is_stopped_on_the_database_with_its_code(ledger: Ledger) -> None:
    started = time.monotonic()
    with pytest.raises(ReadTimeLimitError) as exc_info, ledger.read_time_limit(50):
        _slow_read(ledger)

    assert exc_info.value.code == "read_time_limit"
    assert exc_info.value.limit_ms == 50
    assert exc_info.value.message == "The read stopped after 50 ms, its time limit."
    assert _interrupted_on_the_database(exc_info.value.__cause__, ledger.engine)
    assert time.monotonic() - started < 4  # stopped, not run to its end


def test_the_ledger_reads_as_before_once_the_block_has_ended(ledger: Ledger) -> None:
    with pytest.raises(ReadTimeLimitError), ledger.read_time_limit(20):
        _slow_read(ledger)

    ledger.expect_transaction("order-1", 2500, "CNY")
    assert ledger.state("order-1") is not None
    assert ledger.summary()


def test_writes_inside_a_limit_that_has_run_out_are_never_interrupted(ledger: Ledger) -> None:
    with ledger.read_time_limit(1):
        time.sleep(0.01)
        for number in range(200):  # each a transaction with several statements
            ledger.expect_transaction(f"order-{number}", 2500, "CNY")
        with ledger.transaction():
            ledger.expect_transaction("order-last", 100, "EUR")

    assert len(list(ledger.reconcile())) == 201


def test_a_limit_inside_a_longer_one_stops_its_reads_at_its_own_deadline(ledger: Ledger) -> None:
    with ledger.read_time_limit(60_000):
        with pytest.raises(ReadTimeLimitError) as exc_info, ledger.read_time_limit(30):
            _slow_read(ledger)
        assert exc_info.value.limit_ms == 30
        ledger.expect_transaction("order-1", 2500, "CNY")
        assert ledger.row("order-1") is not None  # the outer limit still lets reads run


def test_a_limit_inside_a_shorter_one_keeps_the_earlier_deadline(ledger: Ledger) -> None:
    with (
        pytest.raises(ReadTimeLimitError) as exc_info,
        ledger.read_time_limit(30),
        ledger.read_time_limit(60_000),
    ):
        _slow_read(ledger)

    assert exc_info.value.limit_ms == 30


@pytest.mark.parametrize("limit_ms", [0, -1, 3_600_001, 1.5, "2000", True, None])
def test_a_limit_that_is_not_a_whole_number_of_ms_in_range_is_refused(
    ledger: Ledger, limit_ms: object
) -> None:
    with pytest.raises(ValueError, match="limit_ms"), ledger.read_time_limit(limit_ms):  # type: ignore[arg-type]
        pass
