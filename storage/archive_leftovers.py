"""What a stopped ``payhooks prune`` left in its archive folder, swept when the next one starts.

A prune killed while it writes its archive (a ``SIGKILL``, a power cut, the OOM killer) cannot
remove its temporary files, and one killed between renaming the archive and renaming its
checksum file leaves a whole archive with no ``.sha256`` beside it. Nothing was dropped from
the ledger in either case (rows are emptied only once both files are in place), so the rows
are still there and the next prune archives them again. What is left on disk is only clutter,
and a trap for whoever counts on every archive having its checksum, so the next prune sweeps
it first:

- a temporary file of an archive or of a checksum file (``.payhooks-prune-....partial`` and
  ``....partial.sha256``) is removed once its writer is gone: nobody holds its ``flock`` (a
  live prune does, the kernel drops a dead one's) and it was not written for
  :data:`IDLE_SECONDS`. A prune still running beside this one keeps its files.
- an archive without its checksum file, untouched for as long, is read back whole (the gzip
  stream's CRC, every body against its SHA-256) and given its checksum file. One that does not
  read back is left as it is and reported: it is for a person to look at, never removed.

Only names :func:`~payhooks.storage.retention.archive_name` gives (and their temporary forms)
are touched; any other file in the folder is left alone. A folder that cannot be listed is
swept of nothing: writing the archive then fails with its own message.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from payhooks.storage.archives import (
    ARCHIVE_PREFIX,
    ARCHIVE_SUFFIX,
    ArchiveError,
    checksum_path,
    seal_archive,
    writer_gone,
)

__all__ = ["IDLE_SECONDS", "ArchiveLeftovers", "sweep_leftovers"]

#: How long a temporary file (or an archive without its checksum file) must have gone
#: unwritten, its writer's lock free, before a prune takes its writer for gone.
IDLE_SECONDS: Final = 60.0

# An archive's name, as payhooks writes it now (a fraction of a second and a random token)
# and as it did before (the second alone).
_ARCHIVE: Final = (
    re.escape(ARCHIVE_PREFIX)
    + r"\d{8}T\d{6}(?:\.\d{6})?Z(?:-[0-9a-f]{8})?"
    + re.escape(ARCHIVE_SUFFIX)
)
_WHOLE: Final = re.compile(_ARCHIVE)
_PARTIAL: Final = re.compile(rf"\.{_ARCHIVE}\.partial(?:\.sha256)?")


@dataclass(frozen=True, slots=True)
class ArchiveLeftovers:
    """What a prune found of the prunes stopped before it, and what it did (dry: would do)."""

    #: Temporary files of stopped prunes, removed (dry: that would be), by file name.
    removed: tuple[str, ...] = ()
    #: Whole archives given their missing checksum file (dry: found without it), by file name.
    sealed: tuple[str, ...] = ()
    #: Files left as they are for a person, by file name, with why (an archive that does not
    #: read back, a file that could not be removed).
    left: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.removed or self.sealed or self.left)


def sweep_leftovers(
    folder: Path, *, dry_run: bool = False, now: float | None = None
) -> ArchiveLeftovers:
    """Sweep ``folder`` of what stopped prunes left (see the module): remove their temporary
    files, give their whole archives a checksum file; with ``dry_run``, only say what would be
    done.

    :param now: the file system's time now (``time.time()`` by default), against mtimes.
    """
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_file())
    except OSError:
        return ArchiveLeftovers()
    removed: list[str] = []
    sealed: list[str] = []
    left: list[tuple[str, str]] = []
    for name in names:
        path = folder / name
        if _PARTIAL.fullmatch(name):
            if not writer_gone(path, idle_seconds=IDLE_SECONDS, now=now):
                continue
            if not dry_run:
                try:
                    path.unlink()
                except FileNotFoundError:
                    continue  # another prune swept it first
                except OSError as err:
                    left.append((name, f"it cannot be removed: {err.strerror}"))
                    continue
            removed.append(name)
        elif _WHOLE.fullmatch(name) and not checksum_path(path).exists():
            if not writer_gone(path, idle_seconds=IDLE_SECONDS, now=now):
                continue
            if not dry_run:
                try:
                    seal_archive(path)
                except ArchiveError as err:
                    if checksum_path(path).exists():
                        continue  # another prune sealed it first
                    left.append((name, err.message.rstrip(".")))
                    continue
            sealed.append(name)
    return ArchiveLeftovers(tuple(removed), tuple(sealed), tuple(left))
