"""One call to the service over httpx: headers, timeouts, retries with backoff, typed errors.

Which calls are retried is the caller's word (``idempotent``): a list, or a creation that
carries an idempotency key, may be sent again after a timeout or a 5xx, because the service
does it at most once; a transaction creation (the interface gives it no idempotency key) is
sent again only when the connection was never made, so the request cannot have arrived.
"""

from __future__ import annotations

import ipaddress
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from payhooks.service.errors import (
    MalformedResponseError,
    RequestValidationError,
    ServiceResponseError,
    TransportError,
    error_for_status,
)

__all__ = ["RetryPolicy", "Transport"]

#: Answers worth another try of an idempotent call.
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many times to try an idempotent call, and how long to wait between tries.

    The wait before try ``n`` (from 1) is ``backoff * 2 ** (n - 1)``, at most ``max_backoff``,
    with up to a quarter added at random so that many clients do not retry in step; a
    ``Retry-After`` of seconds from the service replaces it (within ``max_backoff``).
    """

    #: Tries in all, the first included (1: no retry).
    attempts: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, not {self.attempts!r}")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff and max_backoff must not be negative")

    def delay(self, retry: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        if retry_after is not None and retry_after.strip().isdigit():
            return min(float(retry_after), self.max_backoff)
        base = min(self.backoff * 2 ** (retry - 1), self.max_backoff)
        return float(base + random.uniform(0, base / 4))


class Transport:
    """The HTTP side of :class:`~payhooks.service.client.ServiceClient`."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str],
        timeout: float,
        retry: RetryPolicy,
        sleep: Callable[[float], None] = time.sleep,
        http: httpx.Client | None = None,
    ) -> None:
        _check_base_url(base_url)
        self._owns_http = http is None
        self._http = http or httpx.Client(timeout=timeout)
        self._base_url = base_url.rstrip("/")
        self._headers = dict(headers)
        self._timeout = timeout
        self._retry = retry
        self._sleep = sleep

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool,
    ) -> Any:
        """Send one call (retrying as the policy allows) and return the decoded JSON answer.

        :raises TransportError: no usable answer after the tries allowed.
        :raises ServiceResponseError: (a subclass by status) the service answered an error.
        :raises MalformedResponseError: a success answer that is not JSON.
        """
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        sent_headers = {**self._headers, **(headers or {})}
        if content is not None:
            sent_headers["Content-Type"] = "application/json"
        url = self._base_url + path
        tries = self._retry.attempts
        for attempt in range(1, tries + 1):
            last = attempt == tries
            try:
                response = self._http.request(
                    method,
                    url,
                    content=content,
                    params=params,
                    headers=sent_headers,
                    timeout=self._timeout,
                )
            except httpx.ConnectError as err:  # never reached the service: always safe again
                if last:
                    raise TransportError(
                        f"{method} {path}: cannot connect to the service ({err})."
                    ) from err
                self._sleep(self._retry.delay(attempt))
                continue
            except httpx.HTTPError as err:
                if last or not idempotent:
                    raise TransportError(
                        f"{method} {path}: no answer from the service ({type(err).__name__})."
                    ) from err
                self._sleep(self._retry.delay(attempt))
                continue
            if response.is_success:
                return _decode(response, method, path)
            if idempotent and not last and response.status_code in _RETRY_STATUSES:
                self._sleep(self._retry.delay(attempt, response.headers.get("Retry-After")))
                continue
            raise _error(response, method, path)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _check_base_url(base_url: str) -> None:
    """Refuse a URL that would send the bearer token in clear: ``https://``, or ``http://`` to
    a loopback host only (127.0.0.0/8, ``::1``, ``localhost``: a sandbox, a local proxy).

    :raises RequestValidationError: for field ``base_url``.
    """
    try:
        parts = urlsplit(base_url)
        host = parts.hostname or ""
        safe = (parts.scheme == "https" and bool(host)) or (
            parts.scheme == "http"
            and (host == "localhost" or ipaddress.ip_address(host).is_loopback)
        )
    except ValueError:  # not a URL, or an http:// host that is not an address
        safe = False
    if not safe:
        raise RequestValidationError(
            "base_url",
            "use an https:// URL (http:// would send the access token in clear, so it is "
            "accepted only for a service on loopback)",
        )


def _decode(response: httpx.Response, method: str, path: str) -> Any:
    try:
        return json.loads(response.content)
    except (ValueError, UnicodeDecodeError) as err:
        raise MalformedResponseError(f"{method} {path}", "is not JSON") from err


def _error(response: httpx.Response, method: str, path: str) -> ServiceResponseError:
    return error_for_status(response.status_code, response.content, method=method, path=path)
