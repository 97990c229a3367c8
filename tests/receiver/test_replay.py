"""The replay tool against a real receiver over loopback HTTP: the Python API and the command."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from payhooks.receiver.demo import create_app
from payhooks.receiver.demo.run import serving
from payhooks.receiver.testing import (
    Connection,
    Payload,
    ReplayError,
    load_payloads,
    replay,
    send_signed,
)
from payhooks.storage import Ledger, ReconciliationState
from payhooks.verify import generate_keypair, get_signer
from tests.support.cli import clean_env, notification, run
from tests.support.processes import free_port

__all__ = ["clean_env"]

SECRET = generate_keypair("standard-webhooks").signing_key


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The demo app on a free loopback port (a thread per request): its URL and ledger file."""
    database = tmp_path / "receiver.db"
    Ledger(database).close()  # created up front: the tests count deliveries, not first opens
    app = create_app(
        {"PAYHOOKS_DATABASE": str(database), "PAYHOOKS_SECRETS": [SECRET], "SECRET_KEY": "test"},
        environ={},
    )
    with serving(app, threaded=True) as server:
        yield f"http://127.0.0.1:{server.server_port}/payhooks/notifications", database


@pytest.fixture
def bodies(tmp_path: Path) -> Path:
    folder = tmp_path / "bodies"
    folder.mkdir()
    (folder / "a.json").write_bytes(notification("order-a", "ll-a"))
    (folder / "b.json").write_bytes(notification("order-b", "ll-b", "9.99"))
    (folder / "a.expected.json").write_text('{"outcome": {}}')
    (folder / "notes.txt").write_text("not a body")
    return folder


def test_load_payloads_takes_json_files_but_not_expected_results(bodies: Path) -> None:
    payloads = load_payloads([bodies])

    assert [payload.name for payload in payloads] == ["a.json", "b.json"]
    assert payloads[0].body == (bodies / "a.json").read_bytes()


def test_load_payloads_skips_expected_results_even_when_named(bodies: Path) -> None:
    named = [bodies / "b.json", bodies / "a.expected.json", bodies / "notes.txt"]

    assert [p.name for p in load_payloads(named)] == ["b.json", "notes.txt"]


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda folder: folder / "missing.json", "no_such_file"),
        (lambda folder: folder.parent, "no_payloads"),
        (lambda folder: folder / "a.expected.json", "no_payloads"),
    ],
)
def test_load_payloads_refuses_what_it_cannot_send(bodies: Path, make, code: str) -> None:
    with pytest.raises(ReplayError) as exc_info:
        load_payloads([make(bodies)])

    assert exc_info.value.code == code


def test_replay_signs_and_delivers_every_body(receiver: tuple[str, Path], bodies: Path) -> None:
    url, database = receiver

    report = replay(url, load_payloads([bodies]), get_signer("standard-webhooks", SECRET))

    assert report.ok
    assert report.counts == Counter({"200 processed": 2})
    assert {result.name for result in report.results} == {"a.json", "b.json"}
    assert all(
        result.webhook_id and result.webhook_id.startswith("msg_") for result in report.results
    )
    with Ledger(database) as ledger:
        assert ledger.state("order-a") is ReconciliationState.UNEXPECTED


def test_repeats_get_fresh_ids_and_the_receiver_reports_their_outcomes_as_duplicates(
    receiver: tuple[str, Path], bodies: Path
) -> None:
    url, database = receiver

    report = replay(
        url,
        load_payloads([bodies]),
        get_signer("standard-webhooks", SECRET),
        repeat=5,
        concurrency=4,
    )

    assert report.counts == Counter({"200 processed": 2, "200 duplicate": 8})
    assert len({result.webhook_id for result in report.results}) == 10
    with Ledger(database) as ledger:
        assert ledger.database.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0] == 10
        assert ledger.database.execute("SELECT COUNT(*) FROM outcomes").fetchone()[0] == 2


def test_same_id_repeats_are_redeliveries_stored_once(
    receiver: tuple[str, Path], bodies: Path
) -> None:
    url, database = receiver

    report = replay(
        url,
        load_payloads([bodies]),
        get_signer("standard-webhooks", SECRET),
        repeat=3,
        same_id=True,
    )

    assert report.counts == Counter({"200 processed": 2, "200 duplicate": 4})
    assert len({result.webhook_id for result in report.results}) == 2
    with Ledger(database) as ledger:
        assert ledger.database.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0] == 2


def test_a_wrong_secret_is_refused_and_counted(receiver: tuple[str, Path], bodies: Path) -> None:
    url, _ = receiver
    forger = get_signer("standard-webhooks", generate_keypair("standard-webhooks").signing_key)

    report = replay(url, load_payloads([bodies]), forger)

    assert not report.ok
    assert report.refused == 2
    assert report.counts == Counter({"401 invalid_signature": 2})


def test_an_invalid_body_is_counted_by_its_error_code(receiver: tuple[str, Path]) -> None:
    url, _ = receiver
    payloads = [Payload("bad.json", b'{"ll_transaction_id": "x"}'), Payload("junk.json", b"{")]

    report = replay(url, payloads, get_signer("standard-webhooks", SECRET))

    assert report.counts == Counter({"422 invalid_payload": 1, "400 malformed_json": 1})


def test_no_receiver_is_a_result_not_an_exception() -> None:
    url = f"http://127.0.0.1:{free_port()}/payhooks/notifications"

    with Connection(url, timeout=2) as connection:
        result = send_signed(
            connection, Payload("a", b"{}"), get_signer("standard-webhooks", SECRET)
        )

    assert result.status is None
    assert result.refused
    assert result.label == "no answer (ConnectionRefusedError)"


@pytest.mark.parametrize("url", ["ftp://example.com/x", "127.0.0.1:8000/payhooks", "http:///x"])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(ReplayError) as exc_info:
        Connection(url)

    assert exc_info.value.code == "bad_url"


def test_repeat_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        replay("http://127.0.0.1:1/", [], get_signer("standard-webhooks", SECRET), repeat=0)


# -- the command -------------------------------------------------------------------------------


@pytest.mark.usefixtures("clean_env")
def test_replay_command_prints_counts_and_exits_0(receiver: tuple[str, Path], bodies: Path) -> None:
    url, _ = receiver

    result = run(
        ["replay", str(bodies), "--url", url, "--repeat", "2", "--concurrency", "2"],
        env={"PAYHOOKS_SECRETS": SECRET},
    )

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "       2  200 duplicate  (a.json, b.json)",
        "       2  200 processed  (a.json, b.json)",
    ]
    assert "Sending 4" in result.stderr
    assert SECRET not in result.output


@pytest.mark.usefixtures("clean_env")
def test_replay_command_exits_1_when_any_delivery_is_refused(
    receiver: tuple[str, Path], bodies: Path
) -> None:
    url, _ = receiver
    wrong = generate_keypair("standard-webhooks").signing_key

    result = run(["replay", str(bodies / "a.json"), "--url", url, "--secret", wrong])

    assert result.exit_code == 1
    assert "1  401 invalid_signature" in result.stdout
    assert result.stderr.endswith("Error: 1 of 1 deliveries were refused (no 2xx answer).\n")


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay", "missing.json", "--url", "http://127.0.0.1:1/"], "missing.json does not exist"),
        (["replay", "empty", "--url", "http://127.0.0.1:1/"], "There is no .json body to send"),
        (["replay", "--url", "http://127.0.0.1:1/"], "Missing argument 'PATHS...'"),
        (["replay", "a.json"], "Missing option '--url'"),
        (["replay", "a.json", "--url", "mailto:x"], "is not an http:// or https:// URL"),
        (
            ["replay", "a.json", "--url", "http://127.0.0.1:1/", "--repeat", "0"],
            "0 is not in the range x>=1",
        ),
        (
            ["replay", "a.json", "--url", "http://127.0.0.1:1/", "--scheme", "crc32"],
            "'crc32' is not one of",
        ),
        (
            ["replay", "a.json", "--url", "http://127.0.0.1:1/", "--timeout", "nan"],
            "'nan' is not a number of seconds.",
        ),
        (
            ["replay", "a.json", "--url", "http://127.0.0.1:1/", "--timeout", "inf"],
            "inf is not in the range 0<x<=86400.",
        ),
        (
            ["replay", "a.json", "--url", "http://127.0.0.1:1/", "--timeout", "1e15"],
            "is not in the range 0<x<=86400.",
        ),
    ],
)
def test_replay_command_bad_usage_exits_2(clean_env: Path, args: list[str], message: str) -> None:
    (clean_env / "a.json").write_bytes(notification())
    (clean_env / "empty").mkdir()

    result = run(args, env={"PAYHOOKS_SECRETS": SECRET})

    assert result.exit_code == 2, result.output
    assert message in result.stderr


@pytest.mark.usefixtures("clean_env")
def test_replay_command_without_a_secret_is_bad_usage(clean_env: Path) -> None:
    (clean_env / "a.json").write_bytes(notification())

    result = run(["replay", "a.json", "--url", "http://127.0.0.1:1/"])

    assert result.exit_code == 2
    assert (
        "No signing key: pass --secret or set $PAYHOOKS_SIGNING_KEY or $PAYHOOKS_SECRETS."
        in result.stderr
    )


@pytest.mark.usefixtures("clean_env")
def test_replay_command_with_no_receiver_exits_1(clean_env: Path) -> None:
    (clean_env / "a.json").write_bytes(notification())

    result = run(
        ["replay", "a.json", "--url", f"http://127.0.0.1:{free_port()}/x", "--timeout", "2"],
        env={"PAYHOOKS_SECRETS": SECRET},
    )

    assert result.exit_code == 1
    assert "no answer (ConnectionRefusedError)" in result.stdout


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("/payhooks/nowhere", "404 not_found"),
        ("/payhooks/return/order-1", "405 method_not_allowed"),
    ],
)
def test_replay_command_names_the_files_and_hints_at_the_url_after_a_404_or_405(
    receiver: tuple[str, Path], bodies: Path, path: str, label: str
) -> None:
    url = receiver[0].replace("/payhooks/notifications", path)

    result = run(["replay", str(bodies), "--url", url], env={"PAYHOOKS_SECRETS": SECRET})

    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"       2  {label}  (a.json, b.json)"]
    assert "Hint: a 404 or 405 means --url is not the receiver's notifications URL" in result.stderr


class _Receiver(BaseHTTPRequestHandler):
    """Answers every POST after :attr:`delay` seconds with :attr:`answer`, counting them."""

    delay = 0.0
    status = 200
    answer = b'{"status": "processed"}'
    posts = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts += 1
        time.sleep(self.delay)
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def fake_receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    """A stand-in HTTP server on loopback (the receiver under test is the replay tool): its
    URL and its handler class, whose attributes set the answer."""
    handler = type("Handler", (_Receiver,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/payhooks/notifications", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("code", ["\x1b[2J\x1b[31mowned", "bad\ncode\u202e"])
def test_replay_command_shows_an_answer_s_control_characters_escaped(
    fake_receiver: tuple[str, type[_Receiver]], bodies: Path, code: str
) -> None:
    url, handler = fake_receiver
    handler.status = 400
    handler.answer = json.dumps({"error": {"code": code}}).encode()
    (bodies / "b.json").unlink()
    (bodies / "\x1b]0;title\x07.json").write_bytes(notification())

    result = run(["replay", str(bodies), "--url", url], env={"PAYHOOKS_SECRETS": SECRET})

    assert result.exit_code == 1
    assert "\x1b" not in result.stdout
    assert "\u202e" not in result.stdout
    assert "\\x1b]0;title\\x07.json" in result.stdout
    assert result.stdout.count("\n") == 1


@pytest.mark.usefixtures("clean_env")
def test_replay_stops_promptly_on_ctrl_c_with_a_count_of_what_was_answered(
    fake_receiver: tuple[str, type[_Receiver]], bodies: Path
) -> None:
    url, handler = fake_receiver
    handler.delay = 0.05  # 3,000 deliveries from 4 threads: about 40 s if nothing stops them
    command = [sys.executable, "-m", "payhooks.receiver", "replay", str(bodies / "a.json")]
    process = subprocess.Popen(
        [*command, "--url", url, "--repeat", "3000", "--concurrency", "4"],
        env={"PAYHOOKS_SECRETS": SECRET, "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while handler.posts < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    interrupted_at = time.monotonic()
    try:
        out, err = process.communicate(timeout=10)
    finally:
        process.kill()
    posts = handler.posts
    time.sleep(0.3)

    assert time.monotonic() - interrupted_at < 10
    assert process.returncode == 1
    answered = int(out.split()[0])
    assert 1 <= answered <= posts < 3000
    assert handler.posts == posts  # nothing more was sent
    assert f"Interrupted: {answered} of 3000 deliveries were answered before Ctrl-C." in err
    assert "Traceback" not in err
