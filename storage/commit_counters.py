"""Two counters every process writing one ledger file shares: commits made, commits synced.

They make :class:`storage.wal_sync.WalSync` a real group commit. Each writer takes a *ticket*
right after its commit, while it still holds the ledger's write lock, so tickets are handed out
one at a time and in commit order. A writer that syncs the write-ahead log first reads how many
tickets exist, then syncs, then publishes that number as *synced*: every commit with a ticket
up to it was written to the log before the sync began, so the sync put it on disk. A writer
whose ticket is already covered skips its own sync; one syncing for everyone is enough.

The counters live in the first bytes of the write lock's sidecar file (``<database>.lock``),
mapped into memory, so reading or bumping one is a memory access, not a system call. The
file is ours: a header marks it, and a file without the header (the empty file an older
payhooks left, or any other bytes) is set to zero before its first ticket, under the write
lock. Each counter is a native, aligned 64-bit integer in its own cache line, read and written
whole through a ``memoryview`` cast to ``Q``: such loads and stores are single instructions on
the 64-bit platforms payhooks runs on, so no reader ever sees half an update. (Not
``struct.pack_into``: it zeroes the bytes before writing them, and a writer reading that zero
as the newest ticket was a bug the multi-process test caught.)
"""

from __future__ import annotations

import mmap
import os
from typing import Final

__all__ = ["CommitCounters"]

#: Marks a lock file whose counters payhooks wrote; any other content is reset before use.
MAGIC: Final = b"payhooks-commit-counters-v1\0"
_SIZE: Final = 192
# Indexes of the 8-byte words, each at the start of its own 64-byte cache line.
_COMMITTED: Final = 8
_SYNCED: Final = 16


class CommitCounters:
    """The shared counters of one ledger file, mapped from ``path`` (its lock file).

    :raises OSError: the file cannot be opened, grown or mapped (a read-only folder, say):
        the caller then syncs every commit itself.
    """

    __slots__ = ("_fd", "_map", "_words", "path")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            if os.fstat(fd).st_size < _SIZE:
                os.ftruncate(fd, _SIZE)  # only ever grown to this size: harmless to race
            self._map = mmap.mmap(fd, _SIZE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._words = memoryview(self._map).cast("Q")

    def next_ticket(self) -> int:
        """The ticket of the commit just made. Call only while holding the write lock, right
        after the commit: the lock is what makes the read-and-bump below one step."""
        words = self._words
        if self._map[: len(MAGIC)] != MAGIC:
            words[_COMMITTED] = 0
            words[_SYNCED] = 0
            self._map[: len(MAGIC)] = MAGIC
        ticket: int = words[_COMMITTED] + 1
        words[_COMMITTED] = ticket
        return ticket

    def committed(self) -> int:
        """The newest ticket handed out: every commit up to it is in the log."""
        value: int = self._words[_COMMITTED]
        return value

    def synced(self) -> int:
        """Every commit whose ticket is at most this is on disk."""
        value: int = self._words[_SYNCED]
        return value

    def mark_synced(self, ticket: int) -> None:
        """Publish that a sync covered every ticket up to ``ticket``. Raising only: two syncing
        writers may race here, and the loser may lower it again, which costs a sync, never a
        commit."""
        if ticket > self.synced():
            self._words[_SYNCED] = ticket

    def close(self) -> None:
        self._words.release()
        self._map.close()
        os.close(self._fd)

    def __repr__(self) -> str:
        return f"<CommitCounters {self.path!r}>"
