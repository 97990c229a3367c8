"""The service's side of the interface: a merchant client and a local sandbox of the service.

``payhooks.service.client`` (no Flask) creates payments and lists buyers and transactions;
``payhooks.service.sandbox`` (a Flask app) stands in for the service in tests and CI. Both
check requests with ``payhooks.service.interface``. Imports point down: this package may
import ``payhooks.storage`` and ``payhooks.verify``, never ``payhooks.receiver``. The errors
every part raises are here, and the ``payhooks sandbox`` command (importable without the
``service`` extra: it loads the sandbox when it runs).

The client and the sync need httpx (the ``service`` extra), so the names this package shares
from them (what the receiver's ``payhooks sync`` uses) are loaded on first use: importing
``payhooks.service`` never needs the extra, and using them without it raises ``ImportError``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from payhooks.service.command import sandbox_command
from payhooks.service.errors import (
    AlreadyCreatedError,
    AuthenticationError,
    ConflictError,
    CreationInProgressError,
    CreationRecordError,
    ExpectationConflictError,
    MalformedResponseError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    RequestValidationError,
    ServiceError,
    ServiceResponseError,
    ServiceUnavailableError,
    TransportError,
)

if TYPE_CHECKING:
    from payhooks.service.client import ServiceClient
    from payhooks.service.sandbox import SandboxResender
    from payhooks.service.sync import (
        SyncInterruptedError,
        SyncProgress,
        SyncReport,
        sync_transactions,
    )

_LOADED_ON_USE = {
    "ServiceClient": "payhooks.service.client",
    "SandboxResender": "payhooks.service.sandbox",
    "SyncInterruptedError": "payhooks.service.sync",
    "SyncProgress": "payhooks.service.sync",
    "SyncReport": "payhooks.service.sync",
    "sync_transactions": "payhooks.service.sync",
}


def __getattr__(name: str) -> Any:
    module = _LOADED_ON_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'payhooks.service' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AlreadyCreatedError",
    "AuthenticationError",
    "ConflictError",
    "CreationInProgressError",
    "CreationRecordError",
    "ExpectationConflictError",
    "MalformedResponseError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RequestValidationError",
    "SandboxResender",
    "ServiceClient",
    "ServiceError",
    "ServiceResponseError",
    "ServiceUnavailableError",
    "SyncInterruptedError",
    "SyncProgress",
    "SyncReport",
    "TransportError",
    "sandbox_command",
    "sync_transactions",
]
