"""``payhooks sandbox``: registered on the console script, and it serves what it prints."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest
from click.testing import CliRunner

from payhooks.receiver.console import payhooks


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
from payhooks.receiver.console import payhooks
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
