"""A real HTTP client for an app served on loopback: one fresh connection per request."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from werkzeug.serving import BaseWSGIServer

__all__ = ["LiveServer", "Reply"]


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class LiveServer:
    """The app served on 127.0.0.1 by werkzeug in a background thread."""

    server: BaseWSGIServer
    url: str

    def request(
        self,
        method: str,
        path: str,
        body: bytes | Iterator[bytes] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """Send one request over a fresh connection and read the whole answer."""
        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
        try:
            chunked = body is not None and not isinstance(body, bytes)
            conn.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
            response = conn.getresponse()
            return Reply(
                response.status,
                {name.lower(): value for name, value in response.getheaders()},
                response.read(),
            )
        finally:
            conn.close()

    def post(self, path: str, body: bytes, headers: dict[str, str] | None = None) -> Reply:
        return self.request("POST", path, body, headers)

    def get(self, path: str, headers: dict[str, str] | None = None) -> Reply:
        return self.request("GET", path, None, headers)


def eventually(check: Callable[[], object], timeout: float = 30) -> bool:
    """Whether ``check()`` becomes true within ``timeout`` seconds, polled: for what a server
    does after its answer (the signals' receivers run once the response is closed)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
