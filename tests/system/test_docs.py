"""The README is the user's manual: every example in it runs here, top to bottom.

The README is read as a sequence of fenced blocks, each optionally preceded (on the line just
above the fence) by an HTML comment that the rendered page does not show:

- ```` ```python ````: run as a script in a subprocess, as a reader who pastes it into a file
  would. ``<!-- continued -->`` continues the previous Python block: a chain is run once,
  whole, when it ends.
- ```` ```sh ````: run with ``bash -euo pipefail``; ``payhooks`` is this environment's console
  script. ``<!-- with-server -->``: a ``payhooks serve`` is running, as the README tells the
  reader to start it, and its ``export PAYHOOKS_SECRETS=...`` line has been run.
- ```` ```sql ````: run against ``./payhooks.db``, the ledger the shell examples built.
- ``<!-- file: NAME -->`` before any block: its text is written to ``NAME`` for later blocks.
- ``<!-- not-tested: reason -->``: skipped, with the reason given (a server that runs until
  stopped, a network install).

Everything runs in one temporary directory, in order, so later examples see what earlier ones
made, as a reader's shell would. The reference tables are checked against the code, so a key,
an error code, a state or a command cannot be added without documenting it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from payhooks.receiver import signals
from payhooks.receiver.config import CONFIG_KEYS
from payhooks.receiver.console import payhooks
from payhooks.receiver.web.errors import ERROR_CODES
from payhooks.storage import DeliveryStatus, Outcome, ReconciliationState
from payhooks.verify import generate_keypair

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_FENCE = re.compile(r"^```(\S*)\s*$")
_MARKER = re.compile(r"^<!--\s*([a-z-]+)(?::\s*(.*?))?\s*-->$")

FIRST_COMMAND = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && payhooks demo"
SECOND_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' "
    "--config-settings editable_mode=strict && ruff check . && mypy && pytest"
)


@dataclass(frozen=True)
class Block:
    line: int
    language: str
    text: str
    marker: str | None
    argument: str | None


def readme_blocks() -> list[Block]:
    """Every fenced block of the README with the marker comment just above it, if any."""
    lines = README.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        start = index
        index += 1
        body: list[str] = []
        while not lines[index].startswith("```"):
            body.append(lines[index])
            index += 1
        index += 1
        above = _MARKER.match(lines[start - 1].strip()) if start else None
        found.append(
            Block(
                line=start + 1,
                language=fence.group(1),
                text="\n".join(body) + "\n",
                marker=above.group(1) if above else None,
                argument=above.group(2) if above else None,
            )
        )
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Walkthrough:
    """Runs the README's blocks in one directory, like a reader working through it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.secret = generate_keypair("standard-webhooks").signing_key
        base = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("PAYHOOKS_", "FLASK_")) and name != "SECRET_KEY"
        }
        # payhooks and python from this environment come first, as after `. .venv/bin/activate`.
        base["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), base.get("PATH", "")])
        self.env = base
        # What a reader has exported before the Python examples: a secret from `payhooks
        # keygen`, a Flask secret key, the service's RSA public key.
        self.python_env = {
            **base,
            "PAYHOOKS_SECRETS": self.secret,
            "SECRET_KEY": "readme-secret-key",
            "SERVICE_PUBLIC_KEY": generate_keypair("sorted-fields-rsa").verifying_key,
        }
        self.chain: list[Block] = []
        self.server: subprocess.Popen[str] | None = None
        self.port = 0

    def fail(self, block: Block, what: str, output: str) -> None:
        pytest.fail(f"README.md line {block.line} ({block.language}) {what}:\n{output}")

    def run(self, blocks: list[Block]) -> None:
        for block in blocks:
            if block.marker != "continued":
                self.flush_python()
            if block.marker == "not-tested":
                continue
            if block.marker == "file":
                assert block.argument
                (self.folder / block.argument).write_text(block.text, encoding="utf-8")
            elif block.language == "python":
                self.chain.append(block)
            elif block.language == "sh":
                self.shell(block)
            elif block.language == "sql":
                self.sql(block)
        self.flush_python()

    def flush_python(self) -> None:
        if not self.chain:
            return
        chain, self.chain = self.chain, []
        script = self.folder / f"readme_line_{chain[0].line}.py"
        script.write_text("\n".join(block.text for block in chain), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, script.name],
            cwd=self.folder,
            env=self.python_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            self.fail(chain[-1], f"failed (chain from line {chain[0].line})", done.stderr)

    def shell(self, block: Block) -> None:
        text, env = block.text, self.env
        if block.marker == "with-server":
            self.start_server()
            text = text.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")
            env = {**env, "PAYHOOKS_SECRETS": self.secret}
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", text],
            cwd=self.folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            self.fail(block, f"exited {done.returncode}", done.stdout + done.stderr)

    def sql(self, block: Block) -> None:
        with sqlite3.connect(self.folder / "payhooks.db") as conn:
            try:
                conn.execute(block.text).fetchall()
            except sqlite3.Error as err:
                self.fail(block, "is not valid against the ledger", str(err))
        conn.close()

    def start_server(self) -> None:
        if self.server is not None:
            return
        self.port = _free_port()
        self.server = subprocess.Popen(
            ["payhooks", "serve", "--port", str(self.port)],
            cwd=self.folder,
            env={**self.env, "PAYHOOKS_SECRETS": self.secret},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        pytest.fail("payhooks serve did not start listening")

    def close(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=30)


@pytest.fixture
def walkthrough(tmp_path: Path) -> Iterator[Walkthrough]:
    folder = tmp_path / "reader"
    folder.mkdir()
    # The reader works in a clone of the repository, which has the sample bodies.
    shutil.copytree(ROOT / "sample_payloads", folder / "sample_payloads")
    runner = Walkthrough(folder)
    try:
        yield runner
    finally:
        runner.close()


def test_every_example_in_the_readme_runs(walkthrough: Walkthrough) -> None:
    walkthrough.run(readme_blocks())

    folder = walkthrough.folder
    assert "PAYHOOKS_PUBLIC_KEYS=whpk_" in (folder / "keys.env").read_text()
    assert (folder / "reconciliation.csv").read_text().startswith("external_identifier,kind,state,")
    with sqlite3.connect(folder / "payhooks.db") as conn:
        states = dict(conn.execute("SELECT external_identifier, state FROM reconciliation"))
    conn.close()
    # Registered by `expect`, paid by the replayed order.json (and moved on by the samples).
    assert states["order-1001"] not in ("pending", "unexpected")
    assert states["sub-3001"] == "pending"  # from expected.csv


def test_every_block_is_run_or_says_why_not() -> None:
    for block in readme_blocks():
        where = f"README.md line {block.line}"
        if block.marker == "not-tested":
            assert block.argument, f"{where}: not-tested needs a reason"
        elif block.marker == "file":
            assert block.argument, f"{where}: file needs a name"
        else:
            assert block.language in ("python", "sh", "sql"), (
                f"{where}: a ```{block.language} block is neither run nor marked"
            )
            assert block.marker in (None, "continued", "with-server"), f"{where}: {block.marker}"


def test_not_tested_blocks_stay_few() -> None:
    skipped = [block for block in readme_blocks() if block.marker == "not-tested"]

    assert len(skipped) <= 6, [block.line for block in skipped]


def test_the_first_screen_keeps_its_two_commands_first() -> None:
    first, second = readme_blocks()[:2]

    assert first.text.strip() == FIRST_COMMAND
    assert second.text.strip() == SECOND_COMMAND
    assert second.line < 25


def test_the_configuration_reference_lists_every_key() -> None:
    text = README.read_text(encoding="utf-8")

    missing = [key for key in CONFIG_KEYS if f"| `{key}` |" not in text]

    assert missing == []
    assert "`PAYHOOKS_SIGNING_KEY`" in text


def test_the_error_table_matches_the_receiver() -> None:
    text = README.read_text(encoding="utf-8")

    wrong = [
        (code, status)
        for code, status in ERROR_CODES.items()
        if f"| `{code}` | {status} |" not in text
    ]

    assert wrong == []


def test_the_outcome_table_lists_every_field() -> None:
    text = README.read_text(encoding="utf-8")

    assert [f.name for f in dataclasses.fields(Outcome) if f"| `{f.name}` |" not in text] == []


def test_the_states_table_lists_every_reconciliation_state() -> None:
    text = README.read_text(encoding="utf-8")

    assert [
        state.value for state in ReconciliationState if f"| `{state.value}` |" not in text
    ] == []


def test_the_cli_reference_documents_every_command() -> None:
    text = README.read_text(encoding="utf-8")

    assert [name for name in payhooks.commands if f"### `payhooks {name}`" not in text] == []


def test_the_signal_table_lists_every_signal() -> None:
    text = README.read_text(encoding="utf-8")

    assert [name for name in signals.__all__ if f"| `{name}` |" not in text] == []


def test_the_delivery_status_table_lists_every_status() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Delivery statuses") :]

    missing = [status.value for status in DeliveryStatus if f"| `{status}` |" not in section]

    assert missing == []
