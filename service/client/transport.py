"""One call to the service over httpx: headers, timeouts, retries with backoff, typed errors.

Which calls are retried is the caller's word (``idempotent``): a list, or a creation that
carries an idempotency key, may be sent again after a timeout or a 5xx, because the service
does it at most once; a transaction creation (the interface gives it no idempotency key) is
sent again only when the connection was never made, so the request cannot have arrived.

The service's size and pace are not trusted: an answer is read as a stream, gzip decoded here
a bounded piece at a time, and refused past :data:`MAX_RESPONSE_BYTES` decoded or past the
try's ``timeout`` in all (httpx's timeouts are per read, which a trickled body never trips).
"""

from __future__ import annotations

import ipaddress
import json
import random
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from payhooks.service.errors import (
    MalformedResponseError,
    RequestValidationError,
    TransportError,
    error_for_status,
)

__all__ = ["MAX_RESPONSE_BYTES", "RetryPolicy", "Transport"]

#: The most an answer may hold once decoded: a page of the largest list is a few dozen KiB.
MAX_RESPONSE_BYTES = 1024 * 1024

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
        sent_headers = {**self._headers, "Accept-Encoding": "gzip", **(headers or {})}
        if content is not None:
            sent_headers["Content-Type"] = "application/json"
        url = self._base_url + path
        tries = self._retry.attempts
        for attempt in range(1, tries + 1):
            last = attempt == tries
            try:
                status, retry_after, answer = self._send(
                    f"{method} {path}",
                    method,
                    url,
                    content=content,
                    params=params,
                    headers=sent_headers,
                )
            except httpx.ConnectError as err:  # never reached the service: always safe again
                if last:
                    raise TransportError(
                        f"{method} {path}: cannot connect to the service ({err})."
                    ) from err
                self._sleep(self._retry.delay(attempt))
                continue
            except (httpx.HTTPError, _TooSlowError) as err:
                if last or not idempotent:
                    why = "in time" if isinstance(err, _TooSlowError) else type(err).__name__
                    raise TransportError(
                        f"{method} {path}: no answer from the service ({why}).",
                        code="deadline_exceeded" if isinstance(err, _TooSlowError) else None,
                    ) from err
                self._sleep(self._retry.delay(attempt))
                continue
            if 200 <= status < 300:
                return _decode(answer, method, path)
            if idempotent and not last and status in _RETRY_STATUSES:
                self._sleep(self._retry.delay(attempt, retry_after))
                continue
            raise error_for_status(status, answer, method=method, path=path)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _send(
        self, where: str, method: str, url: str, **request: Any
    ) -> tuple[int, str | None, bytes]:
        """One try: the status, ``Retry-After`` and the decoded body, read within the try's
        ``timeout`` in all and :data:`MAX_RESPONSE_BYTES` decoded."""
        deadline = time.monotonic() + self._timeout
        with self._http.stream(method, url, timeout=self._timeout, **request) as response:
            encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
            # wbits 47: a gzip or zlib header; max_length keeps each piece within the cap.
            gunzip = zlib.decompressobj(47) if encoding == "gzip" else None
            if gunzip is None and encoding != "identity":
                raise MalformedResponseError(where, f"is in {encoding[:20]!r}")
            body = bytearray()
            for raw in response.iter_raw():
                while raw:
                    if gunzip is None:
                        body += raw
                        raw = b""
                    else:
                        try:
                            body += gunzip.decompress(raw, MAX_RESPONSE_BYTES + 1 - len(body))
                        except zlib.error as err:
                            raise MalformedResponseError(where, "is not valid gzip") from err
                        raw = gunzip.unconsumed_tail
                    if len(body) > MAX_RESPONSE_BYTES:
                        raise MalformedResponseError(
                            where, f"is over {MAX_RESPONSE_BYTES} bytes", code="response_too_large"
                        )
                if time.monotonic() > deadline:
                    raise _TooSlowError
            return response.status_code, response.headers.get("Retry-After"), bytes(body)


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


class _TooSlowError(Exception):
    """An answer still arriving when its try's time was up."""


def _decode(answer: bytes, method: str, path: str) -> Any:
    try:
        return json.loads(answer)
    except (ValueError, UnicodeDecodeError) as err:
        raise MalformedResponseError(f"{method} {path}", "is not JSON") from err
    except RecursionError as err:  # the parser's own depth guard
        raise MalformedResponseError(
            f"{method} {path}", "nests too deeply to read", code="response_too_deep"
        ) from err
