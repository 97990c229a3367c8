"""What an unverified body's start names: for showing a refused request, never for acting.

A refused request (a signature that did not hold) is kept only as the start of its body, and
anyone could have sent it. A person looking at one still wants to know which payment it
claims to be about, so they can look that payment up. :func:`named_in_start` reads the
top-level members of a JSON object one at a time, stopping at the first thing that does not
parse (the cut at the kept length, or anything else), and keeps the payment identifier and the
service's transaction id when each is a string the ledger could hold. It never raises: a body
that says nothing readable names nothing.

Duplicated members (which the receiver refuses as ambiguous) name nothing either: the same
bytes must not be read as two payments.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from payhooks.receiver.payloads.schemas import (
    MAX_EXTERNAL_IDENTIFIER_LENGTH,
    MAX_TRANSACTION_ID_LENGTH,
)

__all__ = ["NamedInStart", "named_in_start"]

#: The members read, and the longest value each may have to be shown.
_WANTED: Final = {
    "merchant_transaction_id": MAX_EXTERNAL_IDENTIFIER_LENGTH,
    "ll_transaction_id": MAX_TRANSACTION_ID_LENGTH,
}
_DECODER: Final = json.JSONDecoder()
_SPACE: Final = " \t\n\r"


@dataclass(frozen=True, slots=True)
class NamedInStart:
    """What an unverified body claims, each None when it does not say (readably)."""

    #: ``merchant_transaction_id``: the merchant's payment identifier.
    external_identifier: str | None = None
    #: ``ll_transaction_id``: the service's transaction id.
    transaction_id: str | None = None


def named_in_start(start: bytes) -> NamedInStart:
    """The payment identifier and transaction id the top-level members of ``start`` name, read
    as far as the bytes parse; a value that repeats, is not a string, is empty or too long,
    holds a NUL or cannot be written as UTF-8 is left out."""
    seen: dict[str, Any] = {}
    repeated: set[str] = set()
    try:
        for name, value in _members(_decodable(start)):
            if name in _WANTED:
                if name in seen:
                    repeated.add(name)
                seen[name] = value
    except (ValueError, RecursionError):  # the cut, or bytes that are not JSON: stop there
        pass
    found = {
        name: value
        for name, value in seen.items()
        if name not in repeated and _plausible(value, _WANTED[name])
    }
    return NamedInStart(
        external_identifier=found.get("merchant_transaction_id"),
        transaction_id=found.get("ll_transaction_id"),
    )


def _decodable(start: bytes) -> str:
    """The longest prefix of ``start`` that is UTF-8 (a cut may split a character)."""
    try:
        return start.decode("utf-8")
    except UnicodeDecodeError as err:
        return start[: err.start].decode("utf-8")


def _members(text: str) -> Iterator[tuple[str, Any]]:
    """The top-level object's members in order, each as soon as its value is whole; stops at
    anything that is not the next member (raising ``ValueError`` where a value is cut)."""
    at = _skip_space(text, 0)
    if text[at : at + 1] != "{":
        return
    at += 1
    while True:
        at = _skip_space(text, at)
        if text[at : at + 1] != '"':
            return
        name, at = _DECODER.raw_decode(text, at)  # a string: the text[at] checked above
        at = _skip_space(text, at)
        if text[at : at + 1] != ":":
            return
        value, at = _DECODER.raw_decode(text, _skip_space(text, at + 1))
        yield name, value
        at = _skip_space(text, at)
        if text[at : at + 1] != ",":
            return
        at += 1


def _skip_space(text: str, at: int) -> int:
    """The index of the first character at or after ``at`` that is not JSON whitespace."""
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _plausible(value: Any, longest: int) -> bool:
    if not isinstance(value, str) or not 1 <= len(value) <= longest or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a \\ud800 escape
        return False
    return True
