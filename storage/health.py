"""Whether a ledger can do its job now: answer, accept a write, and match this code's schema.

A load balancer asks often, so a check must cost little and write nothing: each engine answers
from what it can see without writing (:mod:`payhooks.storage.sqlite.health`,
:mod:`payhooks.storage.postgresql.health`). The answer is a :class:`LedgerHealth`: healthy, or
one stable code (:data:`HEALTH_CODES`) and one sentence that names no secret and no payment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from payhooks.storage.errors import SchemaVersionError

__all__ = [
    "DEFAULT_HEALTH_LOCK_TIMEOUT_MS",
    "DEFAULT_MIN_FREE_BYTES",
    "HEALTH_CODES",
    "LedgerHealth",
    "check_schema",
]

#: Below this much free space in the ledger's folder, a SQLite ledger is reported full: a write
#: that needs a new page (or the WAL to grow) would fail soon.
DEFAULT_MIN_FREE_BYTES: Final = 64 * 1024 * 1024
#: How long a check waits for the write lock (SQLite) or a connection (PostgreSQL).
DEFAULT_HEALTH_LOCK_TIMEOUT_MS: Final = 100

#: Every code a check reports, and what it means.
HEALTH_CODES: Final[Mapping[str, str]] = {
    "ledger_read_only": "the ledger can be read but not written",
    "ledger_disk_full": "the ledger's disk has less free space than the threshold",
    "ledger_locked": "another connection held the write lock past the check's timeout",
    "ledger_unavailable": "the ledger cannot be opened or does not answer",
    "ledger_migration_pending": "the ledger's schema is behind this payhooks",
}


@dataclass(frozen=True, slots=True)
class LedgerHealth:
    """One check's answer: ``code`` None when healthy, else one of :data:`HEALTH_CODES`."""

    code: str | None
    #: One sentence for a person; no secret, nothing about payments.
    message: str
    #: The schema version found, when the check got that far.
    schema_version: int | None = None

    @property
    def ok(self) -> bool:
        return self.code is None

    @classmethod
    def healthy(cls, schema_version: int) -> LedgerHealth:
        return cls(
            None, "The ledger answers, can be written, and its schema is current.", schema_version
        )


def check_schema(read_version: Callable[[], int], current: int) -> LedgerHealth | int:
    """The schema version ``read_version`` finds, or the answer it already decides: a schema
    from a newer payhooks is ``ledger_unavailable``, one behind ``current`` is
    ``ledger_migration_pending``. Each engine's check starts here."""
    try:
        version = read_version()
    except SchemaVersionError as err:
        return LedgerHealth("ledger_unavailable", err.message)
    if version < current:
        return LedgerHealth(
            "ledger_migration_pending",
            f"The ledger has schema version {version} and this payhooks needs {current}.",
            version,
        )
    return version
