"""Jinja filters that make webhook-borne text safe to *look at*, on top of autoescaping.

Autoescaping makes text inert as markup; it does not make it honest to read. A bidirectional
control (U+202E) in an identifier reorders the line it is on, so one payment can display as
another (the "Trojan Source" trick), and control characters are invisible. Each such character
is shown as a visible escape (``\\u202e``, ``\\x1b``), as the command line's reports show them,
and a backslash as ``\\\\`` so an escape on the page is never ambiguous. These filters return
plain strings: autoescaping still applies after them. They are registered on the app with a
``console_`` prefix.
"""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import UTC, datetime
from typing import Any, Final

from flask import Flask

__all__ = ["pretty_body", "register_filters", "shorten", "utc", "visible", "visible_lines"]

# Listed rather than matched by category: they are format characters (Cf) with harmless kin.
_BIDI_CONTROLS: Final = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
# In a JSON document as json.dumps writes it (ensure_ascii=False): what it leaves raw that a
# page must not show raw (and lone surrogates, which UTF-8 cannot even encode). JSON already
# escapes the C0 controls inside strings.
_UNSAFE_IN_JSON: Final = re.compile(
    "[\x7f-\x9f\u2028\u2029\ud800-\udfff" + "".join(sorted(_BIDI_CONTROLS)) + "]"
)


def _unsafe(char: str, keep: str) -> bool:
    if char in keep:
        return False
    return (
        char in _NAMED
        or char in _BIDI_CONTROLS
        or unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp")
    )


def _escaped(text: str, keep: str) -> str:
    if not any(_unsafe(char, keep) for char in text):
        return text
    out = []
    for char in text:
        if not _unsafe(char, keep):
            out.append(char)
        elif char in _NAMED:
            out.append(_NAMED[char])
        elif 0xDC80 <= ord(char) <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)


def visible(value: Any) -> str:
    """``value`` as one line of text: every control character, line or paragraph separator and
    bidirectional control as an escape, ``\\`` doubled; None as an empty string."""
    return "" if value is None else _escaped(str(value), keep="")


def visible_lines(value: Any) -> str:
    """As :func:`visible`, but keeping line breaks and tabs (a body shown in ``<pre>``)."""
    return "" if value is None else _escaped(str(value), keep="\n\t")


def shorten(value: Any, width: int = 120) -> str:
    """:func:`visible` text cut to ``width`` characters, ending in an ellipsis when cut."""
    text = visible(value)
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def utc(moment: datetime | None) -> str:
    """An aware time in UTC to the second (``2026-11-21 12:00:00 UTC``); empty for None."""
    if moment is None:
        return ""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pretty_body(body: bytes) -> tuple[str, bool]:
    """A delivery's body for reading, and whether it is JSON: indented JSON with the characters
    a page must not show raw as ``\\u`` escapes (so it still reads as the same JSON), or else
    the bytes as UTF-8 (undecodable bytes as ``\\x..``) with the same escapes as
    :func:`visible_lines`."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        text = body.decode("utf-8", errors="surrogateescape")
        return visible_lines(text), False
    pretty = json.dumps(document, ensure_ascii=False, indent=2)
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", pretty), True


def register_filters(app: Flask) -> None:
    """Add the filters to ``app``'s Jinja environment, each as ``console_<name>``."""
    for function in (visible, visible_lines, shorten, utc):
        app.add_template_filter(function, f"console_{function.__name__}")
