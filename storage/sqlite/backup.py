"""``payhooks backup``: a consistent copy of a SQLite ledger while it is being written.

SQLite's online backup API (``sqlite3.Connection.backup``) copies the file in one step, inside
one read transaction: in WAL mode that reader sees one committed moment and blocks no writer,
so receivers keep answering while the copy is made. (Copying in several steps would restart
whenever another connection writes, which under steady load may be forever.) The copy is
written under a temporary name beside the destination, checked (``PRAGMA quick_check``),
synced and linked into place: a file at the destination is always a whole ledger. The link
(``os.link``) fails if the destination exists, even one created while the copy was made, so
the backup never overwrites a file. The copy is created readable by its owner only (0600):
it holds every payment, whatever mode the ledger has.

A backup that fails (a full disk, an I/O error, a copy that does not check out, Ctrl-C) leaves
nothing behind: the temporary file is removed, and so is every file SQLite may have made beside
it while writing it (its rollback journal, and the ``-wal`` and ``-shm`` of a copy that took
the ledger's WAL mode). One killed outright (``SIGKILL``) cannot clean up; the next backup to
the same destination removes what it left before it starts.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from payhooks.storage.errors import NotALedgerError, StorageError, StorageUnavailableError
from payhooks.storage.sqlite.opening import NOT_A_DATABASE, connect_read_only

__all__ = ["backup_ledger"]

#: The files SQLite may make beside a database it writes: the rollback journal while the copy
#: is written, the WAL and its index once the copy holds the ledger's WAL mode.
_SIDECARS = ("-journal", "-wal", "-shm")


def _remove_partial(partial: Path) -> None:
    """Remove the temporary copy and whatever SQLite made beside it; what is not there is
    fine."""
    for path in (partial, *(partial.with_name(partial.name + end) for end in _SIDECARS)):
        path.unlink(missing_ok=True)


def _sync(path: Path) -> None:
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _unreadable(source: Path, err: sqlite3.Error) -> StorageError:
    return StorageUnavailableError(f"Cannot read the ledger at {source}: {err}.")


def _check_source(src: sqlite3.Connection, source: Path) -> None:
    """:raises NotALedgerError: ``src`` is not SQLite, or holds no ledger; only SQLite's own
    word (``SQLITE_NOTADB``) or a missing table says so: a file SQLite cannot open or read
    (its ``-shm`` cannot be made, a lock, an I/O error) is a ledger that cannot be read
    (``StorageUnavailableError``), never "not a ledger".
    """
    try:
        (found,) = src.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'deliveries'"
        ).fetchone()
    except sqlite3.DatabaseError as err:
        if getattr(err, "sqlite_errorcode", 0) & 0xFF == NOT_A_DATABASE:
            raise NotALedgerError(
                f"{source} is not a payhooks ledger (it is not a SQLite database)."
            ) from err
        raise _unreadable(source, err) from err
    if not found:
        raise NotALedgerError(f"{source} is not a payhooks ledger (it holds no payhooks tables).")


def backup_ledger(
    source: str | os.PathLike[str], dest: str | os.PathLike[str], *, busy_timeout_ms: int = 5000
) -> int:
    """Copy the SQLite ledger ``source`` to the new file ``dest``; returns the copy's size in
    bytes. ``source`` is opened read-only and never changed, in a folder this process may not
    write too (:func:`~payhooks.storage.sqlite.opening.connect_read_only`).

    :raises NotALedgerError: ``source`` is not a payhooks ledger.
    :raises StorageUnavailableError: ``source`` cannot be opened or read.
    :raises StorageError: ``dest`` exists already, or the copy cannot be made or checked;
        nothing is left at ``dest`` then, nor beside it.
    """
    source_path, dest_path = Path(source), Path(dest)
    if dest_path.exists():
        raise StorageError(f"{dest_path} exists already; the backup never overwrites a file.")
    if not source_path.is_file():
        raise NotALedgerError(f"There is no ledger at {source_path}.")
    partial = dest_path.with_name(f".{dest_path.name}.partial")
    try:
        src = connect_read_only(str(source_path), timeout_s=busy_timeout_ms / 1000)
    except sqlite3.Error as err:
        raise _unreadable(source_path, err) from err
    try:
        _check_source(src, source_path)
        _remove_partial(partial)  # what a backup killed outright left
        # Created empty, owner-only, before SQLite opens it (which would use the umask).
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        dst = sqlite3.connect(partial)
        try:
            src.backup(dst)  # one step: one consistent moment
            (check,) = dst.execute("PRAGMA quick_check").fetchone()
        finally:
            dst.close()
        if check != "ok":
            raise StorageError(f"The copy of {source_path} does not check out: {check}.")
        _sync(partial)
        try:
            os.link(partial, dest_path)  # unlike a rename, never replaces a file
        except FileExistsError as err:
            raise StorageError(
                f"{dest_path} exists already; the backup never overwrites a file."
            ) from err
        _sync(dest_path.parent)
    except sqlite3.Error as err:
        raise StorageError(f"Cannot back up {source_path}: {err}.") from err
    except OSError as err:
        raise StorageError(f"Cannot write {dest_path}: {err.strerror}.") from err
    finally:
        src.close()
        _remove_partial(partial)
    return dest_path.stat().st_size
