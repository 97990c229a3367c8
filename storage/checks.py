"""The checks the ledger makes of its arguments before anything touches the database.

Bad input fails here with ``ValueError`` (naming the argument), the same on every engine and
before any lock is taken; the database's own ``CHECK`` constraints are the last guard, not the
first.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final, TypeVar

from payhooks.storage.currencies import minor_unit_exponent
from payhooks.storage.encoding import to_json
from payhooks.storage.limits import MAX_AMOUNT_MINOR
from payhooks.storage.rows import DeliveryStatus, PaymentKind

__all__ = [
    "MARKABLE_STATUSES",
    "SYNCHRONOUS_MODES",
    "check_amount",
    "check_delivery",
    "check_options",
    "enum_member",
    "markable_status",
    "payment_values",
]

#: The values of :class:`~payhooks.storage.Ledger`'s ``synchronous`` option (after SQLite's
#: ``PRAGMA synchronous``), the safest first. ``FULL``: every write is on disk before the call
#: that made it returns, so it survives a power loss (the ledger syncs the write-ahead log
#: itself, after releasing the write lock: :mod:`payhooks.storage.sqlite.wal_sync`). ``NORMAL``:
#: the log is synced only at checkpoints; a write still survives the process crashing, but the
#: last writes before an operating-system crash or a power loss can be lost (the file stays
#: consistent).
SYNCHRONOUS_MODES: Final = ("FULL", "NORMAL")

#: The statuses ``Ledger.receiver.mark_delivery`` may set; the others follow from recording.
MARKABLE_STATUSES: Final = frozenset(
    {
        DeliveryStatus.MALFORMED_JSON,
        DeliveryStatus.INVALID_PAYLOAD,
        DeliveryStatus.PROCESSING_ERROR,
    }
)

_E = TypeVar("_E", bound=StrEnum)


def enum_member(kind: type[_E], value: str, argument: str) -> _E:
    """``value`` as a member of ``kind``, or a ValueError naming the argument and the choices."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise ValueError(f"{argument} must be one of {choices}; got {value!r}") from None


def markable_status(status: str) -> DeliveryStatus:
    """``status`` as one of :data:`MARKABLE_STATUSES`."""
    marked = enum_member(DeliveryStatus, status, "status")
    if marked not in MARKABLE_STATUSES:
        raise ValueError(f"status must be one of {sorted(MARKABLE_STATUSES)}, not {marked.value!r}")
    return marked


def check_delivery(dedupe_key: object, body: object) -> None:
    """Refuse a delivery the ledger cannot store under its key: an empty key, one with NUL or
    with a lone surrogate (no database can store it as text), a body that is not bytes."""
    if (
        not isinstance(dedupe_key, str)
        or not dedupe_key
        or "\x00" in dedupe_key
        or (not dedupe_key.isascii() and any("\ud800" <= char <= "\udfff" for char in dedupe_key))
    ):
        raise ValueError("dedupe_key must be a non-empty string without NUL or lone surrogates")
    if not isinstance(body, bytes | bytearray | memoryview):
        raise ValueError("body must be bytes")


def check_amount(value: object, argument: str) -> int:
    """``value`` when it is an amount the ledger stores (:data:`MAX_AMOUNT_MINOR`)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_AMOUNT_MINOR:
        raise ValueError(
            f"{argument} must be an int of minor units from 0 to {MAX_AMOUNT_MINOR}, not {value!r}"
        )
    return value


def check_options(
    busy_timeout_ms: int, max_rejected: int, max_returns: int, synchronous: object
) -> str:
    """Check the ledger's options; the ``synchronous`` mode, upper-cased."""
    if busy_timeout_ms < 0:
        raise ValueError(f"busy_timeout_ms must not be negative, not {busy_timeout_ms!r}")
    if max_rejected < 1:
        raise ValueError(f"max_rejected must be at least 1, not {max_rejected!r}")
    if max_returns < 1:
        raise ValueError(f"max_returns must be at least 1, not {max_returns!r}")
    mode = synchronous.upper() if isinstance(synchronous, str) else synchronous
    if mode not in SYNCHRONOUS_MODES:
        raise ValueError(
            f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}, not {synchronous!r}"
        )
    return str(mode)


def payment_values(
    external_identifier: str,
    kind: PaymentKind,
    amount_minor: int,
    currency: str,
    plan_amount_minor: int | None,
    description: str | None,
    metadata: Mapping[str, Any] | None,
) -> tuple[Any, ...]:
    """A registration's values as :func:`payhooks.storage.payments.insert` takes them, once
    each is checked (the plan amount by the caller, which knows whether there is one).

    :raises ValueError: an identifier outside 1 to 64 characters, an amount out of range, a
        currency that is not an ISO 4217 code with minor units (``UnknownCurrencyError``), a
        description that is not a string, metadata that JSON cannot hold.
    """
    if not isinstance(external_identifier, str) or not 1 <= len(external_identifier) <= 64:
        raise ValueError("external_identifier must be a string of 1 to 64 characters")
    check_amount(amount_minor, "amount_minor")
    if not isinstance(currency, str):
        raise ValueError("currency must be an ISO 4217 code")
    minor_unit_exponent(currency)  # raises UnknownCurrencyError, a ValueError
    if description is not None and not isinstance(description, str):
        raise ValueError("description must be a string or None")
    try:
        metadata_json = None if metadata is None else to_json(metadata)
    except TypeError as err:
        raise ValueError(f"metadata must be JSON serializable: {err}") from err
    return (kind.value, amount_minor, currency, plan_amount_minor, description, metadata_json)
