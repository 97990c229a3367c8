"""How the ledger writes and reads times: UTC ISO 8601 text, compared as text in SQL.

Every stored time goes through :func:`to_text`, so all of them share one offset (``+00:00``)
and one shape, and SQL can order and filter them as plain strings: a time without fractional
seconds (``...12:00:00+00:00``) sorts before the same second with a fraction
(``...12:00:00.5+00:00``) because ``+`` sorts before ``.``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from payhooks.storage.errors import UnreadableRowError

__all__ = ["Clock", "from_text", "system_clock", "to_text"]

#: Returns the current time, timezone-aware. Tests inject a fixed one.
Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)


def to_text(moment: datetime, *, argument: str = "time") -> str:
    """``moment`` as stored: UTC ISO 8601. A naive datetime is refused: its zone is a guess."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{argument} must be timezone-aware")
    return moment.astimezone(UTC).isoformat()


def from_text(text: str, *, column: str | None = None) -> datetime:
    """A stored time back as an aware datetime in UTC.

    :param column: where ``text`` was read (``deliveries.received_at``), for the error.
    :raises UnreadableRowError: for text :func:`to_text` never writes (``yesterday``, a date
        alone, a time without an offset): a naive time would fail later, in a comparison
        with an aware one, far from the row that caused it.
    """
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise UnreadableRowError(column) from None
    if moment.utcoffset() is None:
        raise UnreadableRowError(column)
    return moment
