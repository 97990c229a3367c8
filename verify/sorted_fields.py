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
cap, a nesting limit checked *before* the parser recurses, no duplicate keys (two parsers could
disagree on which one counts), no ``NaN``/``Infinity`` tokens (not JSON), valid UTF-8, a top-level
object. Anything else raises ``ValueError``; the verifiers report it as ``invalid_signature``.
The parse serves only to build the string; nothing of it leaves this module.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from payhooks.verify.java_double import java_double_to_string

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_DEPTH",
    "SortedFieldsForm",
    "sorted_fields_string",
]

#: The receiver's default ``PAYHOOKS_MAX_BODY_BYTES``.
DEFAULT_MAX_BODY_BYTES = 65536
#: Objects and arrays nested deeper than this are refused; the service's bodies nest twice.
DEFAULT_MAX_DEPTH = 32

SortedFieldsForm = Literal["rsa", "hmac"]

# A JSON string token (escapes included) or a bracket. Unrolled so it runs in linear time.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def sorted_fields_string(
    body: bytes | str,
    *,
    form: SortedFieldsForm = "rsa",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> str:
    """Build the sorted-fields string of a JSON ``body`` (bytes as received, or text).

    :param form: ``"rsa"`` for ``k=v&k=v``, ``"hmac"`` for ``kvkv``.
    :raises ValueError: the body is over ``max_body_bytes``, not UTF-8, not JSON, nested
        deeper than ``max_depth``, has a duplicate key, or is not an object.
    """
    if form not in ("rsa", "hmac"):
        raise ValueError("form: must be 'rsa' or 'hmac'")
    text = _text(body, max_body_bytes)
    _check_depth(text, max_depth)
    try:
        document = json.loads(
            text,
            parse_float=_non_integer,
            parse_int=_integer,
            parse_constant=_refuse_constant,
            object_pairs_hook=_object,
        )
    except RecursionError as err:  # the depth check should prevent it; belt and braces
        raise ValueError("the body is nested too deeply") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"the body is not JSON ({err.msg} at offset {err.pos})") from err
    if not isinstance(document, dict):
        raise ValueError("the body is not a JSON object")
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


def _check_depth(text: str, max_depth: int) -> None:
    """Refuse nesting beyond ``max_depth`` with a scan that never recurses.

    Strings are matched whole, so brackets inside them do not count. On malformed input the
    scan can only over-count, which refuses a body the parser would refuse anyway.
    """
    depth = 0
    for match in _TOKENS.finditer(text):
        lexeme = match.group()
        if lexeme in "[{":
            depth += 1
            if depth > max_depth:
                raise ValueError(f"the body nests deeper than {max_depth} levels")
        elif lexeme in "]}":
            depth -= 1


def _non_integer(literal: str) -> str:
    return java_double_to_string(float(literal))


def _integer(literal: str) -> str:
    # JSON integers have no leading zeros, so the literal is already the decimal form; only
    # "-0" differs from what an integer type prints. No int(): huge values stay exact and
    # never meet Python's digit limit.
    return "0" if literal == "-0" else literal


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
        else:
            # Strings, and numbers already written by the parse hooks.
            parts.append(f"{key}{separator}{value}")
