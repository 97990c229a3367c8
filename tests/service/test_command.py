"""``payhooks sandbox``: registered on the console script, and it serves what it prints."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from payhooks.receiver.script import payhooks
from payhooks.service.sandbox import SandboxServer, SandboxSettings


def test_the_console_script_offers_the_sandbox() -> None:
    result = CliRunner().invoke(payhooks, ["sandbox", "--help"])
    assert result.exit_code == 0
    assert "--notify-url" in result.output
    assert "--drop-notifications" in result.output


def test_a_bad_notify_url_is_bad_usage() -> None:
    result = CliRunner().invoke(payhooks, ["sandbox", "--notify-url", "nowhere"])
    assert result.exit_code == 2
    assert "notification_url" in result.output


@pytest.mark.system
def test_the_sandbox_command_serves_with_the_token_it_prints() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "payhooks.receiver", "sandbox", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        exports: dict[str, str] = {}
        while "PAYHOOKS_SECRETS" not in exports:
            line = process.stdout.readline()
            assert line, process.stderr.read() if process.stderr else ""
            if line.strip().startswith("export "):
                name, _, value = line.strip().removeprefix("export ").partition("=")
                exports[name] = value
        url, token = exports["PAYHOOKS_SANDBOX_URL"], exports["PAYHOOKS_SANDBOX_TOKEN"]
        assert exports["PAYHOOKS_SECRETS"].startswith("whsec_")
        deadline = time.monotonic() + 10
        while True:
            try:
                answer = httpx.get(f"{url}/buyers", headers={"Authorization": f"Bearer {token}"})
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert answer.status_code == 200
        assert answer.json()["items"] == []
    finally:
        process.terminate()
        process.communicate(timeout=10)


_WITHOUT_HTTPX = """
import sys
sys.modules["httpx"] = None  # as if the service extra were not installed
from click.testing import CliRunner
from payhooks.receiver.script import payhooks
assert CliRunner().invoke(payhooks, ["--help"]).exit_code == 0
result = CliRunner().invoke(payhooks, ["sandbox"])
print(result.exit_code, result.output)
"""


@pytest.mark.system
def test_without_the_service_extra_the_console_works_and_the_sandbox_says_why() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_HTTPX],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("1 ")
    assert "pip install 'payhooks[service]'" in result.stdout


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "shop.example"])
def test_a_non_loopback_bind_without_a_control_token_is_refused_before_listening(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PAYHOOKS_SANDBOX_CONTROL_TOKEN", raising=False)
    result = CliRunner().invoke(payhooks, ["sandbox", "--host", host, "--port", "0"])
    assert result.exit_code == 2
    assert "--control-token" in result.output
    assert "payhooks sandbox on" not in result.output


def test_a_non_loopback_server_needs_a_control_token() -> None:
    with pytest.raises(ValueError, match="control_token"):
        SandboxServer.start(host="0.0.0.0")
    with SandboxServer.start(
        SandboxSettings(control_token="control-secret-1234567890"), host="0.0.0.0"
    ) as server:
        answer = httpx.get(
            server.url.replace("0.0.0.0", "127.0.0.1") + "/sandbox/notifications",
            headers={"Authorization": "Bearer control-secret-1234567890"},
        )
        assert answer.status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_a_loopback_bind_needs_no_control_token(host: str) -> None:
    try:
        server = SandboxServer.start(host=host)
    except OSError:  # no IPv6 loopback on this machine
        pytest.skip(f"cannot bind {host}")
    server.stop()


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}
    return subprocess.run(
        [sys.executable, "-m", "payhooks.receiver", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.system
@pytest.mark.parametrize("command", ["serve", "sandbox"])
def test_a_busy_port_is_the_same_one_sentence_for_sandbox_and_serve(
    command: str, tmp_path: Path
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = _run([command, "--port", str(port)], tmp_path)

    assert (done.returncode, done.stdout) == (1, "")
    busy_port = f"Error: Cannot listen on 127.0.0.1 port {port}: Address already in use.\n"
    assert done.stderr == busy_port


@pytest.mark.parametrize(
    ("arguments", "names"),
    [
        (["--notify-url", "nowhere"], "notification_url"),
        (["--host", "0.0.0.0", "--port", "0"], "--control-token"),
    ],
)
def test_sandbox_bad_usage_is_one_sentence_without_usage_text_as_serve_s(
    arguments: list[str], names: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PAYHOOKS_SANDBOX_CONTROL_TOKEN", raising=False)
    result = CliRunner().invoke(payhooks, ["sandbox", *arguments])

    assert result.exit_code == 2
    (line,) = result.output.splitlines()
    assert line.startswith("Error: ")
    assert line.endswith(".")
    assert names in line
