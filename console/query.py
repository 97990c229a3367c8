"""The delivery log's filters as the URL carries them, so that a view can be shared.

``status`` (repeated), ``identifier``, ``code`` (the outcome's status code), ``error`` (a
:class:`~payhooks.storage.reads.DeliveryErrorCode`), ``q`` (the free-text search: an identifier
prefix, a delivery key or the service's transaction id), ``window`` (``1h``, ``24h``, ``7d``,
``all``), ``before`` (the cursor: rows with a smaller id) and ``limit``. Every value is checked
here; a bad one is a :class:`BadQuery` (a 400 page), never a value handed on to the database to
fail there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final

from werkzeug.datastructures import MultiDict

from payhooks.storage import DeliveryStatus
from payhooks.storage.reads import DeliveryErrorCode, DeliveryFilter

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_WINDOW",
    "MAX_CODE_LENGTH",
    "MAX_ID",
    "MAX_IDENTIFIER_LENGTH",
    "MAX_LIMIT",
    "MAX_SEARCH_LENGTH",
    "WINDOWS",
    "BadQuery",
    "LogQuery",
    "parse_log_query",
]

#: The time presets: the URL's value, its label, how far back it reaches (None: no limit).
WINDOWS: Final[Mapping[str, tuple[str, timedelta | None]]] = {
    "1h": ("Last hour", timedelta(hours=1)),
    "24h": ("Last 24 hours", timedelta(hours=24)),
    "7d": ("Last 7 days", timedelta(days=7)),
    "all": ("All", None),
}
DEFAULT_WINDOW: Final = "24h"
DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 200
#: The service's longest ``external_identifier``.
MAX_IDENTIFIER_LENGTH: Final = 64
#: The longest status code a notification carries.
MAX_CODE_LENGTH: Final = 64
#: The longest search text: a delivery key (the service's ``webhook-id``) is at most this.
MAX_SEARCH_LENGTH: Final = 255
#: The largest id either engine stores (PostgreSQL's ``bigint``).
MAX_ID: Final = 2**63 - 1

_DIGITS = re.compile(r"[0-9]{1,19}")


class BadQuery(Exception):
    """A query value the log cannot use; ``message`` is one sentence for the 400 page."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class LogQuery:
    """One log view: its filters and its page."""

    statuses: tuple[DeliveryStatus, ...] = ()
    identifier: str | None = None
    code: str | None = None
    error: DeliveryErrorCode | None = None
    q: str | None = None
    window: str = DEFAULT_WINDOW
    before: int | None = None
    limit: int = DEFAULT_LIMIT

    def since(self, now: datetime) -> datetime | None:
        """The oldest moment the window shows, counted back from ``now``."""
        reach = WINDOWS[self.window][1]
        return None if reach is None else now - reach

    def delivery_filter(self, now: datetime) -> DeliveryFilter:
        return DeliveryFilter(
            statuses=self.statuses,
            since=self.since(now),
            external_identifier=self.identifier,
            payment_status=self.code,
            error=self.error,
            text=self.q,
        )

    def args(self, **changes: Any) -> dict[str, Any]:
        """The URL arguments of this view with ``changes``; defaults are left out."""
        query = replace(self, **changes)
        found: dict[str, Any] = {}
        if query.statuses:
            found["status"] = [status.value for status in query.statuses]
        if query.identifier is not None:
            found["identifier"] = query.identifier
        for name in ("code", "error", "q"):
            if getattr(query, name) is not None:
                found[name] = str(getattr(query, name))
        if query.window != DEFAULT_WINDOW:
            found["window"] = query.window
        if query.before is not None:
            found["before"] = query.before
        if query.limit != DEFAULT_LIMIT:
            found["limit"] = query.limit
        return found


def _number(args: MultiDict[str, str], name: str, lowest: int, highest: int) -> int | None:
    text = args.get(name)
    if text is None or text == "":
        return None
    if _DIGITS.fullmatch(text) is None or not lowest <= int(text) <= highest:
        raise BadQuery(f"{name} must be a whole number from {lowest} to {highest}.")
    return int(text)


def _statuses(args: MultiDict[str, str]) -> tuple[DeliveryStatus, ...]:
    known = {status.value: status for status in DeliveryStatus}
    chosen: list[DeliveryStatus] = []
    for text in args.getlist("status"):
        if text not in known:
            raise BadQuery(f"status must be one of: {', '.join(known)}.")
        if known[text] not in chosen:
            chosen.append(known[text])
    return tuple(sorted(chosen, key=list(DeliveryStatus).index))


def _text(args: MultiDict[str, str], name: str, longest: int) -> str | None:
    text = args.get(name)
    if text is None or text == "":
        return None
    if len(text) > longest or "\x00" in text:
        raise BadQuery(f"{name} must be at most {longest} characters, without NUL.")
    return text


def _error(args: MultiDict[str, str]) -> DeliveryErrorCode | None:
    text = args.get("error")
    if text is None or text == "":
        return None
    known = {code.value: code for code in DeliveryErrorCode}
    if text not in known:
        raise BadQuery(f"error must be one of: {', '.join(known)}.")
    return known[text]


def parse_log_query(args: MultiDict[str, str], *, deliveries: bool = True) -> LogQuery:
    """The view ``args`` asks for; for the refused requests (``deliveries=False``) only the
    window and the page apply.

    :raises BadQuery: a value out of range or unknown.
    """
    window = args.get("window") or DEFAULT_WINDOW
    if window not in WINDOWS:
        raise BadQuery(f"window must be one of: {', '.join(WINDOWS)}.")
    limit = _number(args, "limit", 1, MAX_LIMIT)
    return LogQuery(
        statuses=_statuses(args) if deliveries else (),
        identifier=_text(args, "identifier", MAX_IDENTIFIER_LENGTH) if deliveries else None,
        code=_text(args, "code", MAX_CODE_LENGTH) if deliveries else None,
        error=_error(args) if deliveries else None,
        q=_text(args, "q", MAX_SEARCH_LENGTH) if deliveries else None,
        window=window,
        before=_number(args, "before", 1, MAX_ID),
        limit=DEFAULT_LIMIT if limit is None else limit,
    )
