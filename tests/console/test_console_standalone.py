"""``payhooks console``: a real process on loopback, its printed link, and the pages behind it.

Each test runs the command as a person does, in a subprocess, reads the link it prints, and
talks to it over HTTP with httpx.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from flask import Flask, request
from flask.testing import FlaskClient

from payhooks.storage import Ledger
from payhooks.verify import key_fingerprint
from tests.support.app import TEST_SECRET, BodyFactory, SignFunction
from tests.support.browser import BROWSER_TIMEOUT_MS
from tests.support.live_server import LiveServer
from tests.support.postgres import PostgresServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.system

_LINK = re.compile(
    r"(http://127\.0\.0\.1:(\d+)(/c/[A-Za-z0-9_-]{22}))/login\?token=([A-Za-z0-9_-]+)"
)


@dataclass
class Running:
    process: subprocess.Popen[str]
    #: ``http://127.0.0.1:PORT/c/RANDOM``
    base: str
    port: int
    #: ``/c/RANDOM``: the run's own path prefix, the session cookie's ``Path``
    prefix: str
    link: str
    printed: str


@contextlib.contextmanager
def _console(
    *args: str, run_as: list[str] | None = None, env: dict[str, str] | None = None
) -> Iterator[Running]:
    """``payhooks console ARGS`` until the block ends; its link read from what it prints.

    :param run_as: a command that runs the rest as another user (``setpriv ...``).
    :param env: variables besides ``PATH`` (``PAYHOOKS_SECRETS``).
    """
    process = subprocess.Popen(
        [*(run_as or []), sys.executable, "-m", "payhooks.receiver", "console", *args],
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        printed = ""
        assert process.stdout is not None
        for line in process.stdout:
            printed += line
            found = _LINK.search(line)
            if found:
                yield Running(process, found[1], int(found[2]), found[3], found[0], printed)
                return
        raise AssertionError(f"no link printed: {printed}{process.stderr.read()}")  # type: ignore[union-attr]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "payhooks.receiver", "console", *args],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def delivered(client: FlaskClient, sign: SignFunction, make_body: BodyFactory) -> str:
    """A notification for ``order-1`` received and stored in the test's ledger."""
    body = make_body(external_identifier="order-1")
    assert client.post("/payhooks/notifications", data=body, headers=sign(body)).status_code == 200
    return "order-1"


def _forbidden(answer: httpx.Response) -> bool:
    return answer.status_code == 403 and 'data-error="console_forbidden"' in answer.text


def test_the_printed_link_logs_in_once_and_shows_the_delivery_log(
    database: Path | str, delivered: str
) -> None:
    with _console("--database", str(database)) as console:
        with httpx.Client() as browser:
            login = browser.get(console.link)
            assert login.status_code == 303
            assert login.headers["location"] == f"{console.prefix}/deliveries"
            cookie = login.headers["set-cookie"]
            assert "HttpOnly" in cookie
            assert "SameSite=Strict" in cookie
            assert f"Path={console.prefix};" in cookie
            log = browser.get(f"{console.base}/deliveries")
            assert log.status_code == 200
            assert delivered in log.text
            one = browser.get(f"{console.base}/deliveries/1")  # no keys here: not checked
            assert one.status_code == 200
            assert delivered in one.text

        with httpx.Client() as second:
            again = second.get(console.link)
            assert _forbidden(again)
            assert delivered not in again.text
            assert _forbidden(second.get(f"{console.base}/deliveries"))


@pytest.fixture
def other_server(serve: Callable[[Flask], LiveServer]) -> tuple[LiveServer, list[str]]:
    """Another local server, on a port of its own: any page, each page's cookies kept (not
    the favicon's, which the browser asks for when it likes)."""
    cookies: list[str] = []
    app = Flask("another_local_server")

    @app.get("/", defaults={"path": ""})
    @app.get("/<path:path>")
    def any_page(path: str) -> str:
        if path != "favicon.ico":
            cookies.append(f"{request.path}: {request.headers.get('Cookie', '')}")
        return "<!doctype html><title>another server</title><p>hello"

    return serve(app), cookies


@pytest.mark.sqlite_only
def test_after_logging_in_the_browser_sends_the_session_to_no_other_local_server(
    database: Path, delivered: str, browser: Browser, other_server: tuple[LiveServer, list[str]]
) -> None:
    """Cookies ignore ports: what keeps the session from another server on 127.0.0.1 is its
    path, the run's random prefix. The browser visits that server's pages where a console is
    usually served; the last visit, at the run's own prefix (which only the console knows),
    shows that the browser would send the cookie there, so the others' silence means something."""
    other, cookies = other_server
    with _console("--database", str(database)) as console:
        context = browser.new_context()
        context.set_default_timeout(BROWSER_TIMEOUT_MS)
        try:
            page = context.new_page()
            page.goto(console.link)
            assert page.url == f"{console.base}/deliveries"
            assert delivered in page.content()
            (session,) = context.cookies()
            assert session["path"] == console.prefix
            assert session["name"].startswith("payhooks_console_")
            for path in ("/", "/console", "/console/deliveries", "/c/", "/c/other/deliveries"):
                page.goto(other.url + path)
            page.goto(f"{other.url}{console.prefix}/deliveries")
        finally:
            context.close()

    *elsewhere, at_the_prefix = cookies
    assert elsewhere == [
        f"{path}: "
        for path in ("/", "/console", "/console/deliveries", "/c/", "/c/other/deliveries")
    ]
    assert at_the_prefix.startswith(f"{console.prefix}/deliveries: {session['name']}=")


OTHER_SECRET = "whsec_" + base64.b64encode(b"a key that never signed anything").decode()


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    ("secrets", "evidence", "fingerprint"),
    [
        (TEST_SECRET, "verified", key_fingerprint("standard-webhooks", TEST_SECRET)),
        (OTHER_SECRET, "no_key_matches", None),
        (None, "not_checked", None),
    ],
    ids=["signing_key", "another_key", "no_key"],
)
def test_with_payhooks_secrets_a_delivery_s_signature_is_checked_again(
    database: Path,
    delivered: str,
    secrets: str | None,
    evidence: str,
    fingerprint: str | None,
) -> None:
    """As the console in the app does with its keys: the stored delivery was signed with
    TEST_SECRET; the command reads PAYHOOKS_SECRETS from its environment, never shows it."""
    with Ledger(database) as ledger:
        (stored,) = ledger.receiver.delivery_log().rows
    env = {} if secrets is None else {"PAYHOOKS_SECRETS": secrets}

    with _console("--database", str(database), env=env) as console, httpx.Client() as browser:
        assert browser.get(console.link).status_code == 303
        page = browser.get(f"{console.base}/deliveries/{stored.id}")

    assert page.status_code == 200
    assert f'data-evidence="{evidence}"' in page.text
    if fingerprint is not None:
        assert f'<code data-key="{fingerprint}">{fingerprint}</code>' in page.text
    if secrets is not None:
        assert f"<code>{key_fingerprint('standard-webhooks', secrets)}</code>" in page.text
        assert secrets.removeprefix("whsec_") not in page.text + console.printed


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    "path",
    [
        "/deliveries",
        "/deliveries/1",
        "/payments/order-1",
        "/login",
        "/login?token=",
        "/login?token=not-the-token",
    ],
)
def test_without_the_token_every_page_is_403_with_no_ledger_data(
    database: Path, delivered: str, path: str
) -> None:
    with _console("--database", str(database)) as console, httpx.Client() as browser:
        answer = browser.get(console.base + path)

        assert _forbidden(answer)
        assert delivered not in answer.text
        assert "set-cookie" not in answer.headers
        assert answer.headers["Content-Security-Policy"].startswith("default-src 'none'")


def _listening_addresses(port: int) -> set[str]:
    """The local addresses of sockets listening on ``port``, from the kernel's tables."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as lines:
            next(lines)
            for line in lines:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.partition(":")
                if int(hex_port, 16) == port and state == "0A":  # TCP_LISTEN
                    found.add(address)
    return found


@pytest.mark.sqlite_only
def test_it_listens_on_127_0_0_1_only_on_the_port_it_prints(database: Path, delivered: str) -> None:
    with _console("--database", str(database), "--port", "0") as console:
        assert console.port != 0
        assert _listening_addresses(console.port) == {"0100007F"}  # 127.0.0.1, nothing else


@pytest.mark.sqlite_only
def test_ctrl_c_stops_it_with_exit_code_0(database: Path, delivered: str) -> None:
    with _console("--database", str(database)) as console:
        console.process.send_signal(signal.SIGINT)
        out, err = console.process.communicate(timeout=60)

        assert console.process.returncode == 0
        assert "Traceback" not in err + out


#: Run as the unprivileged ``nobody`` (65534), with no supplementary groups.
_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.sqlite_only
def test_a_viewer_reads_a_ledger_file_its_user_may_not_write(
    database: Path, delivered: str
) -> None:
    """As an unprivileged user (root ignores permissions), on a read-only file in a folder it
    may not write: nothing is written, not even SQLite's ``-shm``."""
    if os.geteuid() != 0:
        pytest.skip("switching to another user needs root")
    folder = Path(tempfile.mkdtemp(prefix="payhooks-read-only-"))
    try:
        folder.chmod(0o755)
        copy = folder / "payhooks.db"
        with sqlite3.connect(database) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        source.close()
        target.close()
        copy.chmod(0o444)
        before = _digest(copy)

        with (
            _console("--database", str(copy), run_as=_NOBODY) as console,
            httpx.Client() as browser,
        ):
            assert "read-only" in console.printed
            assert browser.get(console.link).status_code == 303
            log = browser.get(f"{console.base}/deliveries")
            assert log.status_code == 200
            assert delivered in log.text

        assert _digest(copy) == before
        assert sorted(path.name for path in folder.iterdir()) == ["payhooks.db"]
    finally:
        shutil.rmtree(folder)


@pytest.mark.postgresql
def test_a_viewer_reads_through_a_postgresql_role_with_only_select(
    postgres_url: str,
    postgres_server: tuple[PostgresServer, str],
    sign: SignFunction,
    make_body: BodyFactory,
) -> None:
    import psycopg

    with Ledger(postgres_url) as ledger:
        ledger.expect_transaction("order-7", 2500, "CNY")
    server, _ = postgres_server
    name = postgres_url.rsplit("/", 1)[1]
    role = f"finance_{name}"
    server.execute(f"CREATE ROLE {role} LOGIN")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    reader = postgres_url.replace("postgresql://payhooks@", f"postgresql://{role}@")

    with _console("--database", reader) as console, httpx.Client() as browser:
        assert browser.get(console.link).status_code == 303
        page = browser.get(f"{console.base}/payments/order-7")
        assert page.status_code == 200
        assert "order-7" in page.text

    # The same role may not write: it really is a reader.
    with psycopg.connect(reader, autocommit=True) as conn, pytest.raises(psycopg.Error):
        conn.execute("DELETE FROM payments")


@pytest.mark.postgresql
def test_a_postgresql_ledger_not_migrated_is_exit_1_in_one_sentence(
    postgres_server: tuple[PostgresServer, str],
) -> None:
    server, _ = postgres_server
    url = server.create_database()
    try:
        done = _run("--database", url)
    finally:
        server.drop_database(url)

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "schema version 0" in done.stderr
    assert "migrate" in done.stderr


@pytest.mark.parametrize(
    ("make", "code", "says"),
    [
        ("missing", 2, "There is no ledger at"),
        ("other_application", 1, "is not a payhooks ledger"),
    ],
)
def test_a_file_that_is_not_a_ledger_is_refused_in_one_sentence(
    tmp_path: Path, make: str, code: int, says: str
) -> None:
    target = tmp_path / "other.db"
    if make == "other_application":
        with sqlite3.connect(target) as conn:
            conn.execute("CREATE TABLE notes (text TEXT)")
        conn.close()

    done = _run("--database", str(target))

    assert done.returncode == code
    assert says in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("who", ["", "x" * 65, "Ana\nroot", "\u202eAna"])
def test_who_must_be_a_plain_name(tmp_path: Path, who: str) -> None:
    done = _run("--database", str(tmp_path / "payhooks.db"), "--who", who)

    assert done.returncode == 2
    assert "--who must be a name" in done.stderr


@pytest.mark.parametrize("limit", ["0", "3600001", "two", "1.5"])
def test_a_time_limit_that_is_not_whole_ms_in_range_is_bad_usage(
    tmp_path: Path, limit: str
) -> None:
    done = _run("--database", str(tmp_path / "payhooks.db"), "--time-limit-ms", limit)

    assert done.returncode == 2
    assert "--time-limit-ms" in done.stderr
    assert "Traceback" not in done.stderr
