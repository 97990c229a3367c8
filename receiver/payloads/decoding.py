"""From the bytes on the wire to plain JSON values, refusing anything ambiguous.

Numbers that are not integers become :class:`~decimal.Decimal` (``parse_float``), so no float
is ever made. A repeated member name is refused rather than resolved: a signature verifier
that canonicalizes the body and this parser must never read two different values. Nesting is
bounded, so a hostile body cannot exhaust the stack here or in whatever stores ``extra`` later.

The decoder alone already gives plain JSON values (dict, list, str, int, bool, None, finite
Decimal), so the walk of :func:`plain_json` is needed for a decoded body only when its text
could hold what the decoder lets through: more than :data:`MAX_DEPTH` brackets, or a ``\\u``
escape in the surrogate range. A notification has neither, and skips the walk.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NoReturn

from payhooks.receiver.payloads.errors import InvalidPayloadError, MalformedJSONError

__all__ = ["MAX_DEPTH", "MAX_INTEGER_DIGITS", "decode_body", "plain_json"]

#: The deepest nesting of objects and arrays a body may have (the top-level object is 1).
#: A notification is two levels deep; the room above that is for unknown members.
MAX_DEPTH = 32

#: The longest integer literal accepted; Python's own limit (4300 digits) is far above any
#: real member and its error message talks about interpreter settings.
MAX_INTEGER_DIGITS = 64


class _DuplicateMemberError(ValueError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(name)


class _NumberTooLongError(ValueError):
    pass


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    # A name repeats: name the first one seen a second time (the loop is only for the message).
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _DuplicateMemberError(key)
        seen.add(key)
    raise AssertionError("unreachable: dict(pairs) dropped no name")  # pragma: no cover


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _NumberTooLongError(text)
    return int(text)


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object_without_duplicates,
    parse_float=Decimal,
    parse_int=_bounded_int,
    parse_constant=_refuse_constant,
)


def decode_body(body: bytes | bytearray | memoryview | str) -> Any:
    """Parse one JSON text into plain JSON values (as :func:`plain_json` gives them); bytes
    must be UTF-8 (RFC 8259), with no byte order mark.

    :raises MalformedJSONError: for anything that is not one unambiguous JSON text.
    :raises InvalidPayloadError: for JSON nested too deeply, or text that cannot be stored.
    """
    if isinstance(body, str):
        text = body
        # Text handed in as str may hold a lone surrogate of its own; UTF-8 bytes cannot.
        walk = not text.isascii()
    else:
        try:
            text = bytes(body).decode("utf-8")
        except UnicodeDecodeError as err:
            raise MalformedJSONError.whole_body(
                "The body is not UTF-8 text.", f"Invalid UTF-8 at byte {err.start}."
            ) from err
        walk = False
    try:
        value = _DECODER.decode(text)
    except _DuplicateMemberError as err:
        raise MalformedJSONError.whole_body(
            "The body repeats a member name, so its meaning is ambiguous.",
            f"The member name {err.name[:64]!r} appears twice in one object.",
        ) from err
    except _NumberTooLongError as err:
        raise MalformedJSONError.whole_body(
            "The body has a number too long to read.",
            f"An integer has more than {MAX_INTEGER_DIGITS} digits.",
        ) from err
    except RecursionError as err:
        raise _too_deep(()) from err
    except json.JSONDecodeError as err:
        raise MalformedJSONError.whole_body(
            "The body is not valid JSON.", f"{err.msg} at line {err.lineno}, column {err.colno}."
        ) from err
    except ValueError as err:  # a NaN or Infinity constant
        raise MalformedJSONError.whole_body("The body is not valid JSON.", str(err)) from err
    if walk or _may_need_walk(text):
        return plain_json(value)
    return value


def _may_need_walk(text: str) -> bool:
    """Whether the value decoded from ``text`` might hold what :func:`plain_json` refuses.

    Every container opens with a bracket, so a text with at most :data:`MAX_DEPTH` of them
    is nested no deeper than that (brackets inside strings only make the count safer). Once
    the text itself is known to be free of lone surrogates, one can only come from an escape
    ``\\uD800`` to ``\\uDFFF``; this test also matches ``\\uD000`` to ``\\uD7FF`` and valid
    pairs, which only costs the walk.
    """
    return (
        text.count("{") + text.count("[") > MAX_DEPTH
        or "\\ud" in text
        or "\\uD" in text
        or "\\u0000" in text
    )


def plain_json(value: Any, path: tuple[str, ...] = (), depth: int = 0) -> Any:
    """A copy of ``value`` made only of dict, list, str, int, bool, None and finite Decimal.

    Decoded bodies already are; a mapping handed in by a caller may hold floats (kept as the
    Decimal of their shortest repr, which is what their JSON text said), tuples, or things that
    are not JSON at all. Strings must be encodable as UTF-8 and free of NUL: an escaped lone
    surrogate (``"\\ud800"``) or NUL (``"\\u0000"``) is valid JSON syntax but cannot be stored
    as text (NUL: not on PostgreSQL, and the ledger answers the same on both engines).

    :raises InvalidPayloadError: naming the offending member's path.
    """
    if isinstance(value, str):
        _check_text(value, path)
        return value
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, Decimal | float):
        number = value if isinstance(value, Decimal) else _float_to_decimal(value, path)
        if not number.is_finite():
            raise InvalidPayloadError.at(path, "Not a finite number.")
        return number
    if isinstance(value, Mapping | list | tuple):
        if depth >= MAX_DEPTH:
            raise _too_deep(path)
        if isinstance(value, Mapping):
            copy: dict[str, Any] = {}
            for key, member in value.items():
                if not isinstance(key, str):
                    raise InvalidPayloadError.at(path, "Member names must be strings.")
                _check_text(key, path)
                copy[key] = plain_json(member, (*path, key), depth + 1)
            return copy
        return [plain_json(item, (*path, str(i)), depth + 1) for i, item in enumerate(value)]
    raise InvalidPayloadError.at(path, "Not a JSON value.")


def _float_to_decimal(value: float, path: tuple[str, ...]) -> Decimal:
    if not math.isfinite(value):
        raise InvalidPayloadError.at(path, "Not a finite number.")
    return Decimal(repr(value))


def _check_text(text: str, path: tuple[str, ...]) -> None:
    if "\x00" in text:  # the JSON escape \u0000: PostgreSQL's text cannot hold it
        raise InvalidPayloadError.at(path, "Text with a NUL character.")
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidPayloadError.at(path, "Text with an unpaired surrogate.") from err


def _too_deep(path: tuple[str, ...]) -> InvalidPayloadError:
    return InvalidPayloadError.at(path, f"Nested more than {MAX_DEPTH} levels deep.")
