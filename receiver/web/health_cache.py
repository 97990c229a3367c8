"""One process's last ``/health`` answer, reused for a second, with one probe at a time.

``GET /health`` needs no signature, and on SQLite its probe takes the ledger's write lock for
a moment (``BEGIN IMMEDIATE``), on PostgreSQL a connection from the receiver's pool. Probed on
every call, anyone who can reach the route could make the receiver's own writes queue behind
those probes. So each process keeps its last answer for :data:`MAX_AGE` seconds and runs at
most one probe at a time: whatever the number of callers, a process probes at most once per
window plus the time one probe takes. While one thread probes, the others take the last answer
(before the first one, they wait for it); a load balancer acts on several checks in a row
anyway, so an answer a second old costs nothing.

``ledger_locked`` is reported only once the write lock has been found busy by every probe for
at least the receiver's own busy timeout (``PAYHOOKS_BUSY_TIMEOUT_MS``): a notification's write
waits that long for the lock before it fails, so a lock held for less (a prune batch, a bulk
reprocess) delays deliveries and loses none. A single busy probe taking every receiver on the
ledger out of rotation at once would do more harm than the write it reports. A count of
failures alone would mean seconds or minutes depending on how often the load balancer asks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

from payhooks.storage import LedgerHealth

__all__ = ["MAX_AGE", "HealthCache"]

#: How long, in seconds, a process answers ``/health`` from its last probe.
MAX_AGE: Final = 1.0


class HealthCache:
    """The last probe's answer, for :data:`MAX_AGE` seconds; thread-safe.

    :param locked_grace: seconds the write lock must have been found busy, probe after probe,
        before ``ledger_locked`` is reported (the receiver's busy timeout).
    :param clock: seconds on a clock that never goes back; for tests.
    """

    def __init__(
        self,
        *,
        locked_grace: float,
        max_age: float = MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.locked_grace = locked_grace
        self.max_age = max_age
        self._clock = clock
        self._condition = threading.Condition()
        self._last: LedgerHealth | None = None
        self._answered_at = 0.0
        self._probing = False
        #: When the current run of probes finding the write lock busy began, if one has.
        self._locked_since: float | None = None
        #: How many probes this cache has run: what all its callers cost the ledger.
        self.probes = 0

    def answer(self, probe: Callable[[], LedgerHealth]) -> LedgerHealth:
        """The last answer while it is fresh or another thread is probing; else ``probe()``'s.

        An exception from ``probe`` reaches its caller and leaves the last answer as it was.
        """
        with self._condition:
            while True:
                last = self._last
                if last is not None and (
                    self._probing or self._clock() - self._answered_at < self.max_age
                ):
                    return last
                if not self._probing:
                    break
                self._condition.wait()
            self._probing = True
            self.probes += 1
        try:
            found = probe()
        except BaseException:
            with self._condition:
                self._probing = False
                self._condition.notify_all()  # one of the waiters probes instead
            raise
        with self._condition:
            now = self._clock()
            self._last = self._judged(found, now)
            self._answered_at = now
            self._probing = False
            self._condition.notify_all()
            return self._last

    def _judged(self, found: LedgerHealth, now: float) -> LedgerHealth:
        """``found``, except a write lock busy for less than :attr:`locked_grace` so far."""
        if found.code != "ledger_locked":
            self._locked_since = None
            return found
        if self._locked_since is None:
            self._locked_since = now
        if now - self._locked_since >= self.locked_grace:
            return found
        return LedgerHealth(
            None,
            "The write lock is busy, for less time than a write waits for it.",
            found.schema_version,
        )
