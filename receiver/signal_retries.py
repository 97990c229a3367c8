"""When a signal whose receiver raised is tried again: exponential backoff with jitter, then
parked.

A receiver that raises keeps its signal owed (docs/signals.md). The first retry is due
``first`` after the round that raised, each next one twice as long after the last, never longer
than ``longest``, each delay shortened or stretched by up to a fifth at random so that the
receivers of many signals failing together (an ERP that went down) do not all come back in the
same second. After ``attempts`` rounds in all the signal is parked: still owed, never retried
by itself, listed for a person. The defaults (a minute, four hours, 14 rounds) spread the
retries over about a day.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

__all__ = ["JITTER", "SignalRetries"]

#: Each delay is multiplied by a number drawn between 1 - JITTER and 1 + JITTER.
JITTER: Final = 0.2

_random = random.Random()


@dataclass(frozen=True, slots=True)
class SignalRetries:
    """The backoff of a signal whose receiver raised (``PAYHOOKS_SIGNALS_RETRY_*``)."""

    #: The delay before the first retry.
    first: timedelta = timedelta(minutes=1)
    #: The longest delay between two rounds.
    longest: timedelta = timedelta(hours=4)
    #: Rounds in all, the first included; a signal whose last round raised is parked.
    attempts: int = 14

    def __post_init__(self) -> None:
        if self.first <= timedelta(0) or self.longest < self.first:
            raise ValueError("the first delay must be positive and at most the longest")
        if self.attempts < 1:
            raise ValueError("attempts must be 1 or more")

    def delay(self, rounds_done: int) -> timedelta:
        """The delay before the next round, without jitter, after ``rounds_done`` rounds."""
        exponent = min(max(rounds_done - 1, 0), 40)
        return min(self.first * (1 << exponent), self.longest)

    def retry_at(self, rounds_done: int, now: datetime) -> datetime | None:
        """When the next round is due after ``rounds_done`` rounds that ended with a raise at
        ``now``; None when that was the last allowed round (park it)."""
        if rounds_done >= self.attempts:
            return None
        return now + self.delay(rounds_done) * _random.uniform(1 - JITTER, 1 + JITTER)

    @property
    def total(self) -> timedelta:
        """The time from the first round to the last, without jitter: how long a receiver
        may stay down before its signals are parked."""
        return sum((self.delay(done) for done in range(1, self.attempts)), timedelta(0))
