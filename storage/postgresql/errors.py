"""PostgreSQL's errors as the ledger's: every ``psycopg`` error becomes a
:class:`~payhooks.storage.StorageError`, and those after which the same write can succeed later
become :class:`~payhooks.storage.StorageUnavailableError`, so the receiver answers 503 with
``Retry-After`` and the service retries: a server that cannot be reached or is shutting down, a
connection lost, a pool with no free connection within the busy timeout, a lock or statement
timeout, a deadlock or serialization failure, a full disk, a read-only standby.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg_pool import PoolTimeout

from payhooks.storage.errors import StorageError, StorageUnavailableError

__all__ = ["from_postgres_error", "translate_errors"]

# SQLSTATE classes and codes after which trying again later can succeed.
_UNAVAILABLE_CLASSES = ("08", "53", "57", "58", "40")  # connection, resources, operator, system
_UNAVAILABLE_CODES = frozenset({"55P03", "25006"})  # lock not available, read-only transaction


def from_postgres_error(err: Exception) -> StorageError:
    """The :class:`StorageError` that stands for ``err`` (the caller raises it ``from err``)."""
    if isinstance(err, PoolTimeout):
        return StorageUnavailableError(
            f"No connection to PostgreSQL could be had within the busy timeout: {err}"
        )
    sqlstate = getattr(err, "sqlstate", None)
    message = f"PostgreSQL failed ({sqlstate or type(err).__name__}): {err}"
    if sqlstate is None and isinstance(err, psycopg.OperationalError):
        return StorageUnavailableError(message)  # no answer at all: the connection failed
    if sqlstate is not None and (
        sqlstate[:2] in _UNAVAILABLE_CLASSES or sqlstate in _UNAVAILABLE_CODES
    ):
        return StorageUnavailableError(message)
    if isinstance(err, psycopg.InterfaceError):
        return StorageUnavailableError(message)
    return StorageError(message)


@contextmanager
def translate_errors() -> Iterator[None]:
    """Run the block, turning any ``psycopg`` (or pool) error into the matching
    :class:`StorageError`."""
    try:
        yield
    except (psycopg.Error, PoolTimeout) as err:
        raise from_postgres_error(err) from err
