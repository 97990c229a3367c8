"""The archive ``payhooks prune`` writes before it drops anything, and reads back.

An archive is JSON Lines in gzip, one record per dropped row: a delivery's id, dedupe key,
received time, status, payment, outcome, headers and its body as base64 (bodies are bytes and
need not be UTF-8), with ``body_sha256``; a refused request's id, time, address, reason and the
start of its body kept. Beside it, ``<archive>.sha256`` holds one line in ``sha256sum``'s
format, so ``sha256sum -c`` checks the file with no payhooks at hand.

The checksum only catches accidental damage: whoever can write an archive can rewrite its
checksum too. So reading trusts nothing about the size of what it decompresses: each line is
read with a cap (the largest body an archive may hold, in base64, and room for the other
columns), and the whole stream with another, so a crafted file (a gzip bomb, one huge line)
ends in :class:`ArchiveError` with memory flat.

Both files are written under a temporary name in the same folder, synced, then renamed: an
archive that exists is whole. Nothing is dropped until both are in place, so a failure while
archiving (a full disk) leaves the ledger as it was. Both are created readable by their owner
only (0600), whatever the umask: an archive holds every body it dropped. While a temporary file
is written its writer holds an exclusive ``flock`` on it, which the kernel releases when the
process dies: :func:`writer_gone` tells a killed writer's leftovers from a live one's
(:mod:`payhooks.storage.archive_leftovers` sweeps them), and :func:`seal_archive` gives a whole
archive whose writer died between the two renames its checksum file, once every record reads
back.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from payhooks.storage.errors import StorageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the age alone tells a writer gone
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "ARCHIVE_PREFIX",
    "ARCHIVE_SUFFIX",
    "MAX_ARCHIVED_BODY_BYTES",
    "MAX_ARCHIVE_BYTES",
    "ArchiveError",
    "ArchiveWriter",
    "ArchivedRow",
    "checksum_path",
    "partial_path",
    "read_archive",
    "seal_archive",
    "writer_gone",
]

#: How the file name of an archive ``payhooks prune`` writes begins.
ARCHIVE_PREFIX: Final = "payhooks-prune-"
#: How an archive's file name ends.
ARCHIVE_SUFFIX: Final = ".jsonl.gz"
_CHUNK: Final = 1 << 20
#: The largest body :func:`read_archive` accepts by default: 256 times the receiver's default
#: ``PAYHOOKS_MAX_BODY_BYTES`` (64 KiB).
MAX_ARCHIVED_BODY_BYTES: Final = 16 << 20
#: The most :func:`read_archive` decompresses from one archive by default, all lines together.
MAX_ARCHIVE_BYTES: Final = 64 << 30
# Room on a line for everything but the body: ids, times, status, the headers' JSON.
_LINE_ROOM: Final = 1 << 20


class ArchiveError(StorageError):
    """An archive that cannot be written, or read back as it was written (a checksum or a
    body's SHA-256 that does not match, a line that is not a record)."""

    code = "archive_error"


@dataclass(frozen=True, slots=True)
class ArchivedRow:
    """One row as the archive keeps it."""

    #: ``deliveries`` or ``rejected_deliveries``: the table it was dropped from.
    table: str
    id: int
    #: UTC ISO 8601, as the ledger stored it.
    received_at: str
    #: The body exactly as stored (a refused request's: its first 4 KiB, as kept).
    body: bytes = field(repr=False)
    #: SHA-256 of :attr:`body`, hex (checked on reading).
    body_sha256: str = field(repr=False)
    #: The rest of the row's columns, by name (a delivery's ``dedupe_key``, ``status``,
    #: ``headers``...; a refused request's ``reason``, ``remote_addr``, ``body_size``).
    columns: Mapping[str, Any] = field(default_factory=dict, repr=False)


def checksum_path(archive: Path) -> Path:
    """Where the ``sha256sum`` line of ``archive`` is kept: beside it, ``.sha256`` added."""
    return archive.with_name(archive.name + ".sha256")


def _sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (where the platform allows opening a folder)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows cannot open a folder
        return
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def partial_path(path: Path) -> Path:
    """The temporary name ``path`` is written under until it is whole: hidden, in the same
    folder (so the rename stays on one file system), ``.partial`` added."""
    return path.with_name(f".{path.name}.partial")


def _create_private(path: Path) -> int:
    """Create ``path``, a new file readable and writable by its owner only, and hold an
    exclusive ``flock`` on it until the descriptor is closed (or the process dies); its
    descriptor."""
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    if fcntl is not None:
        # A file system without flock: the age alone tells a writer gone.
        with contextlib.suppress(OSError):
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


def writer_gone(path: Path, *, idle_seconds: float, now: float | None = None) -> bool:
    """Whether the temporary file ``path`` was left by a writer that is gone: nobody holds its
    ``flock`` (a live writer does, from its creation to its rename) and it was not written for
    ``idle_seconds`` (which also covers the instant between creating it and locking it, and
    file systems where ``flock`` is not shared between hosts). False when it cannot be opened.

    :param now: the file system's time now (``time.time()`` by default), against its mtime.
    """
    try:
        handle = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        if fcntl is not None:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # its writer holds it: alive
            except OSError:
                pass  # a file system without flock: the age decides
        idle = (time.time() if now is None else now) - os.fstat(handle).st_mtime
        return idle >= idle_seconds
    finally:
        os.close(handle)


class _HashingFile:
    """A file that hashes every byte written to it, so the checksum needs no second read."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw, self.digest = raw, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self._raw.write(data)

    def flush(self) -> None:
        self._raw.flush()


class ArchiveWriter:
    """Writes one archive under a temporary name; :meth:`commit` makes it (and its checksum
    file) appear whole, :meth:`discard` removes what was written.

    :raises ArchiveError: the archive's name is taken, or the folder cannot be written.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._partial = partial_path(path)
        if path.exists() or checksum_path(path).exists():
            raise ArchiveError(f"The archive {path} exists already; nothing was pruned.")
        try:
            self._raw = os.fdopen(_create_private(self._partial), "wb")
        except OSError as err:
            raise ArchiveError(f"Cannot write the archive {path}: {err.strerror}.") from err
        self._hashing = _HashingFile(self._raw)
        # mtime=0 and no file name inside: the same rows give the same bytes.
        self._gzip = gzip.GzipFile(filename="", mode="wb", fileobj=self._hashing, mtime=0)
        #: How many records were written.
        self.records = 0

    def write(self, table: str, row_id: int, received_at: str, body: bytes, **columns: Any) -> None:
        """Add one row's record."""
        record = {
            "table": table,
            "id": row_id,
            "received_at": received_at,
            **columns,
            "body_sha256": hashlib.sha256(body).hexdigest(),
            "body_base64": base64.b64encode(body).decode("ascii"),
        }
        line = json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n"
        try:
            self._gzip.write(line.encode("ascii"))
        except OSError as err:
            raise ArchiveError(f"Cannot write the archive {self.path}: {err.strerror}.") from err
        self.records += 1

    def commit(self) -> str:
        """Finish, sync and rename the archive, then write its checksum file the same way;
        returns the archive's SHA-256 (hex)."""
        try:
            self._gzip.close()
            self._raw.flush()
            os.fsync(self._raw.fileno())
            self._raw.close()
            digest = self._hashing.digest.hexdigest()
            os.replace(self._partial, self.path)
            _write_checksum(self.path, digest)
        except OSError as err:
            self.discard()
            raise ArchiveError(f"Cannot write the archive {self.path}: {err.strerror}.") from err
        return digest

    def discard(self) -> None:
        """Remove what was written (after a failure): no partial archive is left behind."""
        for handle in (self._gzip, self._raw):
            with contextlib.suppress(OSError):
                handle.close()
        for leftover in (self._partial, checksum_path(self._partial)):
            leftover.unlink(missing_ok=True)


def _write_checksum(archive: Path, digest: str) -> None:
    """Write ``archive``'s ``sha256sum`` line under a temporary name, sync it, rename it into
    place and sync the folder.

    :raises OSError: it could not be written; the temporary file may be left (the caller
        removes it).
    """
    line = f"{digest}  {archive.name}\n".encode()
    partial_sum = checksum_path(partial_path(archive))
    with os.fdopen(_create_private(partial_sum), "wb") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
        os.replace(partial_sum, checksum_path(archive))
    _sync_folder(archive.parent)


def seal_archive(path: Path) -> str:
    """Write the missing checksum file of the archive ``path``, after reading every record of
    it back (the gzip stream's own CRC and length, each body against its SHA-256, the caps of
    :func:`read_archive`): what a writer stopped between renaming the archive and renaming its
    checksum file leaves. Returns the archive's SHA-256 (hex).

    :raises ArchiveError: the archive does not read back whole, has a checksum file already,
        or the checksum file cannot be written (nothing is left of it then).
    """
    if checksum_path(path).exists():
        raise ArchiveError(f"The archive {path} has a checksum file already.")
    for _ in _records(path, MAX_ARCHIVED_BODY_BYTES, MAX_ARCHIVE_BYTES):
        pass
    try:
        digest = _file_sha256(path)
        _write_checksum(path, digest)
    except OSError as err:
        checksum_path(partial_path(path)).unlink(missing_ok=True)
        raise ArchiveError(f"Cannot write the checksum file of {path}: {err.strerror}.") from err
    return digest


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _check_checksum(path: Path) -> None:
    """:raises ArchiveError: the checksum file is missing, or does not match the archive."""
    try:
        line = checksum_path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ArchiveError(f"The archive {path} has no readable checksum file beside it.") from err
    expected, _, name = line.partition("  ")
    try:
        actual = _file_sha256(path)
    except OSError as err:
        raise ArchiveError(f"The archive {path} cannot be read: {err.strerror}.") from err
    if name != path.name or expected != actual:
        raise ArchiveError(f"The archive {path} does not match its checksum file.")


def _row(number: int, line: bytes, path: Path, max_body_bytes: int) -> ArchivedRow:
    try:
        record = json.loads(line)
        body = base64.b64decode(record.pop("body_base64"), validate=True)
        if len(body) > max_body_bytes:
            raise ArchiveError(
                f"Line {number} of the archive {path} holds a body larger than "
                f"{max_body_bytes} bytes."
            )
        row = ArchivedRow(
            table=record.pop("table"),
            id=record.pop("id"),
            received_at=record.pop("received_at"),
            body=body,
            body_sha256=record.pop("body_sha256"),
            columns=record,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ArchiveError(f"Line {number} of the archive {path} is not a record.") from err
    if hashlib.sha256(body).hexdigest() != row.body_sha256:
        raise ArchiveError(
            f"Line {number} of the archive {path}: the body does not match its SHA-256."
        )
    return row


def read_archive(
    path: str | os.PathLike[str],
    *,
    max_body_bytes: int = MAX_ARCHIVED_BODY_BYTES,
    max_total_bytes: int = MAX_ARCHIVE_BYTES,
) -> Iterator[ArchivedRow]:
    """The rows of an archive, in the order written, each body checked against its SHA-256
    (and the whole file against its checksum file first). Streamed: memory stays flat, even
    for a crafted file: no line longer than a ``max_body_bytes`` body in base64 (plus room for
    the other columns) is read whole, nor more than ``max_total_bytes`` decompressed in all.

    :raises ArchiveError: the file is missing, damaged, does not match a checksum, or holds a
        line or a total over its cap.
    """
    archive = Path(path)
    _check_checksum(archive)
    yield from _records(archive, max_body_bytes, max_total_bytes)


def _records(archive: Path, max_body_bytes: int, max_total_bytes: int) -> Iterator[ArchivedRow]:
    """The rows of ``archive`` as :func:`read_archive` reads them, its checksum file aside."""
    max_line = 4 * -(-max_body_bytes // 3) + _LINE_ROOM
    total = 0
    try:
        with gzip.open(archive, "rb") as lines:
            number = 0
            while line := lines.readline(max_line + 1):
                number += 1
                total += len(line)
                if len(line) > max_line:
                    raise ArchiveError(
                        f"Line {number} of the archive {archive} is longer than a record "
                        f"holding a body of {max_body_bytes} bytes."
                    )
                if total > max_total_bytes:
                    raise ArchiveError(
                        f"The archive {archive} holds more than {max_total_bytes} bytes "
                        "decompressed."
                    )
                yield _row(number, line, archive, max_body_bytes)
    except (OSError, EOFError) as err:
        raise ArchiveError(f"The archive {archive} cannot be read: {err}.") from err
