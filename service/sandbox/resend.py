"""Asking the sandbox to send a missed notification again, through its control API:
``payhooks sandbox resend``.

The interface shows no resend endpoint, so there is none for the real service, and the
production ``payhooks sync`` never talks to a sandbox; the sandbox has
``POST /sandbox/notifications/<n>/resend`` (docs/service.md). :func:`resend_missed` reads the
missed notifications the ledger's sync found (``missed_notification`` rows of the
``sync_drift`` view) and, for each, :class:`SandboxResender` resends the newest notification the
sandbox logged for that transaction. Nothing here settles: the receiver verifies what arrives,
as for any notification.
"""

from __future__ import annotations

from typing import Any

import httpx

from payhooks.service.errors import TransportError
from payhooks.storage import DriftKind, DriftRow, Ledger

__all__ = ["SandboxResender", "resend_missed"]


class SandboxResender:
    """A ``resend`` hook over the sandbox's control API at ``base_url``.

    The sandbox's log is read once, on the first call (a sync resends after reading the whole
    list, so the log then holds every notification it will ask about).
    """

    def __init__(
        self,
        base_url: str,
        *,
        access_token: str | None = None,
        control_token: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        """:param control_token: the sandbox's control token, sent instead of
        ``access_token`` when the sandbox was started with one (without one, its control API
        is open, on loopback only, and neither is needed)."""
        token = control_token or access_token
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"} if token else {},
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


def resend_missed(ledger: Ledger, resender: SandboxResender) -> tuple[str, ...]:
    """Ask the sandbox to resend each notification the ledger's sync found missed.

    :returns: the transactions whose notification the sandbox was asked to send again (one
        the sandbox never logged is skipped).
    :raises TransportError: the sandbox's control API failed or refused.
    """
    resent: list[str] = []
    for row in ledger.service.sync_drift():
        if (
            row.kind is DriftKind.MISSED_NOTIFICATION
            and row.transaction_id is not None
            and resender(row)
        ):
            resent.append(row.transaction_id)
    return tuple(resent)
