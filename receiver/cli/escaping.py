"""Text from a webhook body made safe for where a report puts it.

An ``unexpected`` row's identifier and every transaction id come from notification bodies: the
signature says the service sent them, not that they are harmless. Each output gets its own rule,
and none changes what a tool reading the report exactly gets back:

- A spreadsheet runs a CSV cell that starts with ``=``, ``+``, ``-`` or ``@`` (and, in some, a
  tab or a carriage return) as a formula. :func:`csv_field` applies the OWASP rule to text
  cells: prefix a single quote and quote the cell. Numbers the report computed (amounts, counts)
  are written as they are: ``-5.00`` is a number a spreadsheet should add up, not a formula.
- A terminal obeys escape sequences, and a newline draws a row of its own in a table.
  :func:`terminal_text` shows every control character as a visible escape (``\\x1b``,
  ``\\n``), and a backslash as ``\\\\`` so that an escape on screen is never ambiguous.
- JSON (:func:`terminal_json`, for JSON Lines and documents alike) writes each character
  :func:`terminal_text` would escape as a JSON ``\\u`` escape: the document decodes to the
  exact values and shows inert on a terminal, and the characters JSON leaves raw that some line
  readers (Python's ``str.splitlines``, JavaScript before ES2019) treat as line breaks are
  escaped too, so one record stays on one line.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, Final

__all__ = ["FORMULA_TRIGGERS", "csv_field", "terminal_json", "terminal_text"]

#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP, "CSV
#: Injection").
FORMULA_TRIGGERS: Final = frozenset("=+-@\t\r")

# Bidirectional controls reorder what a terminal shows (the "Trojan Source" trick): an
# identifier could display as another one. They are format characters (Cf) with a few
# harmless relatives, so they are listed rather than matched by category.
_BIDI_CONTROLS: Final = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)

_NAMED_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}

# What terminal_text escapes that JSON (without ensure_ascii) leaves raw: C0 controls but the
# newline (JSON writes the others escaped, and an indented document's newlines are its own),
# DEL and the C1 controls, the line and paragraph separators, the bidirectional controls.
_UNSAFE_IN_JSON: Final = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029" + "".join(sorted(_BIDI_CONTROLS)) + "]"
)

# A CSV cell is quoted when it holds the delimiter, the quote or a line break.
_NEEDS_QUOTES: Final = re.compile('[,"\r\n]')


def _is_unsafe_on_a_terminal(char: str) -> bool:
    return (
        char in _NAMED_ESCAPES
        or char in _BIDI_CONTROLS
        or unicodedata.category(char) in ("Cc", "Zl", "Zp")
    )


def _escape(char: str) -> str:
    named = _NAMED_ESCAPES.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: str) -> str:
    """``text`` with every control character, line or paragraph separator and bidirectional
    control shown as an escape, and ``\\`` doubled; anything else (letters of any script) as is.
    """
    if not any(_is_unsafe_on_a_terminal(char) for char in text):
        return text  # the common case: nothing to copy
    return "".join(_escape(char) if _is_unsafe_on_a_terminal(char) else char for char in text)


def terminal_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON for a terminal: readable text of any script, but every control
    character, separator and bidirectional control as a ``\\uXXXX`` escape, so what a tool
    decodes is exact and what a terminal shows is inert. Compact unless ``indent``."""
    separators = None if indent else (",", ":")
    document = json.dumps(value, ensure_ascii=False, indent=indent, separators=separators)
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", document)


def csv_field(value: Any, *, text: bool) -> str:
    """One CSV field, quoted only where CSV needs it, as Python's ``csv`` module would write it.

    :param text: whether ``value`` is text that may come from outside. Such a field starting
        with one of :data:`FORMULA_TRIGGERS` gets a leading ``'`` and is always quoted, so a
        spreadsheet shows it as text. Numbers the report computed pass ``text=False``.
    """
    cell = "" if value is None else str(value)
    if text and cell[:1] in FORMULA_TRIGGERS:
        return '"' + ("'" + cell).replace('"', '""') + '"'
    if _NEEDS_QUOTES.search(cell):
        return '"' + cell.replace('"', '""') + '"'
    return cell
