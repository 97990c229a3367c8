"""Text from a webhook body made safe for where a report puts it.

An ``unexpected`` row's identifier and every transaction id come from notification bodies: the
signature says the service sent them, not that they are harmless. Each output gets its own rule,
and none changes what a tool reading the report exactly gets back:

- CSV: :func:`csv_field`, the OWASP rule against formulas, lives in
  :mod:`payhooks.receiver.report_csv`, which the console's CSV export shares; it is
  re-exported here.
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

from payhooks.receiver.report_csv import FORMULA_TRIGGERS, csv_field
from payhooks.receiver.visible_text import visible as terminal_text
from payhooks.receiver.visible_text import visible_json as terminal_json

__all__ = ["FORMULA_TRIGGERS", "csv_field", "terminal_json", "terminal_text"]
