"""Hostile requests over real loopback sockets: what Flask's test client cannot send.

Raw bytes go to two servers, werkzeug's (what ``payhooks serve`` runs) and gunicorn with sync
workers (what a merchant deploys): huge and numerous headers, broken or conflicting
``Content-Length``, truncated bodies, chunked bodies (well formed, malformed, truncated, over
the cap), junk instead of HTTP, raw non-ASCII header bytes. Whatever the server or the
receiver answers, it is never a 5xx, never a 2xx for bytes the signature does not cover, and
nothing unauthenticated is stored; after each one, a normal delivery still gets through.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import socket
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.storage import Ledger
from payhooks.verify import get_signer
from payhooks.verify.keys import decode_whsec
from tests.support.app import TEST_SECRET
from tests.support.gunicorn_server import GunicornServer
from tests.support.live_server import LiveServer

NOTIFY = "/payhooks/notifications"
SIGNER = get_signer("standard-webhooks", TEST_SECRET)

_STATUS = re.compile(rb"^HTTP/1\.[01] (\d{3})", re.MULTILINE)


class Target:
    """A receiver listening on a loopback port, and its database file."""

    def __init__(self, name: str, port: int, database: Path | str) -> None:
        self.name = name
        self.port = port
        self.database = database
        self._sent = 0

    def exchange(self, data: bytes, *, half_close: bool = True, timeout: float = 10) -> bytes:
        """Send raw bytes, optionally end our side, and read until the server closes."""
        received: list[bytes] = []
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            try:
                sock.sendall(data)
                if half_close:
                    sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the server refused early and closed; read what it said
            while True:
                try:
                    chunk = sock.recv(65536)
                except (ConnectionResetError, TimeoutError):
                    break
                if not chunk:
                    break
                received.append(chunk)
        return b"".join(received)

    def _rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` from the receiver's ledger, a SQLite file or a PostgreSQL URL."""
        if isinstance(self.database, str):
            with psycopg.connect(self.database) as pg:
                return pg.execute(sql).fetchall()  # type: ignore[arg-type,unused-ignore]
        conn = sqlite3.connect(self.database)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    def deliveries(self) -> int:
        return int(self._rows("SELECT COUNT(*) FROM deliveries")[0][0])

    def stored_bodies(self) -> list[bytes]:
        return [bytes(row[0]) for row in self._rows("SELECT body FROM deliveries ORDER BY id")]

    def assert_still_serving(self) -> None:
        """One normal signed delivery gets 200 and is stored."""
        self._sent += 1
        body = notification(f"ll-check-{self._sent}")
        before = self.deliveries()
        answer = self.exchange(request(body, SIGNER.sign(body)))
        assert statuses(answer)[:1] == [200], answer[:500]
        assert self.deliveries() == before + 1


def notification(transaction_id: str = "ll-1") -> bytes:
    return json.dumps(
        {
            "ll_transaction_id": transaction_id,
            "merchant_transaction_id": "order-http",
            "payment_data": {
                "payment_status": "PS",
                "payment_amount": "25.00",
                "payment_currency_code": "CNY",
                "payment_time": "20261121120000",
            },
        }
    ).encode()


def request(
    body: bytes,
    headers: dict[str, str] | None = None,
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
    length: bytes | None = None,
    target: bytes = NOTIFY.encode(),
) -> bytes:
    """A raw HTTP/1.1 POST; ``length`` overrides ``Content-Length`` (b"" leaves it out)."""
    lines = [b"POST " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    lines += [f"{name}: {value}".encode("latin-1") for name, value in (headers or {}).items()]
    lines += [name + b": " + value for name, value in extra or []]
    content_length = str(len(body)).encode() if length is None else length
    if content_length:
        lines.append(b"Content-Length: " + content_length)
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def chunked(*chunks: bytes, end: bool = True) -> bytes:
    encoded = b"".join(f"{len(c):x}".encode() + b"\r\n" + c + b"\r\n" for c in chunks)
    return encoded + (b"0\r\n\r\n" if end else b"")


def statuses(answer: bytes) -> list[int]:
    """The status of every response in what the server sent back (pipelined or not)."""
    return [int(code) for code in _STATUS.findall(answer)]


def assert_no_server_error(answer: bytes) -> list[int]:
    found = statuses(answer)
    assert all(code < 500 for code in found), answer[:1000]
    return found


@pytest.fixture(scope="module")
def gunicorn_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    folder = tmp_path_factory.mktemp("gunicorn")
    database = folder / "hostile.db"
    Ledger(database).close()
    env = {
        "PAYHOOKS_DATABASE": str(database),
        "PAYHOOKS_SECRETS": TEST_SECRET,
        "SECRET_KEY": "hostile-http",
    }
    demo_app = "payhooks.receiver.demo:create_app()"
    with GunicornServer(demo_app, env=env, cwd=folder, workers=2) as server:
        yield Target("gunicorn", server.port, database)


@pytest.fixture(params=["werkzeug", "gunicorn"])
def target(
    request: pytest.FixtureRequest,
    app: Flask,
    serve: Callable[[Flask], LiveServer],
    database: Path | str,
) -> Target:
    if request.param == "gunicorn":
        found: Target = request.getfixturevalue("gunicorn_target")
        return found
    Ledger(database).close()
    live = serve(app)
    return Target("werkzeug", live.server.server_port, database)


# -- headers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param([(b"X-Padding", b"a" * 100_000)], id="one-100k-header"),
        pytest.param([(f"X-H{n}".encode(), b"v") for n in range(500)], id="500-headers"),
        pytest.param([(b"webhook-signature", b"v1," + b"A" * 7000)], id="long-signature"),
        pytest.param([(b"X-Bytes", bytes(range(128, 256)))], id="raw-8-bit-value"),
        pytest.param([(b"X-Folded", b"a\r\n continued")], id="obsolete-line-folding"),
        pytest.param([(b"Bad Name", b"v")], id="space-in-name"),
    ],
)
def test_odd_headers_never_get_a_server_error_and_store_nothing_unsigned(
    target: Target, extra: list[tuple[bytes, bytes]]
) -> None:
    body = notification("ll-odd-headers")
    before = target.deliveries()

    found = assert_no_server_error(target.exchange(request(body, extra=extra)))

    assert 200 not in found
    assert target.deliveries() == before
    target.assert_still_serving()


def test_raw_8_bit_bytes_in_the_signed_headers_are_an_invalid_signature(target: Target) -> None:
    """The server reads header bytes as latin-1; a ``webhook-id`` signed over other bytes is
    simply not the one that was signed."""
    body = notification("ll-8-bit")
    headers = SIGNER.sign(body, webhook_id="msg_plain")
    raw_id = "msg_café".encode()  # UTF-8 on the wire
    key = decode_whsec(TEST_SECRET, argument="key")
    timestamp = headers["webhook-timestamp"].encode()
    mac = hmac.digest(key, raw_id + b"." + timestamp + b"." + body, hashlib.sha256)
    extra = [
        (b"webhook-id", raw_id),
        (b"webhook-timestamp", timestamp),
        (b"webhook-signature", b"v1," + base64.b64encode(mac)),
    ]
    before = target.deliveries()

    answer = target.exchange(request(body, extra=extra))

    assert statuses(answer) == [401]
    assert b"invalid_signature" in answer
    assert target.deliveries() == before


def test_a_huge_request_line_never_gets_a_server_error(target: Target) -> None:
    body = notification("ll-long-url")
    long_target = NOTIFY.encode() + b"?" + b"q" * 100_000

    found = assert_no_server_error(
        target.exchange(request(body, SIGNER.sign(body), target=long_target))
    )

    assert 200 not in found
    target.assert_still_serving()


# -- Content-Length ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "length",
    [b"abc", b"-1", b"+5", b"1e3", b"0x10", b"99999999999999999999999", b"5, 5"],
)
def test_a_content_length_that_is_not_a_number_gets_no_2xx(target: Target, length: bytes) -> None:
    body = notification("ll-bad-length")
    before = target.deliveries()

    found = assert_no_server_error(target.exchange(request(body, SIGNER.sign(body), length=length)))

    assert 200 not in found
    assert target.deliveries() == before
    target.assert_still_serving()


def test_two_content_lengths_that_disagree_never_store_unsigned_bytes(target: Target) -> None:
    """gunicorn refuses the request; werkzeug's development server believes the last length.
    Either way only the exact signed bytes may be stored."""
    body = notification("ll-two-lengths")
    extra = [(b"Content-Length", str(len(body) - 10).encode())]
    before = target.deliveries()

    found = assert_no_server_error(target.exchange(request(body, SIGNER.sign(body), extra=extra)))

    if 200 in found:
        assert target.stored_bodies()[before:] == [body]
    else:
        assert target.deliveries() == before
    target.assert_still_serving()


@pytest.mark.parametrize("sent", [0, 1, 60, -1])
def test_a_body_cut_short_is_never_stored(target: Target, sent: int) -> None:
    """The sender announces the whole signed body, sends only part of it and closes its side.
    The part that came is not what was signed; no server may pass it off as the body (nor,
    when its reader raises, turn that into a 500)."""
    body = notification("ll-truncated")
    raw = request(body[:sent], SIGNER.sign(body), length=str(len(body)).encode())
    before = target.deliveries()

    answer = target.exchange(raw)

    assert statuses(answer) in ([400], [401]), answer[:500]
    assert target.deliveries() == before
    target.assert_still_serving()


def test_a_body_longer_than_announced_is_read_only_as_far_as_announced(target: Target) -> None:
    """Bytes past ``Content-Length`` are the next request, not more body: the signature over
    the whole body fails on the announced part, and the rest is not a request."""
    body = notification("ll-overlong")
    before = target.deliveries()

    answer = target.exchange(request(body, SIGNER.sign(body), length=str(len(body) - 20).encode()))

    found = assert_no_server_error(answer)
    assert found[:1] == [401]
    assert 200 not in found
    assert target.deliveries() == before
    target.assert_still_serving()


# -- chunked bodies ---------------------------------------------------------------------------


def test_a_well_formed_chunked_body_is_received_whole(target: Target) -> None:
    body = notification("ll-chunked")
    extra = [(b"Transfer-Encoding", b"chunked")]
    before = target.deliveries()

    answer = target.exchange(
        request(
            chunked(body[:10], body[10:50], body[50:]), SIGNER.sign(body), extra=extra, length=b""
        )
    )

    assert statuses(answer) == [200], answer[:500]
    assert target.deliveries() == before + 1


# What a malformed or truncated chunked body may be answered: refused as bad framing (400), as
# a body not signed (401) or as too large (413), never stored. A sender that stopped inside a
# chunk gets exactly 400: nothing it signed was received in full. (werkzeug's development server
# used to hand such a body over with the missing bytes counted as read, a heap over-read in
# CPython's RawIOBase.read, answered 401 at best or 413 for the huge size.)
REFUSED = ([400], [401], [413])
CUT_SHORT = ([400],)


@pytest.mark.parametrize(
    ("framing", "answers"),
    [
        pytest.param(lambda b: b"zz\r\n" + b + b"\r\n0\r\n\r\n", REFUSED, id="size-not-hex"),
        pytest.param(lambda b: b"-5\r\n" + b + b"\r\n0\r\n\r\n", REFUSED, id="negative-size"),
        pytest.param(
            lambda b: f"{len(b) + 40:x}\r\n".encode() + b, CUT_SHORT, id="chunk-cut-short"
        ),
        pytest.param(lambda b: chunked(b, end=False), REFUSED, id="no-last-chunk"),
        pytest.param(
            lambda b: f"{len(b):x}\r\n".encode() + b + b"XX0\r\n\r\n", REFUSED, id="no-crlf"
        ),
        pytest.param(lambda b: b"f" * 40 + b"\r\n" + b + b"\r\n0\r\n\r\n", REFUSED, id="huge-size"),
        pytest.param(lambda b: b"f" * 40 + b"\r\n" + b, CUT_SHORT, id="huge-size-cut-short"),
    ],
)
def test_a_malformed_or_truncated_chunked_body_is_never_stored(
    target: Target, framing: Callable[[bytes], bytes], answers: tuple[list[int], ...]
) -> None:
    body = notification("ll-bad-chunks")
    extra = [(b"Transfer-Encoding", b"chunked")]
    before = target.deliveries()

    answer = target.exchange(request(framing(body), SIGNER.sign(body), extra=extra, length=b""))

    assert statuses(answer) in answers, answer[:500]
    assert target.deliveries() == before
    target.assert_still_serving()


def test_a_chunked_body_over_the_cap_is_refused_with_413(target: Target) -> None:
    body = b'{"pad": "' + b"x" * 70_000 + b'"}'
    extra = [(b"Transfer-Encoding", b"chunked")]
    before = target.deliveries()

    answer = target.exchange(
        request(
            chunked(*[body[i : i + 8192] for i in range(0, len(body), 8192)]),
            SIGNER.sign(body),
            extra=extra,
            length=b"",
        )
    )

    assert statuses(answer)[:1] == [413], answer[:500]
    assert target.deliveries() == before
    target.assert_still_serving()


def test_chunked_together_with_a_content_length_gets_no_2xx_for_unsigned_bytes(
    target: Target,
) -> None:
    """Both framings at once is how requests are smuggled; whichever the server believes, the
    receiver may only accept exactly the signed bytes."""
    body = notification("ll-te-cl")
    smuggled = chunked(body)
    signed_for_other = SIGNER.sign(smuggled)  # a signature over the framing, not the body
    extra = [(b"Transfer-Encoding", b"chunked")]
    before = target.deliveries()

    found = assert_no_server_error(
        target.exchange(request(smuggled, signed_for_other, extra=extra))
    )

    assert 200 not in found
    assert target.deliveries() == before
    target.assert_still_serving()


# -- not HTTP at all --------------------------------------------------------------------------


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    junk=st.one_of(
        st.binary(min_size=1, max_size=4096),
        st.binary(max_size=2048).map(lambda b: b"POST " + NOTIFY.encode() + b" HTTP/1.1\r\n" + b),
    )
)
def test_junk_on_the_socket_never_gets_a_server_error_or_a_stored_delivery(
    target: Target, junk: bytes
) -> None:
    before = target.deliveries()

    found = assert_no_server_error(target.exchange(junk, timeout=5))

    assert 200 not in found
    assert target.deliveries() == before


def test_the_server_still_serves_after_the_junk(target: Target) -> None:
    for junk in (b"\x00" * 100, b"GET / HTTP/9.9\r\n\r\n", b"\r\n" * 1000, b"POST\r\n\r\n"):
        assert_no_server_error(target.exchange(junk, timeout=5))
    target.assert_still_serving()
