"""``payhooks sync``'s engine: the service's transaction list against the ledger.

Rule of this folder: no Flask, nothing of the receiver; the list through the client
(``tests/service/test_layers.py`` enforces it). Sync records and compares; it never settles a
payment (docs/sync.md).
"""

from __future__ import annotations

from payhooks.service.sync.run import (
    DEFAULT_MAX_AGE,
    DEFAULT_MAX_DURATION,
    DEFAULT_MAX_PAGES,
    DEFAULT_MAX_UNKNOWN_STATUSES,
    SyncInterruptedError,
    SyncProgress,
    SyncReport,
    sync_transactions,
)
from payhooks.service.sync.status_map import DEFAULT_SYNC_STATUS_MAP, check_status_map

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_DURATION",
    "DEFAULT_MAX_PAGES",
    "DEFAULT_MAX_UNKNOWN_STATUSES",
    "DEFAULT_SYNC_STATUS_MAP",
    "SyncInterruptedError",
    "SyncProgress",
    "SyncReport",
    "check_status_map",
    "sync_transactions",
]
