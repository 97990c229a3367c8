"""A ledger with a stored time payhooks never writes, as a SQL tool or another program could
leave one: the rows the health figures read, then one column of them overwritten."""

from __future__ import annotations

from datetime import timedelta

from payhooks.storage import Ledger
from tests.support.engines import tables
from tests.support.factories import make_outcome, record

__all__ = ["SPOILED_COLUMNS", "SPOILED_VALUES", "spoil"]

#: The stored times the health figures read (``Ledger.vitals``), as ``table.column``.
SPOILED_COLUMNS = (
    "deliveries.received_at",
    "owed_signals.owed_at",
    "sync_runs.started_at",
    "sync_runs.finished_at",
    "rejected_deliveries.received_at",
)
#: Not ISO 8601, a date alone, a time without its offset: each unreadable as a stored time.
SPOILED_VALUES = ("yesterday", "2026-11-20", "2026-11-20T10:00:00")


def spoil(ledger: Ledger, column: str, value: str = "yesterday") -> None:
    """Give ``ledger`` a row in each table the health figures read (a delivery whose signals
    are owed, a complete sync, a refused request), then set ``column`` to ``value`` in all of
    that table's rows."""
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, make_outcome())
    run = ledger.service.begin_sync(max_age=timedelta(days=30))
    ledger.service.end_sync(run.id)
    ledger.receiver.record_rejected(reason="invalid_signature", body=b"{}", remote_addr="::1")
    table, name = column.split(".")
    tables(ledger).execute(f"UPDATE {table} SET {name} = ?", (value,))  # noqa: S608
