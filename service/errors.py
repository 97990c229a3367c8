"""The service side's errors: one base with a stable ``code`` and a one-sentence ``message``.

The tree is shallow, like itsdangerous': a request the client refuses before sending it
(:class:`RequestValidationError`, naming the field), a call that got no usable answer
(:class:`TransportError`), and an answer the service gave (:class:`ServiceResponseError`,
carrying the HTTP status and the body, with one subclass per kind of refusal so a caller can
catch what it can act on). :class:`CreationRecordError` is the client's own bookkeeping failing.
Nothing here holds a token or a card number.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

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
    "ServiceError",
    "ServiceResponseError",
    "ServiceUnavailableError",
    "TransportError",
    "error_for_status",
]


class ServiceError(Exception):
    """Base of every error of :mod:`payhooks.service`."""

    #: Stable, machine-readable; documented in ``docs/service.md``.
    code: str = "service_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        #: One sentence for a person.
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class RequestValidationError(ServiceError, ValueError):
    """A request breaks the interface's rules; it was not sent and nothing was registered.

    Also a :class:`ValueError`, as bad input to a Python call usually is.
    """

    code = "invalid_request"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        #: The member at fault as the wire names it, dotted (``payment_method.card.exp_year``,
        #: ``cart_items[2].quantity``).
        self.field = field
        #: What is wrong with it, without the field's name.
        self.reason = message


class ExpectationConflictError(ServiceError):
    """The ledger already expects this ``external_identifier`` with other data; not sent."""

    code = "expectation_conflict"

    def __init__(self, external_identifier: str, fields: tuple[str, ...]) -> None:
        super().__init__(
            f"The ledger already expects {external_identifier!r} with another "
            f"{', '.join(fields)}; nothing was sent to the service."
        )
        self.external_identifier = external_identifier
        self.fields = fields


class AlreadyCreatedError(ServiceError):
    """This client already created a payment with this ``external_identifier``; not sent again,
    since a second transaction would charge the customer twice."""

    code = "already_created"

    def __init__(self, external_identifier: str, service_id: str | None) -> None:
        super().__init__(
            f"{external_identifier!r} was already created at the service (id {service_id}); "
            "it was not sent again."
        )
        self.external_identifier = external_identifier
        #: The service's id of the payment already made.
        self.service_id = service_id


class CreationInProgressError(ServiceError):
    """Another attempt to create this ``external_identifier`` is still on its way: it began
    within the client's timeout and the service's list does not show it yet. Not sent, since
    both could be made; try again once that attempt has ended."""

    code = "creation_in_progress"

    def __init__(self, external_identifier: str, started_at: datetime) -> None:
        super().__init__(
            f"{external_identifier!r} is being created by an attempt begun at "
            f"{started_at.isoformat()}; it was not sent again."
        )
        self.external_identifier = external_identifier
        #: When the attempt on its way began.
        self.started_at = started_at


class CreationRecordError(ServiceError):
    """The ledger could not record a creation attempt (the cause is chained)."""

    code = "creation_record_failed"


class MalformedResponseError(ServiceError):
    """An answer that is not the object the interface describes; ``code`` names the checks of
    size (``response_too_large``), depth (``response_too_deep``) and cursor (``bad_cursor``)."""

    code = "malformed_response"

    def __init__(self, field: str, message: str, *, code: str | None = None) -> None:
        super().__init__(f"The service's answer is malformed: {field} {message}.", code=code)
        #: The member at fault, dotted (``subscription.created``).
        self.field = field


class TransportError(ServiceError):
    """No usable answer: the connection failed or the call timed out (after any retries).

    For a creation this means the service may or may not have created the payment.
    """

    code = "transport_error"


class ServiceResponseError(ServiceError):
    """The service answered with an error status.

    The interface does not show its error body (section 7); the client reads ``code``,
    ``message`` and ``field`` from a JSON object when they are there and keeps the body as is.
    """

    code = "service_error_response"

    def __init__(self, status: int, body: bytes, *, method: str, path: str) -> None:
        self.status = status
        self.body = body
        self.method = method
        self.path = path
        parsed = _json_object(body)
        #: The service's own error code, when its body names one.
        self.service_code: str | None = _text(parsed.get("code"))
        #: The field the service blamed, when its body names one.
        self.field: str | None = _text(parsed.get("field"))
        detail = _text(parsed.get("message"))
        super().__init__(
            f"{method} {path} answered {status}"
            + (f" ({self.service_code})" if self.service_code else "")
            + (f": {detail}" if detail else ".")
        )

    def json(self) -> dict[str, Any]:
        """The body as a JSON object ({} when it is not one)."""
        return _json_object(self.body)


class AuthenticationError(ServiceResponseError):
    """401: the access token is missing, malformed, expired or not the service's."""

    code = "authentication_failed"


class PermissionDeniedError(ServiceResponseError):
    """403: the token lacks the scope, or the merchant account is not the token's."""

    code = "permission_denied"


class NotFoundError(ServiceResponseError):
    """404."""

    code = "not_found"


class ConflictError(ServiceResponseError):
    """409: for example an idempotency key reused with another body."""

    code = "conflict"


class RateLimitedError(ServiceResponseError):
    """429."""

    code = "rate_limited"


class ServiceUnavailableError(ServiceResponseError):
    """5xx: the service failed; a creation may or may not have happened."""

    code = "service_unavailable"


_BY_STATUS: dict[int, type[ServiceResponseError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    429: RateLimitedError,
}


def error_for_status(status: int, body: bytes, *, method: str, path: str) -> ServiceResponseError:
    """The typed error for an error answer."""
    kind = _BY_STATUS.get(status)
    if kind is None:
        kind = ServiceUnavailableError if status >= 500 else ServiceResponseError
    return kind(status, body, method=method, path=path)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        parsed = parsed["error"]
    return parsed if isinstance(parsed, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
