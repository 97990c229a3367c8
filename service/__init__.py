"""The service's side of the interface: a merchant client and a local sandbox of the service.

``payhooks.service.client`` (no Flask) creates payments and lists buyers and transactions;
``payhooks.service.sandbox`` (a Flask app) stands in for the service in tests and CI. Both
check requests with ``payhooks.service.interface``. Imports point down: this package may
import ``payhooks.storage`` and ``payhooks.verify``, never ``payhooks.receiver``. The errors
every part raises are here, and the ``payhooks sandbox`` command (importable without the
``service`` extra: it loads the sandbox when it runs).
"""

from __future__ import annotations

from payhooks.service.command import sandbox_command
from payhooks.service.errors import (
    AlreadyCreatedError,
    AuthenticationError,
    ConflictError,
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

__all__ = [
    "AlreadyCreatedError",
    "AuthenticationError",
    "ConflictError",
    "CreationRecordError",
    "ExpectationConflictError",
    "MalformedResponseError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RequestValidationError",
    "ServiceError",
    "ServiceResponseError",
    "ServiceUnavailableError",
    "TransportError",
    "sandbox_command",
]
