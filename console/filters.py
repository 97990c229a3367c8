"""Jinja filters that make webhook-borne text safe to *look at*, on top of autoescaping.

Autoescaping makes text inert as markup; it does not make it honest to read. A bidirectional
control (U+202E) in an identifier reorders the line it is on, so one payment can display as
another (the "Trojan Source" trick), and control characters are invisible. These filters show
each such character as a visible escape, by the rule the command line's reports use
(:mod:`payhooks.receiver.visible_text`). They return plain strings: autoescaping still applies
after them. They are registered on the app with a ``console_`` prefix.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Flask

from payhooks.receiver.visible_text import body_as_text, json_lines_of
from payhooks.receiver.visible_text import visible as _visible

__all__ = ["pretty_body", "register_filters", "shorten", "utc", "visible", "visible_lines"]


def visible(value: Any) -> str:
    """``value`` as one line of text: every control character, line or paragraph separator and
    bidirectional control as an escape, ``\\`` doubled; None as an empty string."""
    return "" if value is None else _visible(str(value))


def visible_lines(value: Any) -> str:
    """As :func:`visible`, but keeping line breaks and tabs (a body shown in ``<pre>``)."""
    return "" if value is None else _visible(str(value), keep="\n\t")


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
    """A delivery's body for reading, and whether it is JSON: laid out with its members in the
    order sent, a repeated name kept and numbers as written (``25.00`` never ``25.0``), the
    characters a page must not show raw as ``\\u`` escapes; or else the bytes as UTF-8 with
    their line breaks and tabs (in ``<pre>``), undecodable bytes as ``\\x..``."""
    lines = json_lines_of(body)
    if lines is None:
        return body_as_text(body, keep="\n\t"), False
    return "\n".join(lines), True


def register_filters(app: Flask) -> None:
    """Add the filters to ``app``'s Jinja environment, each as ``console_<name>``."""
    for function in (visible, visible_lines, shorten, utc):
        app.add_template_filter(function, f"console_{function.__name__}")
