"""Pages of a list behind opaque cursors (interface 2.1 and 4.5).

A cursor is signed (itsdangerous) with a secret made per sandbox, so a client must pass it
back unchanged: an edited cursor, one from another list or merchant account, or one from an
earlier run of the sandbox is refused with ``invalid_cursor``.
"""

from __future__ import annotations

import secrets
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer

from payhooks.service.sandbox.records import SandboxError
from payhooks.service.sandbox.settings import SandboxSettings

__all__ = ["Pager"]


class Pager:
    """Cuts lists into pages for one sandbox."""

    def __init__(self, settings: SandboxSettings) -> None:
        self._settings = settings
        self._cursors = URLSafeSerializer(secrets.token_urlsafe(16), salt="sandbox-cursor")
        # (resource, merchant) -> its rows, oldest first: a page slices one list and turns
        # only its own rows into JSON, so a page costs the same at 10**6 rows as at 10.
        self._lists: dict[tuple[str, str], list[Any]] = {}

    def add(self, resource: str, row: Any) -> None:
        """Append ``row`` (with ``merchant`` and ``to_wire()``) to its merchant's list."""
        self._lists.setdefault((resource, row.merchant), []).append(row)

    def page(
        self, resource: str, merchant: str, *, limit: str | None, cursor: str | None
    ) -> dict[str, Any]:
        """The page envelope of ``merchant``'s ``resource`` list that ``cursor`` designates."""
        size = self._limit(limit)
        offset = 0 if cursor is None else self._offset(cursor, resource, merchant)
        after = offset + size
        rows = self._lists.get((resource, merchant), [])
        return {
            "items": [row.to_wire() for row in rows[offset:after]],
            "limit": size,
            "next_cursor": self._cursor(resource, merchant, after) if after < len(rows) else None,
            "previous_cursor": self._cursor(resource, merchant, max(0, offset - size))
            if offset > 0
            else None,
        }

    def _offset(self, cursor: str, resource: str, merchant: str) -> int:
        try:
            claims = self._cursors.loads(cursor)
        except BadSignature:
            raise SandboxError(
                400, "invalid_cursor", "The cursor is not one this sandbox gave.", field="cursor"
            ) from None
        if claims.get("r") != resource or claims.get("m") != merchant:
            raise SandboxError(
                400, "invalid_cursor", "The cursor belongs to another list.", field="cursor"
            )
        return int(claims["o"])

    def _cursor(self, resource: str, merchant: str, offset: int) -> str:
        return str(self._cursors.dumps({"r": resource, "m": merchant, "o": offset}))

    def _limit(self, limit: str | None) -> int:
        settings = self._settings
        if limit is None:
            return settings.page_default_limit
        if not limit.isdigit() or not 1 <= int(limit) <= settings.page_max_limit:
            raise SandboxError(
                400,
                "invalid_request",
                f"limit: must be an integer from 1 to {settings.page_max_limit}.",
                field="limit",
            )
        return int(limit)
