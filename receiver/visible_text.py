"""Webhook-borne text made honest to look at, on a terminal and on a page alike.

An identifier, an error or a whole body comes from outside: the signature says the service
sent it, not that it is harmless to show. Escaping for HTML (Jinja) or quoting for CSV makes
it inert for a parser; it does not make it honest to *read*. A control character drives a
terminal or hides, a bidirectional control (U+202E) reorders the line it is on so one payment
displays as another (the "Trojan Source" trick), and a line separator breaks a record in two.

One rule, used by the command line (:mod:`payhooks.receiver.cli.common`) and the console's
pages (:mod:`payhooks.console`): each such character is shown as a visible escape
(``\\x1b``, ``\\u202e``), a backslash as ``\\\\`` so an escape on screen is never ambiguous, and
a byte that is not UTF-8 as ``\\xNN``. JSON gets the same characters as ``\\u`` escapes, so it
decodes to the exact values; a body is laid out with its members in the order sent, a repeated
name kept and numbers as written (``25.00`` never becomes ``25.0``), so what a parser that
disagrees with ours would read is on screen too.

Pure functions of their arguments: no I/O, nothing from Flask or click.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, Final

__all__ = [
    "MARKED_BYTES",
    "MARKED_CONTROLS",
    "body_as_text",
    "json_lines_of",
    "marked_runs",
    "visible",
    "visible_json",
]

# Listed rather than matched by category: they are format characters (Cf) with harmless kin.
_BIDI_CONTROLS: Final = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
# What :func:`visible` escapes that ``json.dumps(ensure_ascii=False)`` leaves raw: C0 controls
# but the newline (JSON writes them escaped, and an indented document's newlines are its own),
# DEL and the C1 controls, the line and paragraph separators, the bidirectional controls, and
# lone surrogates (a byte that was not UTF-8, which UTF-8 cannot even encode).
_UNSAFE_IN_JSON: Final = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff" + "".join(sorted(_BIDI_CONTROLS)) + "]"
)

#: The kinds of :func:`marked_runs`' marks: bytes that are not UTF-8, and characters a page
#: must not show raw.
MARKED_BYTES: Final = "bytes"
MARKED_CONTROLS: Final = "controls"
# What a body shown as received marks: what :func:`visible` escapes but the backslash (shown as
# sent; a mark, not a doubled backslash, tells an escape from the text), the newline and the tab.
_MARKED: Final = re.compile(
    "(?P<bytes>[\udc80-\udcff]+)|(?P<controls>[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029"
    + "".join(sorted(_BIDI_CONTROLS))
    + "]+)"
)


def _unsafe(char: str, keep: str) -> bool:
    if char in keep:
        return False
    return (
        char in _NAMED
        or char in _BIDI_CONTROLS
        or unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp")
    )


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (errors="surrogateescape")
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, keep: str = "") -> str:
    """``text`` with every control character, line or paragraph separator, bidirectional
    control and lone surrogate shown as an escape, and ``\\`` doubled; letters of any script
    as they are. ``keep`` names characters to leave raw (``"\\n\\t"`` for a body in ``<pre>``).
    """
    if not any(_unsafe(char, keep) for char in text):
        return text  # the common case: nothing to copy
    return "".join(_escape(char) if _unsafe(char, keep) else char for char in text)


def visible_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON: readable text of any script, but every character :func:`visible`
    escapes as a ``\\uXXXX`` escape, so what a tool decodes is exact and what a person sees is
    inert. Compact (one line) unless ``indent``."""
    separators = None if indent else (",", ":")
    document = json.dumps(value, ensure_ascii=False, indent=indent, separators=separators)
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", document)


def body_as_text(body: bytes, *, keep: str = "") -> str:
    """A body that is not JSON, as UTF-8 text, each undecodable byte as ``\\xNN`` and
    everything else :func:`visible` escapes escaped (but ``keep``: one line unless it keeps
    ``"\\n"``)."""
    return visible(body.decode("utf-8", errors="surrogateescape"), keep=keep)


def marked_runs(body: bytes) -> list[tuple[str, str | None]]:
    """``body`` exactly as received, as UTF-8 text in runs: text as sent (kind None), and marks
    for what a page must not show raw, each run of one kind: bytes that are not UTF-8
    (:data:`MARKED_BYTES`, ``\\xNN`` each) and control characters, line or paragraph
    separators and bidirectional controls (:data:`MARKED_CONTROLS`, ``\\uNNNN`` each).

    Nothing else changes (a backslash stays one, ``\\r`` of a CRLF is marked, the newline
    stays), so the runs give back the bytes, mark by mark: the page's bytes as received are the
    bytes that were signed, never a re-serialization."""
    text = body.decode("utf-8", errors="surrogateescape")
    runs: list[tuple[str, str | None]] = []
    at = 0
    for match in _MARKED.finditer(text):
        if match.start() > at:
            runs.append((text[at : match.start()], None))
        if match.lastgroup == MARKED_BYTES:
            marks = "".join(f"\\x{ord(char) - 0xDC00:02x}" for char in match.group())
        else:
            marks = "".join(f"\\u{ord(char):04x}" for char in match.group())
        runs.append((marks, match.lastgroup))
        at = match.end()
    if at < len(text):
        runs.append((text[at:], None))
    return runs


class _Number(str):
    """A JSON number kept as the text it was sent as."""


class _Pairs(list[tuple[str, Any]]):
    """A JSON object's members in the order sent, repeated names kept."""


def json_lines_of(body: bytes) -> list[str] | None:
    """The body laid out as JSON, two spaces a level, one list item per line, every string
    written by :func:`visible_json` (so each line is safe as it is); None when it is not JSON.
    """
    try:
        parsed = json.loads(
            body,
            parse_float=_Number,
            parse_int=_Number,
            parse_constant=_Number,  # NaN, Infinity: shown as sent
            object_pairs_hook=_Pairs,
        )
    except (ValueError, RecursionError):
        return None
    try:
        return _laid_out(parsed, "")
    except RecursionError:  # nested deeper than laying out can go: shown as text instead
        return None


def _laid_out(value: Any, indent: str) -> list[str]:
    inner = indent + "  "
    if isinstance(value, list) and value:
        is_object = isinstance(value, _Pairs)
        lines = ["{" if is_object else "["]
        for position, item in enumerate(value):
            if is_object:
                name, member = item
                item_lines = _laid_out(member, inner)
                item_lines[0] = f"{inner}{visible_json(name)}: {item_lines[0]}"
            else:
                item_lines = _laid_out(item, inner)
                item_lines[0] = f"{inner}{item_lines[0]}"
            if position < len(value) - 1:
                item_lines[-1] += ","
            lines.extend(item_lines)
        lines.append(indent + ("}" if is_object else "]"))
        return lines
    if isinstance(value, list):
        return ["{}" if isinstance(value, _Pairs) else "[]"]
    if isinstance(value, _Number):
        return [str(value)]
    return [visible_json(value)]
