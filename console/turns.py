"""One console request per person at a time, across every worker process of the host.

A console page can cost seconds of a worker (a finance period of three years, a search of the
whole log; each read stops at the console's time limit). A person who opens ten tabs, or a
script that loops, would otherwise hold ten workers at once, and a receiver that shares them
would answer notifications late. So each person takes a *turn*: an exclusive ``flock`` on a
file named for them (a hash of the hook's ``who``) in the app's instance folder. A second
request of the same person waits for the first to finish, up to :data:`TURN_WAIT_SECONDS`, and
is then refused with 429 ``console_busy``: their own page was still loading. The kernel
releases a lock whose process died, so a killed worker never leaves a person locked out.

Turns are per host: a shop with the console on several hosts gives each person one turn per
host. People the hook does not name (a bare role: ``unnamed viewer``) share one turn per role.
Where the folder cannot be made (a read-only instance folder) or there is no ``fcntl``
(Windows), turns are kept per process instead, and that is logged once.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

try:
    import fcntl

    _NO_FCNTL = False
except ImportError:  # pragma: no cover - Windows
    _NO_FCNTL = True

__all__ = ["TURNS_FOLDER", "TURN_WAIT_SECONDS", "Turn", "take_turn"]

#: How long a person's second request waits for their first before it is refused.
TURN_WAIT_SECONDS: Final = 5.0
#: The folder, inside the app's instance folder, that holds one lock file per person.
TURNS_FOLDER: Final = "payhooks-console-turns"
_POLL_SECONDS: Final = 0.02

logger = logging.getLogger("payhooks")
_process_locks: dict[str, threading.Lock] = {}
_process_locks_guard = threading.Lock()
_warned: set[str] = set()


class Turn:
    """A person's turn, held until :meth:`release`."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        """Give the turn back (once; later calls do nothing)."""
        release, self._release = self._release, None
        if release is not None:
            release()


def _name(who: str) -> str:
    return hashlib.sha256(who.encode()).hexdigest()[:32]


def _file_turn(folder: Path, who: str, deadline: float) -> Turn | None:
    fd = os.open(folder / _name(who), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return None
                time.sleep(_POLL_SECONDS)
                continue
            return Turn(lambda: os.close(fd))  # closing the descriptor releases the lock
    except BaseException:
        os.close(fd)
        raise


def _process_turn(who: str, deadline: float) -> Turn | None:
    with _process_locks_guard:
        lock = _process_locks.setdefault(who, threading.Lock())
    if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
        return None
    return Turn(lock.release)


def _warn_once(folder: Path, err: OSError) -> None:
    if str(folder) not in _warned:
        _warned.add(str(folder))
        logger.warning(
            "payhooks console: cannot use %s (%s); one request per person at a time is kept "
            "per process, not per host",
            folder,
            err.strerror,
        )


def take_turn(instance_path: str, who: str, wait_seconds: float | None = None) -> Turn | None:
    """``who``'s turn, once their other request (in any process of this host) has finished;
    None when that took longer than ``wait_seconds`` (:data:`TURN_WAIT_SECONDS`)."""
    wait = TURN_WAIT_SECONDS if wait_seconds is None else wait_seconds
    deadline = time.monotonic() + wait
    if _NO_FCNTL:
        return _process_turn(who, deadline)
    folder = Path(instance_path) / TURNS_FOLDER
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return _file_turn(folder, who, deadline)
    except OSError as err:  # an instance folder this process may not write
        _warn_once(folder, err)
        return _process_turn(who, deadline)
