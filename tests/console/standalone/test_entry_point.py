"""``payhooks console`` reaches the ``payhooks`` script from above: the script, below the
console, finds it through the ``payhooks.commands`` entry point instead of importing it."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

from payhooks.console.standalone import console_command
from payhooks.receiver.script import COMMANDS_GROUP, payhooks


def test_the_console_command_is_an_entry_point_of_the_payhooks_commands_group() -> None:
    entries = {entry.name: entry.value for entry in entry_points(group=COMMANDS_GROUP)}

    assert entries == {"console": "payhooks.console.standalone:console_command"}


def test_the_payhooks_script_offers_the_console_command_it_found() -> None:
    assert payhooks.commands["console"] is console_command


def test_python_m_payhooks_receiver_runs_payhooks_console() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "payhooks.receiver", "console", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: payhooks console [OPTIONS]")
