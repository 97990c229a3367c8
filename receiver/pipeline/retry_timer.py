"""A light timer in each serving process that sends retries that are due while no delivery
arrives.

Due retries are also picked up by the next delivery's sender (:class:`~payhooks.receiver.
pipeline.signal_dispatch.Sweeper`), but a shop may sit idle for hours while a receiver's
backoff runs out. So each process that serves requests starts one daemon thread, at its first
request (a thread does not survive ``fork()``, so a gunicorn worker starts its own), that looks
every ``interval`` seconds: a read when nothing is due, a claim with the lease when something
is, so several workers and hosts never run one signal at once. Nothing to set up; cron's
``payhooks signals --send`` covers a process that never serves a request.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable

__all__ = ["RetryTimer"]

logger = logging.getLogger("payhooks")


class RetryTimer:
    """Calls ``tick`` every ``interval`` seconds in a daemon thread of the current process,
    once :meth:`ensure_started` has been called in it; never when ``interval`` is 0. A tick
    that returns ``False`` stops the thread (its app is gone)."""

    def __init__(self, interval: float, tick: Callable[[], object]) -> None:
        self.interval = interval
        self._tick = tick
        self._pid: int | None = None
        self._thread: threading.Thread | None = None
        self._exit_hooked = False
        self._lock = threading.Lock()
        self._stop = threading.Event()

    @property
    def running(self) -> bool:
        """Whether this process's thread is looking."""
        thread = self._thread
        return self._pid == os.getpid() and thread is not None and thread.is_alive()

    def ensure_started(self) -> None:
        """Start this process's thread, once (cheap after the first call)."""
        if self.interval <= 0 or self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._stop = threading.Event()
            thread = threading.Thread(target=self._loop, name="payhooks-retries", daemon=True)
            thread.start()
            self._thread, self._pid = thread, os.getpid()
            if not self._exit_hooked:  # a clean exit lets the current look finish first
                atexit.register(self.stop)
                self._exit_hooked = True

    def stop(self) -> None:
        """Stop the thread after its current look (for tests and a clean shutdown)."""
        self._stop.set()
        thread, self._thread, self._pid = self._thread, None, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _loop(self) -> None:
        stop = self._stop
        while not stop.wait(self.interval):
            try:
                if self._tick() is False:
                    return
            except Exception:  # a daemon thread must outlive a bad look
                logger.exception("payhooks: looking for due signal retries failed")
