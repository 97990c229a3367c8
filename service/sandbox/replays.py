"""Idempotency keys: a creation made once per ``(merchant account, key)``, its answer replayed.

The interface says identical requests with one ``idempotency-key`` are not processed more than
once; what a key reused with another body gets is not shown. The sandbox refuses it with 409
``idempotency_key_reused`` (payhooks' assumption). "Identical" is the same endpoint and the
same JSON body, compared canonically (member order and spacing do not count).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from payhooks.service.sandbox.records import SandboxError

__all__ = ["Replays"]


class Replays:
    """The answers made under each key. Not locked itself: the sandbox calls it under its
    own lock, so two requests with one key cannot both create."""

    def __init__(self) -> None:
        self._answers: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}

    def run(
        self,
        merchant: str,
        key: str | None,
        endpoint: str,
        body: Any,
        make: Callable[[], dict[str, Any]],
    ) -> tuple[dict[str, Any], bool]:
        """``make()``'s answer, or the one first made under ``key``: ``(answer, replayed)``.

        :raises SandboxError: 409 ``idempotency_key_reused``.
        """
        if key is None:
            return make(), False
        fingerprint = hashlib.sha256(
            json.dumps([endpoint, body], sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
        stored = self._answers.get((merchant, key))
        if stored is not None:
            if stored[0] != fingerprint:
                raise SandboxError(
                    409,
                    "idempotency_key_reused",
                    "This idempotency key was used with another request body.",
                    field="idempotency-key",
                )
            return stored[1], True
        answer = make()
        self._answers[(merchant, key)] = (fingerprint, answer)
        return answer, False
