"""What happens to a delivery once its signature is checked: parse it, store it with its
outcome and claim the signals it owes; send what was claimed; run stored deliveries again.

Rule: no Flask and no request here (``tests/test_layers.py`` imports this package in a
fresh interpreter and checks that Flask is not loaded). The web layer hands in bytes, headers
and settings; the CLI's ``reprocess`` calls the same functions.
"""

from __future__ import annotations

from payhooks.receiver.pipeline.processing import (
    DEFAULT_SIGNAL_LEASE,
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
from payhooks.receiver.pipeline.retry_timer import RetryTimer
from payhooks.receiver.pipeline.signal_dispatch import (
    SendReport,
    Sweeper,
    error_text,
    has_receivers,
    receiver_name,
    send_claimed,
    send_owed,
    sweep_unclaimed,
)

__all__ = [
    "DEFAULT_SIGNAL_LEASE",
    "UNFINISHED_STATUSES",
    "ProcessedDelivery",
    "ReprocessReport",
    "RetryTimer",
    "SendReport",
    "Sweeper",
    "delivery_ids",
    "error_text",
    "has_receivers",
    "payload_error_text",
    "process_stored_delivery",
    "receive_delivery",
    "receiver_name",
    "reprocess_deliveries",
    "send_claimed",
    "send_owed",
    "sweep_unclaimed",
]
