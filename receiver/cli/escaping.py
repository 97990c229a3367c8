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

The last two are :mod:`payhooks.receiver.visible_text`'s rule under the command line's names:
the console's pages show the same text the same way.
"""

from __future__ import annotations

import re
from typing import Any, Final

from payhooks.receiver.visible_text import visible as terminal_text
from payhooks.receiver.visible_text import visible_json as terminal_json

__all__ = ["FORMULA_TRIGGERS", "csv_field", "terminal_json", "terminal_text"]

#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP, "CSV
#: Injection").
FORMULA_TRIGGERS: Final = frozenset("=+-@\t\r")

# A CSV cell is quoted when it holds the delimiter, the quote or a line break.
_NEEDS_QUOTES: Final = re.compile('[,"\r\n]')


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
