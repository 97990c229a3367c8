"""Webhook-borne text on the console's pages: inert as markup (autoescaping) and honest to
read (control and bidirectional characters shown as escapes), from a real signed notification
to every page that shows it."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import quote

import pytest
from flask.testing import FlaskClient
from hypothesis import given
from hypothesis import strategies as st

from payhooks.console.filters import (
    indented_body,
    raw_body,
    shorten,
    utc,
    visible,
    visible_lines,
)
from payhooks.storage import Ledger
from tests.console.conftest import NOTIFY, VIEWER
from tests.support.app import BodyFactory, SignFunction
from tests.support.page_html import bytes_as_shown

#: Characters that must never reach a page raw: C0 (but the line breaks a ``<pre>`` keeps),
#: DEL, C1, the line separators and the bidirectional controls.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

#: A hostile identifier, and how a page must show it (escaped for HTML, after the visible
#: escapes).
HOSTILE = {
    "script": ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    "attribute": (
        '"><img src=x onerror=alert(1)>',
        "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;",
    ),
    "bidi": ("invoice-\u202egpj.exe", "invoice-\\u202egpj.exe"),
    "escapes": ("ord\x1b]8;;evil\x07er\x1b[2J", "ord\\x1b]8;;evil\\x07er\\x1b[2J"),
    "longest": ("<i>" * 21 + "x", "&lt;i&gt;" * 21 + "x"),
}
RAW_MARKUP = ("<script", "<img", "<i>", "onerror=alert(1)>")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("order-1", "order-1"),
        ("订单-一", "订单-一"),
        ("a\u202eb\u2066c\u200fd", "a\\u202eb\\u2066c\\u200fd"),
        ("\x1b[31mred\x00", "\\x1b[31mred\\x00"),
        ("c1\x9bmore\x85", "c1\\x9bmore\\x85"),
        ("line\nbreak\r\ttab", "line\\nbreak\\r\\ttab"),
        ("back\\x1b", "back\\\\x1b"),
        ("sep\u2028par\u2029", "sep\\u2028par\\u2029"),
        (None, ""),
        (25, "25"),
    ],
)
def test_visible_shows_controls_and_bidi_as_escapes_and_nothing_else(
    text: object, shown: str
) -> None:
    assert visible(text) == shown


def test_visible_lines_keeps_line_breaks_and_tabs_only() -> None:
    assert visible_lines("a\n\tb\r\x1b\u202e") == "a\n\tb\\r\\x1b\\u202e"


def test_shorten_cuts_what_is_shown_with_an_ellipsis() -> None:
    assert shorten("x" * 130, 120) == "x" * 119 + "\u2026"
    assert shorten("short\x1b") == "short\\x1b"


def test_utc_shows_any_zone_in_utc_to_the_second() -> None:
    moment = datetime(2026, 11, 21, 20, 0, 1, 999, tzinfo=timezone(timedelta(hours=8)))

    assert utc(moment) == "2026-11-21 12:00:01 UTC"
    assert utc(moment.astimezone(UTC)) == "2026-11-21 12:00:01 UTC"
    assert utc(None) == ""


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b'{"a":[1,2]}', '{\n  "a": [\n    1,\n    2\n  ]\n}'),
        (b'{"id": "a\\u202eb\\u001b"}', '{\n  "id": "a\\u202eb\\u001b"\n}'),
        ('{"id": "a\u202eb\u0085"}'.encode(), '{\n  "id": "a\\u202eb\\u0085"\n}'),
        (b'{"lone": "\\ud800"}', '{\n  "lone": "\\ud800"\n}'),
        (b"\xff\xfeok\\x41", None),
        (b"\x1b[2J\nnext", None),
        (b"[" * 100_000, None),
        # JSON nested deeper than the parser goes: only its bytes as received show.
        (b"[" * 5_000 + b"]" * 5_000, None),
        (b'{"amount": 25.00, "a": 1, "a": 2}', '{\n  "amount": 25.00,\n  "a": 1,\n  "a": 2\n}'),
    ],
)
def test_a_json_body_is_indented_as_the_same_json_and_any_other_body_is_not(
    body: bytes, shown: str | None
) -> None:
    text = indented_body(body)

    assert text == shown
    if text is not None:  # the same document, read as a parser would
        text.encode("utf-8")  # what the page can always send
        assert json.loads(text, parse_float=str) == json.loads(body, parse_float=str)


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b'{"a": "\\u00e9\\\\"}', "{&#34;a&#34;: &#34;\\u00e9\\\\&#34;}"),
        (
            b"\xff\xfeok\\x41",
            '<span class="mark mark-bytes" title="bytes that are not UTF-8, one \\xNN each">'
            "\\xff\\xfe</span>ok\\x41",
        ),
        (
            b"<script>\x1b[31m\r\n\t\xe2\x80\xae\xc2\x80",
            "&lt;script&gt;"
            '<span class="mark mark-controls" title="characters a page does not show raw, one '
            '\\uNNNN each">\\u001b</span>[31m<span class="mark mark-controls" title="characters '
            'a page does not show raw, one \\uNNNN each">\\u000d</span>\n\t<span class="mark '
            'mark-controls" title="characters a page does not show raw, one \\uNNNN each">'
            "\\u202e\\u0080</span>",
        ),
    ],
    ids=["backslashes-as-sent", "not-utf-8", "markup-and-controls"],
)
def test_a_body_as_received_shows_its_text_as_sent_and_marks_what_cannot_show_raw(
    body: bytes, shown: str
) -> None:
    assert str(raw_body(body)) == shown


@given(st.binary(max_size=300) | st.text(max_size=100).map(str.encode))
def test_a_body_as_received_gives_back_its_exact_bytes_and_nothing_unsafe(body: bytes) -> None:
    """Any bytes: the page's text, marks decoded, is the body byte for byte (the raw view is
    the signed bytes, never a re-serialization), and no character a page must not show raw, nor
    any markup but the marks, reaches it."""
    page = str(raw_body(body))

    assert bytes_as_shown(page) == body
    assert UNSAFE.search(page) is None
    assert (
        re.sub(r'<span class="mark mark-\w+" title="[^"<>]*">[^<]*</span>', "", page).count("<")
        == 0
    )


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_identifier_in_a_signed_notification_renders_inert_on_every_page(
    console: FlaskClient,
    make_body: BodyFactory,
    sign: SignFunction,
    ledger: Ledger,
    name: str,
) -> None:
    identifier, escaped = HOSTILE[name]
    body = make_body(external_identifier=identifier, transaction_id=f"ll-{name}")
    answer = console.post(NOTIFY, data=body, headers=sign(body))
    assert answer.status_code in (200, 422), answer.get_data(as_text=True)
    delivery = ledger.receiver.delivery_log().rows[0]
    assert delivery.external_identifier == identifier

    pages = {
        "log": "/console/deliveries?window=all",
        "filtered": f"/console/deliveries?identifier={quote(identifier, safe='')}",
        "delivery": f"/console/deliveries/{delivery.id}",
        "payment": f"/console/payments/{quote(identifier, safe='')}",
    }
    for page, path in pages.items():
        reply = console.get(path, headers=VIEWER)
        assert reply.status_code == 200, (page, reply.get_data(as_text=True))
        text = reply.get_data(as_text=True)
        assert escaped in text, (page, text)
        assert UNSAFE.search(text) is None, (page, text)
        for markup in RAW_MARKUP:
            assert markup not in text, (page, markup)
    log = console.get(pages["log"], headers=VIEWER).get_data(as_text=True)
    assert f'href="/console/payments/{quote(identifier, safe="")}"' in log
