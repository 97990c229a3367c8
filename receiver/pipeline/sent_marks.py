"""The marks of signals this process sent, written with its next delivery or within a moment.

After a new outcome's commit the receiver runs the signals' receivers, then marks the signals
sent (``signals_sent_at``) so that neither a redelivery nor ``flask payhooks signals --send``
sends them again. Written at once, that mark is a second transaction per delivery: the write
lock taken again, a commit, the delivery's page and the owed-signals index's page logged
again. Measured with ``bench.receive`` (gunicorn, 4 workers, ``FULL``), leaving the mark out
took the receiver from 1,051 to 1,156 requests/s, its server CPU from 1,370 to 1,225 µs per
request and its WAL from 12.3 to 10.3 pages per delivery.

So a mark waits here, in the process that sent the signals, for the process's next delivery:
:meth:`SentMarks.carried` hands the waiting marks to the next delivery's transaction, which
writes them before anything else (a redelivery of the same outcome then finds its signals
sent). Under load nearly every mark goes that way, in a commit that is made anyway. A mark
that no delivery carried within the delay (``PAYHOOKS_SIGNALS_MARK_DELAY_MS``, default
:data:`MARK_DELAY_SECONDS`) is written by a thread of the
process's own, in a commit of its own (as before, not synced); so are the waiting marks when
the process exits normally.

What this changes, and what it does not:

- **At least once still holds.** A mark is only ever written after its receivers ran. A
  process that dies with marks waiting leaves those signals owed, and they are sent again, as
  when a process died between the commit and the mark before.
- **The window grows by the delay** (``PAYHOOKS_SIGNALS_MARK_DELAY_MS``), plus, while the
  ledger cannot be written, the time until a write succeeds (the thread pauses longer after
  each failure, up to :data:`_MAX_PAUSE_SECONDS`). Until the mark is written, the signals read
  as owed (``owed_signals``): ``flask payhooks signals --send`` run then, or a redelivery
  answered by another process, sends them again. That window already spanned the receivers'
  own run; receivers tell a second sending by the ``outcome_id``.
- A receiver that raised is recorded at once, with its mark, as before: that write is needed
  anyway.

The marks are per process and per app: a forked child starts with none (its parent writes
its own), and the thread is started in the process that needs it.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Final

from payhooks.storage import Ledger, StorageError

__all__ = ["MARK_DELAY_SECONDS", "SentMarks"]

logger = logging.getLogger("payhooks")

#: How long a mark waits for the process's next delivery to carry it before the process's
#: thread writes it alone.
MARK_DELAY_SECONDS: Final = 0.2

#: How long the thread waits for a mark before it ends (a new mark starts another, which opens
#: a ledger connection of its own again).
_IDLE_SECONDS: Final = 60.0

#: The longest pause of the thread between failed writes (doubling from the delay).
_MAX_PAUSE_SECONDS: Final = 30.0

#: How long :meth:`SentMarks.close` waits for the thread to end.
_JOIN_SECONDS: Final = 5.0

# Every SentMarks alive, for the fork and exit hooks (registered once, below).
_ALL: weakref.WeakSet[SentMarks] = weakref.WeakSet()


class SentMarks:
    """The marks one app's receiver owes the ledger in this process.

    :param ledger: gives the calling thread its ledger (``LedgerPool.get``).
    :param delay: how long a mark waits for a delivery to carry it, in seconds.
    """

    def __init__(self, ledger: Callable[[], Ledger], *, delay: float = MARK_DELAY_SECONDS) -> None:
        self._ledger = ledger
        self.delay = delay
        self._reset()
        _ALL.add(self)

    def _reset(self) -> None:
        """No marks and no thread: a new instance's state, and a forked child's."""
        self._lock = threading.Lock()
        self._due = threading.Condition(self._lock)
        self._flushing = threading.Lock()  # one flush at a time: close() waits for the thread's
        # outcome id -> (when its receivers ran, time.monotonic() when it was added)
        self._waiting: dict[int, tuple[datetime, float]] = {}
        self._thread: threading.Thread | None = None
        self._stop = False

    def add(self, outcome_id: int, sent_at: datetime) -> None:
        """Keep the mark of outcome ``outcome_id``'s signals, sent at ``sent_at``, for the next
        delivery's transaction, or the thread's, to write.

        :raises ValueError: ``sent_at`` has no time zone (it would fail every transaction that
            carried it).
        """
        if sent_at.utcoffset() is None:
            raise ValueError("sent_at must be timezone-aware")
        with self._lock:
            idle = not self._waiting
            self._waiting[outcome_id] = (sent_at, time.monotonic())
            if idle:
                self._due.notify()  # a thread waiting for a first mark; later ones are due after
            thread = self._new_thread()
        _start(self, thread)

    def waiting(self) -> int:
        """How many marks wait to be written."""
        with self._lock:
            return len(self._waiting)

    @contextmanager
    def carried(self, older_than: float | None = None) -> Iterator[dict[int, datetime]]:
        """Take the waiting marks (only those added at least ``older_than`` seconds ago, when
        given) for the block to write; if the block fails, they wait again.

        Wrap the whole transaction, its commit included, so that marks a rolled-back
        transaction wrote are not lost.
        """
        taken = self._take(older_than)
        try:
            yield {outcome_id: sent_at for outcome_id, (sent_at, _) in taken.items()}
        except BaseException:
            self._put_back(taken)
            raise

    def flush(self, older_than: float | None = None) -> None:
        """Write the waiting marks now, in a commit of their own (not synced).

        :raises StorageError: they could not be written; they wait again.
        """
        with self._flushing, self.carried(older_than) as marks:
            if marks:
                self._ledger().mark_many_signals_sent(marks)

    def close(self) -> None:
        """End the thread and write what waits (at exit, and after a test). A later mark starts
        a thread again; one added while this runs waits for the next delivery or mark.

        :raises StorageError: the marks could not be written; they wait again.
        """
        with self._lock:
            thread, self._stop = self._thread, True
            self._due.notify_all()
        try:
            if thread is not None and thread.ident is not None:  # started
                thread.join(_JOIN_SECONDS)
            self.flush()
        finally:
            with self._lock:
                self._stop = False
        self._ensure_thread()  # for marks added meanwhile

    def _ensure_thread(self) -> None:
        """Start the thread if marks wait and none runs."""
        with self._lock:
            thread = self._new_thread()
        _start(self, thread)

    def _new_thread(self) -> threading.Thread | None:
        """Under the lock: the thread to start (by :func:`_start`, outside the lock) if marks
        wait and none runs, already recorded as this instance's; else None."""
        if self._thread is not None or self._stop or not self._waiting:
            return None
        self._thread = threading.Thread(
            target=_write_late_marks,
            args=(weakref.ref(self),),
            name="payhooks-sent-marks",
            daemon=True,
        )
        return self._thread

    def _take(self, older_than: float | None) -> dict[int, tuple[datetime, float]]:
        with self._lock:
            if older_than is None:
                taken, self._waiting = self._waiting, {}
                return taken
            cutoff = time.monotonic() - older_than
            taken = {key: mark for key, mark in self._waiting.items() if mark[1] <= cutoff}
            for key in taken:
                del self._waiting[key]
            return taken

    def _put_back(self, taken: dict[int, tuple[datetime, float]]) -> None:
        with self._lock:
            for outcome_id, mark in taken.items():
                self._waiting.setdefault(outcome_id, mark)
            self._due.notify()
        self._ensure_thread()  # it may have ended, idle, while the marks were out

    def _await_due(self) -> bool:
        """Wait until the oldest mark has waited :attr:`delay` (True), or until the thread
        should end (False): :meth:`close` asked, or no mark came for a while. Either way the
        thread is no longer this instance's when False is returned."""
        with self._lock:
            idle_until = time.monotonic() + _IDLE_SECONDS
            while not self._stop:
                now = time.monotonic()
                if self._waiting:
                    due = min(added for _, added in self._waiting.values()) + self.delay
                    if due <= now:
                        return True
                    self._due.wait(due - now)
                elif now < idle_until:
                    self._due.wait(idle_until - now)
                else:
                    break
            self._thread = None
            return False


def _start(marks: SentMarks, thread: threading.Thread | None) -> None:
    """Start ``thread`` (from :meth:`SentMarks._new_thread`), outside the lock: under gevent a
    patched ``start()`` switches to the new greenlet, which would block on it."""
    if thread is None:
        return
    try:
        thread.start()
    except RuntimeError as err:  # no new thread now: a limit, or the interpreter exiting
        with marks._lock:
            if marks._thread is thread:
                marks._thread = None
        logger.warning("payhooks: marks of sent signals wait for a delivery: %s", err)


def _write_late_marks(ref: weakref.ReferenceType[SentMarks]) -> None:
    """The thread: writes each mark no delivery carried within the delay, pausing longer after
    each failure in a row (up to :data:`_MAX_PAUSE_SECONDS`); ends when no mark came for a
    while, when :meth:`SentMarks.close` asks, or when its instance (its app) is gone."""
    failures = 0
    while (marks := ref()) is not None and marks._await_due():
        if _flush_logged(marks):
            failures = 0
            del marks
            continue
        failures += 1
        pause = min(marks.delay * 2**failures, _MAX_PAUSE_SECONDS)
        del marks  # hold no reference while pausing: the app may go meanwhile
        time.sleep(pause)


def _flush_logged(marks: SentMarks) -> bool:
    """Write the marks that are due; whether that worked (if not, they wait again)."""
    try:
        marks.flush(marks.delay)
    except StorageError as err:
        logger.warning("payhooks: could not mark sent signals as sent yet: %s", err.message)
        return False
    except Exception:  # a bug: say so; a delivery may still carry them
        logger.exception("payhooks: could not mark sent signals as sent")
        return False
    return True


def _forget_in_child() -> None:
    """After ``fork()``: the parent writes its own marks; the child starts with none."""
    for marks in list(_ALL):
        marks._reset()


def _close_at_exit() -> None:
    """At a normal exit (a worker stopped by its server), write what waits."""
    for marks in list(_ALL):
        try:
            marks.close()
        except StorageError as err:
            logger.warning("payhooks: sent signals left owed at exit: %s", err.message)
        except Exception:  # the others still get their turn
            logger.exception("payhooks: sent signals left owed at exit")


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere nothing forks a running app
    os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(_close_at_exit)
