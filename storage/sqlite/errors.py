"""SQLite's errors as the ledger's: every ``sqlite3.Error`` becomes a
:class:`~payhooks.storage.StorageError`, and those after which the same write can succeed later
become :class:`~payhooks.storage.StorageUnavailableError` (the receiver answers 503 for them, so
the service retries). A PostgreSQL engine translates ``psycopg`` errors in a module of its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from payhooks.storage.errors import StorageError, StorageUnavailableError

__all__ = ["from_sqlite_error", "translate_errors"]

# Primary result codes (https://sqlite.org/rescode.html) after which the same write can succeed
# later, once the lock is released, space is freed or permissions are fixed.
_UNAVAILABLE_RESULT_CODES = frozenset(
    {
        3,  # SQLITE_PERM
        5,  # SQLITE_BUSY
        6,  # SQLITE_LOCKED
        7,  # SQLITE_NOMEM
        8,  # SQLITE_READONLY
        10,  # SQLITE_IOERR
        13,  # SQLITE_FULL
        14,  # SQLITE_CANTOPEN
        15,  # SQLITE_PROTOCOL
    }
)


def from_sqlite_error(err: sqlite3.Error) -> StorageError:
    """The :class:`StorageError` that stands for ``err`` (the caller raises it ``from err``)."""
    code = getattr(err, "sqlite_errorcode", None)
    name = getattr(err, "sqlite_errorname", None) or type(err).__name__
    message = f"SQLite failed ({name}): {err}"
    if code is not None and code & 0xFF in _UNAVAILABLE_RESULT_CODES:
        return StorageUnavailableError(message)
    return StorageError(message)


@contextmanager
def translate_errors() -> Iterator[None]:
    """Run the block, turning any ``sqlite3.Error`` into the matching :class:`StorageError`."""
    try:
        yield
    except sqlite3.Error as err:
        raise from_sqlite_error(err) from err
