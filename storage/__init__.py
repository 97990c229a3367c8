"""The SQLite ledger: expected payments, deliveries, outcomes, returns and reconciliation."""

from __future__ import annotations

from storage.records import (
    DEFAULT_STATUS_MAP,
    STATE_RANK,
    Flow,
    Outcome,
    PaymentState,
    ReconciliationState,
)

__all__ = [
    "DEFAULT_STATUS_MAP",
    "STATE_RANK",
    "Flow",
    "Outcome",
    "PaymentState",
    "ReconciliationState",
]
