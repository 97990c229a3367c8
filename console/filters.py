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
from markupsafe import Markup, escape

from payhooks.receiver.visible_text import (
    MARKED_BYTES,
    MARKED_CONTROLS,
    json_lines_of,
    marked_runs,
)
from payhooks.receiver.visible_text import visible as _visible

__all__ = [
    "indented_body",
    "raw_body",
    "register_filters",
    "shorten",
    "utc",
    "visible",
    "visible_lines",
]


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


def indented_body(body: bytes) -> str | None:
    """A JSON body laid out for reading: its members in the order sent, a repeated name kept
    and numbers as written (``25.00`` never ``25.0``), the characters a page must not show raw
    as ``\\u`` escapes; None when the body is not JSON (its bytes as received say it all)."""
    lines = json_lines_of(body)
    return None if lines is None else "\n".join(lines)


#: What each kind of mark in a body as received stands for (its ``title``).
_MARK_TITLES = {
    MARKED_BYTES: "bytes that are not UTF-8, one \\xNN each",
    MARKED_CONTROLS: "characters a page does not show raw, one \\uNNNN each",
}


def raw_body(body: bytes) -> Markup:
    """A body exactly as received, for ``<pre>``: its text as sent, escaped for HTML; each run
    of bytes that are not UTF-8 or of control characters in a ``<span class="mark">`` that says
    which (:func:`~payhooks.receiver.visible_text.marked_runs`), so no escape on screen is
    mistaken for the service's own backslash."""
    return Markup("").join(
        escape(text)
        if kind is None
        else Markup('<span class="mark mark-{}" title="{}">{}</span>').format(
            kind, _MARK_TITLES[kind], text
        )
        for text, kind in marked_runs(body)
    )


def register_filters(app: Flask) -> None:
    """Add the filters to ``app``'s Jinja environment, each as ``console_<name>``."""
    for function in (visible, visible_lines, shorten, utc):
        app.add_template_filter(function, f"console_{function.__name__}")
