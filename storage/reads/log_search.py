"""The delivery log's narrower filters: our error code, and the free-text search.

Kept apart from :mod:`payhooks.storage.reads.delivery_log` so its query stays one screen: each
function here adds constant SQL fragments and their parameters, never a value spliced into the
text (the search looks a transaction id up first, and passes what it found as parameters). Both
engines compare text byte by byte (SQLite's ``BINARY``, PostgreSQL's ``COLLATE "C"`` on every
column), so a prefix is a range an index serves on either.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Any, Final

from payhooks.storage.sql import Connection

__all__ = [
    "MAX_PAYMENTS_PER_TRANSACTION",
    "DeliveryErrorCode",
    "error_clause",
    "named_by_transaction",
    "prefix_bounds",
    "text_clause",
]

#: The most payments one transaction id is looked up as: one in practice (an outcome's and the
#: service's list name the same payment); the cap keeps a forged or odd ledger's search small.
MAX_PAYMENTS_PER_TRANSACTION: Final = 20

# Both lookups are on an index's leading column: outcomes' UNIQUE (transaction_id,
# payment_status) and service_transactions' primary key.
_NAMED_BY_TRANSACTION = (
    "SELECT external_identifier FROM outcomes WHERE transaction_id = ? "
    "UNION SELECT external_identifier FROM service_transactions WHERE transaction_id = ? "
    "ORDER BY 1 LIMIT ?"
)


class DeliveryErrorCode(StrEnum):
    """What went wrong with a stored delivery, as the log filters on it: the stable codes of
    ``docs/errors.md`` a delivery row keeps (its status), and the signal receivers' failure."""

    #: Another delivery recorded this outcome differently; ``error`` names the fields.
    CONFLICTING_OUTCOME = "conflicting_outcome"
    #: The body was not JSON (answered 400 ``malformed_json``).
    MALFORMED_JSON = "malformed_json"
    #: The body was not a notification (answered 422 ``invalid_payload``).
    INVALID_PAYLOAD = "invalid_payload"
    #: Processing failed on our side (answered 503 ``processing_error``).
    PROCESSING_ERROR = "processing_error"
    #: Recorded, but a signal receiver raised (the delivery's ``signal_error``).
    SIGNAL_ERROR = "signal_error"


def error_clause(code: DeliveryErrorCode, clauses: list[str], params: list[Any]) -> None:
    """Only deliveries with ``code``. A status code also excludes ``processed`` in so many
    words, so the partial index ``deliveries_status`` serves it."""
    if code is DeliveryErrorCode.SIGNAL_ERROR:
        clauses.append("d.signal_error IS NOT NULL")
        return
    clauses.append("d.status = ? AND d.status <> 'processed'")
    params.append(code.value)


def prefix_bounds(prefix: str) -> tuple[str, str | None]:
    """The range of every text starting with ``prefix``: from ``prefix`` itself up to, not
    including, the first text after all of them (None when there is none). UTF-8's byte order
    is code point order, so the bound is ``prefix`` with its last code point stepped up."""
    stem = prefix.rstrip(chr(sys.maxunicode))
    if not stem:
        return prefix, None
    following = ord(stem[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates are never text: step over them
        following = 0xE000
    return prefix, stem[:-1] + chr(following)


def named_by_transaction(conn: Connection, transaction_id: str) -> list[str]:
    """The payments the service's transaction ``transaction_id`` belongs to: those its
    outcomes name and the one ``payhooks sync`` listed it under (exact ids, at most
    :data:`MAX_PAYMENTS_PER_TRANSACTION`)."""
    rows = conn.execute(
        _NAMED_BY_TRANSACTION, (transaction_id, transaction_id, MAX_PAYMENTS_PER_TRANSACTION)
    ).fetchall()
    return [row[0] for row in rows]


def text_clause(conn: Connection, text: str, clauses: list[str], params: list[Any]) -> None:
    """The free-text search: a payment whose identifier starts with ``text``; the delivery
    key ``text`` (the service's ``webhook-id``) with the deliveries that reused it with other
    bytes (stored as ``<key>#<sha256>``); or every delivery of the payments the service's
    transaction id ``text`` belongs to (:func:`named_by_transaction`, looked up first in
    ``conn``, so the search stays index lookups on both engines: no subquery in an ``OR``,
    which PostgreSQL would answer by reading every delivery). All are index ranges or lookups
    (``deliveries_identifier``, the key's unique index); error texts are not searched, as that
    would read every row."""
    low, high = prefix_bounds(text)
    identifier = "d.external_identifier >= ?" + (
        "" if high is None else " AND d.external_identifier < ?"
    )
    named = [each for each in named_by_transaction(conn, text) if not each.startswith(text)]
    payments = f" OR d.external_identifier IN ({', '.join('?' for _ in named)})" if named else ""
    clauses.append(
        f"(({identifier}) OR d.dedupe_key = ? OR (d.dedupe_key > ? AND d.dedupe_key < ?){payments})"
    )
    params.extend([low] if high is None else [low, high])
    params.extend([text, text + "#", text + "$"])
    params.extend(named)
