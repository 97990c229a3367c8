"""``payhooks demo`` and ``payhooks serve``, each run as a user runs it: in a subprocess."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from payhooks.receiver.testing import Connection, Payload, send_signed
from payhooks.verify import get_signer
from tests.support.cli import notification
from tests.support.processes import free_port

_SCRIPT = "from payhooks.receiver.script import main; main()"


def _env(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PAYHOOKS_") and name != "SECRET_KEY"
    }
    return {**env, **extra}


def test_demo_runs_the_whole_flow_and_exits_0(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, "demo"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"^Receiver: http://127\.0\.0\.1:\d+/payhooks/notifications", out, re.M)
    for line in (
        "orchestrator order-1002 -> 200 processed  (paid)",
        "wallet       order-1003 -> 200 processed  (amount_mismatch)",
        "card         order-1001 -> 200 duplicate  (paid)  [same webhook-id again]",
        "card         order-1004 -> 401 invalid_signature  [forged: wrong secret]",
        "order-1002 resultCode=Authorised -> 200 paid (confirmed by a notification)",
        "order-1004 resultCode=Authorised -> 200 processing (not confirmed)",
    ):
        assert line in out
    table = {
        line.split()[0]: line.split()
        for line in out.split("Reconciliation:")[1].splitlines()
        if line.strip()
    }
    assert table["order-1003"][2:6] == ["amount_mismatch", "CNY", "120.00", "110.00"]
    assert table["order-1004"][2] == "pending"
    assert table["sub-2001"][2:7] == ["paid", "CNY", "20.00", "20.00", "2"]
    # Through the sandbox: the client created them, the sandbox notified the receiver.
    assert table["order-3001"][2:6] == ["paid", "CNY", "42.00", "42.00"]
    assert table["order-3002"][2:6] == ["paid", "CNY", "199.00", "199.00"]
    assert re.search(r"order-3002 customer back at /payhooks/return/order-3002 -> 200 paid", out)
    assert out.rstrip().endswith("the receiver has stopped and its temporary ledger is gone.")
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing left behind in the working directory


def test_serve_prints_a_generated_secret_that_signs_for_it(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, "serve", "--port", str(port)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        lines = [server.stdout.readline() for _ in range(5)]
        secret = next(
            line.split("=", 1)[1].strip() for line in lines if "export PAYHOOKS_SECRETS=" in line
        )
        url = f"http://127.0.0.1:{port}/payhooks/notifications"
        assert lines[0].strip() == f"payhooks receiver at {url}"
        result = None
        for _ in range(50):  # the server binds its port just after printing
            with Connection(url, timeout=60) as connection:
                result = send_signed(
                    connection,
                    Payload("a", notification()),
                    get_signer("standard-webhooks", secret),
                )
            if result.status is not None:
                break
            time.sleep(0.1)
        assert result is not None
        assert result.label == "200 processed"
        assert (tmp_path / "payhooks.db").exists()
    finally:
        server.terminate()
        server.communicate(timeout=60)


def test_serve_with_a_bad_setting_fails_in_one_sentence(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env=_env(PAYHOOKS_SIGNATURE_SCHEME="rot13"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 2
    assert done.stderr.startswith(
        "Error: The configuration cannot be used: PAYHOOKS_SIGNATURE_SCHEME"
    )
    assert "Traceback" not in done.stderr


def test_serve_with_a_secret_too_short_fails_at_start_naming_the_key(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env=_env(PAYHOOKS_SECRETS="whsec_AA=="),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 2  # bad usage, as every setting that cannot be used
    assert done.stderr.startswith(
        "Error: The configuration cannot be used: PAYHOOKS_SECRETS: keys[0]: the secret is 1 byte"
    )
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("args", [["--help"], ["demo", "--help"], ["nosuchcommand"]])
def test_the_console_script_entry_point_answers(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == (2 if args == ["nosuchcommand"] else 0)
    assert "Usage: payhooks" in done.stdout + done.stderr


@pytest.mark.parametrize("scheme", ["standard-webhooks", "standard-webhooks-ed25519"])
def test_serve_on_a_busy_port_fails_in_one_sentence_before_printing_any_key(
    tmp_path: Path, scheme: str
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, "serve", "--port", str(port)],
            cwd=tmp_path,
            env=_env(PAYHOOKS_SIGNATURE_SCHEME=scheme),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    assert done.returncode == 1
    assert done.stdout == ""
    assert (
        done.stderr == f"Error: Cannot listen on 127.0.0.1 port {port}: Address already in use.\n"
    )


def test_serve_shows_a_postgresql_url_without_its_password(
    tmp_path: Path, postgres_url: str
) -> None:
    url = postgres_url.replace("postgresql://payhooks@", "postgresql://payhooks:s3cret-pw@")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, "serve", "--port", str(port)],
        cwd=tmp_path,
        env=_env(PAYHOOKS_DATABASE=url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        banner = "".join(server.stdout.readline() for _ in range(2))
        index = b""
        for _ in range(50):  # the server binds its port just after printing
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
                    sock.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
                    index = b"".join(iter(lambda: sock.recv(65536), b""))
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
    finally:
        server.terminate()
        _, log = server.communicate(timeout=60)

    shown = url.replace("s3cret-pw", "***")
    assert f"ledger {shown}" in banner
    assert f'"database":"{shown}"' in index.decode().replace(" ", "")
    assert "s3cret-pw" not in banner + index.decode() + log
