"""The sorted-fields string: what the service's SDK signs, rebuilt from the JSON body.

The SDK walks the parsed body and writes each scalar; we must produce the same characters.
The rules:

- Keys are taken in the order Java sorts strings: by UTF-16 code units. This differs from
  code point order once characters above U+FFFF meet characters from U+E000 to U+FFFF (a
  surrogate pair starts with 0xD8-0xDB, which sorts before U+FF5E).
- An object value is walked the same way, in place; its keys carry no prefix of the parent's.
- An array contributes only its object elements, each walked in order; scalars and nested
  arrays in it are skipped.
- ``null`` is skipped. A string is written as is, ``true``/``false`` as such, an integer in
  decimal (however large: it is never turned into a float), and any other number (one with a
  fraction or an exponent, ``1.00``, ``1e20``) as Java's ``Double.toString`` writes it.
- ``form="rsa"`` writes ``key=value`` joined by ``&``; ``form="hmac"`` writes ``keyvalue``
  with no separators.

Parsing an unauthenticated body is the risk here, so the parse is bounded and strict: a size
cap, a nesting limit and a member cap checked *before* the parser runs (one scan that never
recurses), no duplicate keys (two parsers could disagree on which one counts), no
``NaN``/``Infinity`` tokens (not JSON), valid UTF-8, a top-level object. Anything else raises
``ValueError``; the verifiers report it as ``invalid_signature``.

A number is kept as its literal (:class:`JsonNumber`) and only written the Java way when the
walk reaches it, so the numbers of an array (skipped) are never formatted. :func:`parse_body`
gives the parsed document too, for :mod:`payhooks.verify.notification_shape`, which must tell
a number from a string.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from payhooks.verify.java_double import java_double_to_string

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_MEMBERS",
    "JsonNumber",
    "SortedFieldsForm",
    "parse_body",
    "signed_string",
    "sorted_fields_string",
]

#: The receiver's default ``PAYHOOKS_MAX_BODY_BYTES``.
DEFAULT_MAX_BODY_BYTES = 65536
#: Objects and arrays nested deeper than this are refused; the service's bodies nest twice.
DEFAULT_MAX_DEPTH = 32
#: Bodies with more object members than this (at any depth) are refused before they are
#: parsed. A notification has about ten; the cap bounds what an unauthenticated body can make
#: the verifier sort and format (each member is a key to sort, maybe a number to write).
DEFAULT_MAX_MEMBERS = 256

SortedFieldsForm = Literal["rsa", "hmac"]

# A JSON string token, escapes included. Unrolled so it runs in linear time.
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


class JsonNumber(str):
    """A JSON number as its literal; :meth:`java` writes it as the service's SDK does.

    A ``str`` subclass, so the literal is kept exactly as sent and the document can still
    tell a number from a string (``type(value) is str`` is False).
    """

    __slots__ = ()

    def java(self) -> str:
        """The literal as the SDK writes it: integers in decimal, exactly (never via a float:
        huge values stay exact and never meet Python's digit limit), anything with a
        fraction or an exponent as Java's ``Double.toString``."""
        if "." in self or "e" in self or "E" in self:
            return java_double_to_string(float(self))
        # JSON integers have no leading zeros, so the literal is already the decimal form;
        # only "-0" differs from what an integer type prints.
        return "0" if self == "-0" else str(self)


def sorted_fields_string(
    body: bytes | str,
    *,
    form: SortedFieldsForm = "rsa",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_members: int = DEFAULT_MAX_MEMBERS,
) -> str:
    """Build the sorted-fields string of a JSON ``body`` (bytes as received, or text).

    :param form: ``"rsa"`` for ``k=v&k=v``, ``"hmac"`` for ``kvkv``.
    :raises ValueError: the body is over ``max_body_bytes``, not UTF-8, not JSON, nested
        deeper than ``max_depth``, has more than ``max_members`` members, has a duplicate
        key, or is not an object.
    """
    if form not in ("rsa", "hmac"):
        raise ValueError("form: must be 'rsa' or 'hmac'")
    document = parse_body(
        body, max_body_bytes=max_body_bytes, max_depth=max_depth, max_members=max_members
    )
    return signed_string(document, form)


def parse_body(
    body: bytes | str,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_members: int = DEFAULT_MAX_MEMBERS,
) -> dict[str, Any]:
    """The body as a document: dicts, lists, str, :class:`JsonNumber`, bool and None.

    :raises ValueError: as :func:`sorted_fields_string`.
    """
    text = _text(body, max_body_bytes)
    _check_structure(text, max_depth, max_members)
    try:
        document = json.loads(
            text,
            parse_float=JsonNumber,
            parse_int=JsonNumber,
            parse_constant=_refuse_constant,
            object_pairs_hook=_object,
        )
    except RecursionError as err:  # the depth check should prevent it; belt and braces
        raise ValueError("the body is nested too deeply") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"the body is not JSON ({err.msg} at offset {err.pos})") from err
    if not isinstance(document, dict):
        raise ValueError("the body is not a JSON object")
    return document


def signed_string(document: dict[str, Any], form: SortedFieldsForm) -> str:
    """The string the SDK signs for a document :func:`parse_body` made.

    :raises ValueError: a string holds a lone UTF-16 surrogate escape (not UTF-8 text).
    """
    parts: list[str] = []
    _walk(document, parts, "=" if form == "rsa" else "")
    result = ("&" if form == "rsa" else "").join(parts)
    try:
        result.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError("the body holds a lone UTF-16 surrogate escape") from err
    return result


def _text(body: bytes | str, max_body_bytes: int) -> str:
    too_large = ValueError(f"the body is larger than {max_body_bytes} bytes")
    if isinstance(body, str):
        if len(body.encode("utf-8", "surrogatepass")) > max_body_bytes:
            raise too_large
        return body
    if len(body) > max_body_bytes:
        raise too_large
    try:
        return bytes(body).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError("the body is not UTF-8") from err


def _check_structure(text: str, max_depth: int, max_members: int) -> None:
    """Refuse nesting beyond ``max_depth`` and more than ``max_members`` members (a colon
    outside strings is one member) with a scan that never recurses.

    Strings are matched whole and cut out first, so brackets and colons inside them do not
    count; then the colons are counted and the brackets walked. On malformed input the scan
    can only over-count, which refuses a body the parser would refuse anyway.
    """
    skeleton = _STRINGS.sub("", text)
    if skeleton.count(":") > max_members:
        raise ValueError(f"the body has more than {max_members} members")
    depth = 0
    for bracket in _BRACKETS.findall(skeleton):
        if bracket in "[{":
            depth += 1
            if depth > max_depth:
                raise ValueError(f"the body nests deeper than {max_depth} levels")
        else:
            depth -= 1


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON value")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("the body has a duplicate key in one object")
    return result


def _java_order(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly as Java compares strings: by code unit.
    return key.encode("utf-16-be", "surrogatepass")


def _walk(node: dict[str, Any], parts: list[str], separator: str) -> None:
    for key in sorted(node, key=_java_order):
        value = node[key]
        if value is None:
            continue
        if isinstance(value, dict):
            _walk(value, parts, separator)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _walk(item, parts, separator)
        elif value is True:
            parts.append(f"{key}{separator}true")
        elif value is False:
            parts.append(f"{key}{separator}false")
        elif type(value) is JsonNumber:
            parts.append(f"{key}{separator}{value.java()}")
        else:
            parts.append(f"{key}{separator}{value}")
