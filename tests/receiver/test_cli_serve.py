"""``payhooks serve`` that cannot start: one sentence, exit 1, and nothing left behind."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import clean_env, run

__all__ = ["clean_env"]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 another socket listens on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


@pytest.mark.parametrize("configured", [False, True], ids=["default_ledger", "PAYHOOKS_DATABASE"])
def test_serve_on_a_busy_port_leaves_no_new_ledger_behind(
    clean_env: Path, busy_port: int, configured: bool
) -> None:
    folder = clean_env / "fresh"
    folder.mkdir()
    env = {"PAYHOOKS_DATABASE": str(folder / "payhooks.db")} if configured else {}

    result = run(["serve", "--port", str(busy_port)], env=env)

    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: Cannot listen on 127.0.0.1 port {busy_port}: Address already in use.\n"
    )
    assert list(folder.iterdir()) == []
    assert sorted(item.name for item in clean_env.iterdir()) == ["fresh"]
