"""Asking the sandbox to send a missed notification again, through its control API.

The interface shows no resend endpoint, so there is none for the real service; the sandbox
has ``POST /sandbox/notifications/<n>/resend`` (docs/service.md). :class:`SandboxResender` is
a ``resend`` hook for :func:`~payhooks.service.sync.sync_transactions`: for a missed
notification it resends the newest notification the sandbox logged for that transaction.
Sync still settles nothing: the receiver verifies what arrives, as for any notification.
"""

from __future__ import annotations

from typing import Any

import httpx

from payhooks.service.errors import TransportError
from payhooks.storage import DriftRow

__all__ = ["SandboxResender"]


class SandboxResender:
    """A ``resend`` hook over the sandbox's control API at ``base_url``.

    The sandbox's log is read once, on the first call (a sync resends after reading the whole
    list, so the log then holds every notification it will ask about).
    """

    def __init__(
        self,
        base_url: str,
        *,
        access_token: str,
        control_token: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        """:param control_token: the sandbox's control token, sent instead of
        ``access_token`` when the sandbox was started with one."""
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {control_token or access_token}"},
            timeout=timeout,
        )
        self._latest: dict[str, int] | None = None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SandboxResender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str) -> Any:
        try:
            answer = self._http.request(method, path)
            answer.raise_for_status()
            return answer.json()
        except (httpx.HTTPError, ValueError) as err:
            raise TransportError(f"The sandbox's control API failed on {path}: {err}.") from err

    def __call__(self, row: DriftRow) -> bool:
        """Resend the newest notification of ``row.transaction_id``; False when it has none."""
        if self._latest is None:
            self._latest = {}
            for notification in self._call("GET", "/sandbox/notifications"):
                self._latest[notification["transaction_id"]] = notification["id"]
        found = self._latest.get(row.transaction_id or "")
        if found is None:
            return False
        self._call("POST", f"/sandbox/notifications/{found}/resend")
        return True
