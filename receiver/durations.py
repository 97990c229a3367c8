"""DURATION, as every payhooks command and setting reads it: a whole number and a unit.

``30s``, ``15m``, ``12h``, ``90d`` (seconds, minutes, hours, days). One spelling everywhere
(``payhooks check --max-silence``, ``payhooks prune --older-than``), so an operator learns it
once. Weeks, months and years are left out on purpose: a month has no fixed length, and a
retention period written in days says exactly what it keeps.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

__all__ = ["DURATION_RULE", "MAX_DURATION", "format_duration", "parse_duration"]

#: What a DURATION must look like, said by every refusal of one.
DURATION_RULE: Final = "a DURATION is a whole number and a unit: 30s, 15m, 12h or 90d"

#: The longest DURATION read: 100 years, far past any retention, well inside ``timedelta``.
MAX_DURATION: Final = timedelta(days=36_500)

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_PATTERN: Final = re.compile(r"([0-9]{1,10})([smhd])")


def parse_duration(text: str) -> timedelta:
    """The ``timedelta`` that ``text`` names.

    :raises ValueError: in one sentence naming ``text`` and :data:`DURATION_RULE`, for a
        missing or unknown unit, a sign, a fraction, spaces inside, or more than
        :data:`MAX_DURATION`.
    """
    found = _PATTERN.fullmatch(text.strip()) if isinstance(text, str) else None
    if found is None:
        raise ValueError(f"{text!r} is not a DURATION: {DURATION_RULE}.")
    seconds = int(found.group(1)) * _UNITS[found.group(2)]
    duration = timedelta(seconds=seconds)
    if duration > MAX_DURATION:
        raise ValueError(f"{text!r} is too long: the longest DURATION is 36500d.")
    return duration


def format_duration(duration: timedelta) -> str:
    """``duration`` in the largest unit that writes it whole (``timedelta(hours=36)`` is
    ``36h``, ``timedelta(days=2)`` is ``2d``): what a message or a report prints back."""
    seconds = int(duration.total_seconds())
    for unit, size in sorted(_UNITS.items(), key=lambda item: -item[1]):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
