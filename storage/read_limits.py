"""A read's time limit: when it started, how long it may take, how much of that is left.

:meth:`payhooks.storage.Ledger.read_time_limit` gives one to its engine, which enforces it in
its own way (SQLite: a progress handler that interrupts the statement; PostgreSQL: the
transaction's ``statement_timeout``, set to what is left before each statement). Writes are
never interrupted: a limit is for people's questions, not for the ledger's records.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["MAX_READ_TIME_LIMIT_MS", "ReadDeadline", "check_limit_ms"]

#: The longest limit accepted: an hour, far beyond any page, short of any overflow.
MAX_READ_TIME_LIMIT_MS = 3_600_000


def check_limit_ms(limit_ms: object) -> int:
    """:raises ValueError: ``limit_ms`` is not an int from 1 to :data:`MAX_READ_TIME_LIMIT_MS`."""
    if isinstance(limit_ms, bool) or not isinstance(limit_ms, int):
        raise ValueError(f"limit_ms must be an int of milliseconds; got {limit_ms!r}")
    if not 1 <= limit_ms <= MAX_READ_TIME_LIMIT_MS:
        raise ValueError(f"limit_ms must be from 1 to {MAX_READ_TIME_LIMIT_MS}; got {limit_ms}")
    return limit_ms


@dataclass(frozen=True, slots=True)
class ReadDeadline:
    """A limit of ``limit_ms`` that began at ``started`` (``time.monotonic()``)."""

    limit_ms: int
    started: float = field(default_factory=time.monotonic)

    @property
    def at(self) -> float:
        """When it runs out, on ``time.monotonic()``'s clock."""
        return self.started + self.limit_ms / 1000

    def remaining_ms(self) -> int:
        """Whole milliseconds left (0 once it has run out)."""
        return max(0, int((self.at - time.monotonic()) * 1000))

    def passed(self) -> bool:
        """Whether it has run out."""
        return time.monotonic() >= self.at
