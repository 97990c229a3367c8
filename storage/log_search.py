"""The delivery log's narrower filters: our error code, and the free-text search.

Kept apart from :mod:`payhooks.storage.delivery_log` so its query stays one screen: each
function here adds constant SQL fragments and their parameters, never a value spliced into the
text. Both engines compare text byte by byte (SQLite's ``BINARY``, PostgreSQL's
``COLLATE "C"`` on every column), so a prefix is a range an index serves on either.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Any

__all__ = ["DeliveryErrorCode", "error_clause", "prefix_bounds", "text_clause"]


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


def text_clause(text: str, clauses: list[str], params: list[Any]) -> None:
    """The free-text search: a payment whose identifier starts with ``text``, or the delivery
    key ``text`` (the service's ``webhook-id``) with the deliveries that reused it with other
    bytes (stored as ``<key>#<sha256>``). Both are index ranges
    (``deliveries_identifier``, the key's unique index); error texts are not searched, as that
    would read every row."""
    low, high = prefix_bounds(text)
    identifier = "d.external_identifier >= ?" + (
        "" if high is None else " AND d.external_identifier < ?"
    )
    clauses.append(
        f"(({identifier}) OR d.dedupe_key = ? OR (d.dedupe_key > ? AND d.dedupe_key < ?))"
    )
    params.extend([low] if high is None else [low, high])
    params.extend([text, text + "#", text + "$"])
