"""The ledger's errors: one base with a stable ``code``, the same on every engine.

The receiver answers 503 (so the service retries) when storage cannot be written, and must
tell that apart from a bug. So no engine's exception leaves the ledger bare: every one is
turned into a :class:`StorageError`, and the ones that mean "try again later" (locked past the
busy timeout, a read-only file, a full disk, an I/O failure) into
:class:`StorageUnavailableError`. Each engine translates its own driver's errors
(:mod:`payhooks.storage.sqlite.errors`, :mod:`payhooks.storage.postgresql.errors`), so this
module imports no driver.
"""

from __future__ import annotations

__all__ = [
    "NESTED_WRITE_FAILED",
    "ConflictError",
    "NotALedgerError",
    "PostgresExtraMissingError",
    "ReadTimeLimitError",
    "SchemaBehindError",
    "SchemaVersionError",
    "StorageError",
    "StorageUnavailableError",
    "UnknownDeliveryError",
    "UnreadableRowError",
]


#: Why a transaction whose nested writes joined it without savepoints was rolled back: one of
#: them failed and the block went on (:meth:`payhooks.storage.Ledger.transaction`).
NESTED_WRITE_FAILED = (
    "A write inside the transaction failed and the block went on; the whole transaction was "
    "rolled back."
)


class StorageError(Exception):
    """Base of every ledger error: a stable machine ``code`` and a human ``message``."""

    #: Stable machine-readable code; subclasses override it.
    code: str = "storage_error"

    def __init__(self, message: str) -> None:
        #: One sentence for a person; never a secret, never the stored data.
        self.message = message
        super().__init__(message)


class StorageUnavailableError(StorageError):
    """The ledger cannot be written now: locked past the busy timeout, read-only, disk full.

    The write did not happen; trying again later may succeed.
    """

    code = "storage_unavailable"


class SchemaBehindError(StorageUnavailableError):
    """The database's schema is older than this payhooks, and it is not migrated on this open
    (PostgreSQL, which ``payhooks migrate`` moves forward as a deploy step, or a ledger opened
    read-only); nothing was changed in it."""

    code = "schema_behind"


class ConflictError(StorageError):
    """A payment registered again with data that differs from what is stored."""

    code = "conflict"

    def __init__(self, external_identifier: str, fields: tuple[str, ...]) -> None:
        #: The payment registered twice.
        self.external_identifier = external_identifier
        #: The names of the fields whose stored value differs from the new one.
        self.fields = fields
        super().__init__(
            f"Payment {external_identifier!r} is already registered with a different "
            f"{', '.join(fields)}."
        )


class UnknownDeliveryError(StorageError, LookupError):
    """A delivery id that the ledger has never stored."""

    code = "unknown_delivery"

    def __init__(self, delivery_id: int) -> None:
        #: The id asked for.
        self.delivery_id = delivery_id
        super().__init__(f"There is no delivery with id {delivery_id}.")


class SchemaVersionError(StorageError):
    """The file was migrated by a newer payhooks than this one; it is not touched."""

    code = "schema_too_new"


class NotALedgerError(StorageError):
    """A file opened as an existing ledger holds no payhooks ledger (another application's
    database, or not SQLite at all); it is not touched."""

    code = "not_a_ledger"


class PostgresExtraMissingError(StorageError):
    """A ``postgresql://`` URL without psycopg installed (the ``postgres`` extra)."""

    code = "postgres_extra_missing"

    def __init__(self) -> None:
        super().__init__("PostgreSQL needs the postgres extra: pip install 'payhooks[postgres]'.")


class UnreadableRowError(StorageError):
    """A stored value the ledger cannot read back: a time that is not ISO 8601 with its offset,
    as payhooks writes every time (``yesterday``, a date alone, a time without a zone).

    payhooks never writes one, so something else changed the row (a SQL tool, another
    program). Raised where the value is read, so every reader (``payhooks check``, the
    metrics, the console) fails in one sentence naming the column, never the value, instead
    of a traceback.
    """

    code = "unreadable_row"

    def __init__(self, column: str | None = None) -> None:
        #: The table and column (``deliveries.received_at``), when the reader knows it.
        self.column = column
        what = "a stored time" if column is None else f"a value in {column}"
        super().__init__(
            f"The ledger holds {what} that is not a time as payhooks writes one "
            "(ISO 8601 with its offset): something other than payhooks changed the row."
        )


class ReadTimeLimitError(StorageError):
    """A read inside :meth:`~payhooks.storage.Ledger.read_time_limit` ran out of its time and
    was interrupted (SQLite's progress handler, PostgreSQL's ``statement_timeout``).

    Nothing was written and nothing is wrong with the ledger: the question asked more of it
    than the caller allowed. A page can show what it read before, and say where it stopped.
    """

    code = "read_time_limit"

    def __init__(self, limit_ms: int) -> None:
        #: The limit the read ran out of, in milliseconds.
        self.limit_ms = limit_ms
        super().__init__(f"The read stopped after {_duration_text(limit_ms)}, its time limit.")


def _duration_text(ms: int) -> str:
    """A limit as a person reads it: ``2 s``, ``1.5 s``, ``250 ms``."""
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:g} s"
