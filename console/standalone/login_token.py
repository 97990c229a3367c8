"""The standalone console's login token: one, random, good once and for a few minutes.

The printed link is the only credential: anyone who reads it before it is used (a terminal's
scrollback, a shared screen) could log in with it. So it is 32 random bytes, taken once,
and dead after its lifetime; a token offered after that, or a wrong one, is refused the same
way, and the comparison takes the same time whatever the guess.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

__all__ = ["TOKEN_LIFETIME", "LoginToken"]

#: How long the printed link works, if nobody uses it.
TOKEN_LIFETIME: Final = timedelta(minutes=10)


class LoginToken:
    """One token, redeemed at most once before ``expires_at``.

    :param clock: now, as an aware time.
    :param lifetime: how long the token works from now.
    """

    def __init__(self, clock: Callable[[], datetime], lifetime: timedelta = TOKEN_LIFETIME) -> None:
        #: The secret itself: printed once, in the login link.
        self.value = secrets.token_urlsafe(32)
        self._clock = clock
        #: After this moment the token is refused.
        self.expires_at = clock() + lifetime
        self._used = False
        self._lock = threading.Lock()

    def redeem(self, offered: str) -> bool:
        """Whether ``offered`` is the token, unused and in time; a True answer uses it up."""
        candidate = offered.encode("utf-8", "surrogateescape")
        matches = hmac.compare_digest(candidate, self.value.encode("ascii"))
        with self._lock:
            if not matches or self._used or self._clock() >= self.expires_at:
                return False
            self._used = True
            return True

    def __repr__(self) -> str:
        return f"<LoginToken expires {self.expires_at.isoformat()}>"
