"""What happens to a delivery once its signature is checked: store it, parse it, record and
reconcile its outcome, and say which signals it owes; and running stored deliveries again.

Rule: no Flask and no request here (``tests/test_layers.py`` imports this package in a
fresh interpreter and checks that Flask is not loaded). The web layer hands in bytes, headers
and settings; the CLI's ``reprocess`` calls the same functions.
"""

from __future__ import annotations

from payhooks.receiver.pipeline.processing import (
    OnRecorded,
    ProcessedDelivery,
    payload_error_text,
    process_stored_delivery,
    receive_delivery,
)
from payhooks.receiver.pipeline.reprocess import (
    UNFINISHED_STATUSES,
    ReprocessReport,
    delivery_ids,
    reprocess_deliveries,
)
from payhooks.receiver.pipeline.signal_dispatch import send_outcome_signals, signals_for

__all__ = [
    "UNFINISHED_STATUSES",
    "OnRecorded",
    "ProcessedDelivery",
    "ReprocessReport",
    "delivery_ids",
    "payload_error_text",
    "process_stored_delivery",
    "receive_delivery",
    "reprocess_deliveries",
    "send_outcome_signals",
    "signals_for",
]
