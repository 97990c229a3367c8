"""docs/service.md is the manual of payhooks.service: every Python example in it runs here as
written, in a subprocess of its own, and its reference lists are checked against the code.

A fenced block preceded (on the line just above) by ``<!-- not-tested: reason -->`` is skipped
with that reason.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import payhooks.service as service_package
import pytest
from payhooks.service.errors import ServiceError
from payhooks.service.sandbox import SandboxSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "service.md"
_FENCE = re.compile(r"^```(\S*)\s*$")
_SKIP = re.compile(r"^<!--\s*not-tested:\s*(.+?)\s*-->$")


@dataclasses.dataclass(frozen=True)
class Block:
    line: int
    language: str
    text: str
    skip_reason: str | None


def _blocks() -> list[Block]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
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
        above = _SKIP.match(lines[start - 1].strip()) if start else None
        found.append(
            Block(start + 1, fence.group(1), "\n".join(body) + "\n", above and above.group(1))
        )
    return found


PYTHON = [block for block in _blocks() if block.language == "python"]


def test_the_manual_has_python_examples() -> None:
    assert len(PYTHON) >= 3


@pytest.mark.system
@pytest.mark.parametrize("block", PYTHON, ids=[f"line-{block.line}" for block in PYTHON])
def test_each_python_example_runs_as_written(block: Block, tmp_path: Path) -> None:
    if block.skip_reason:
        pytest.skip(block.skip_reason)
    script = tmp_path / "example.py"
    script.write_text(block.text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"docs/service.md line {block.line}:\n{result.stderr}"


def test_every_untested_block_says_why() -> None:
    for block in _blocks():
        if block.language not in ("python", ""):
            assert block.skip_reason, f"line {block.line}: a {block.language} block is not run"


def _error_classes() -> list[type[ServiceError]]:
    return [
        value
        for value in vars(service_package).values()
        if isinstance(value, type) and issubclass(value, ServiceError)
    ]


@pytest.mark.parametrize("error", _error_classes(), ids=lambda error: error.__name__)
def test_every_error_and_its_code_is_documented(error: type[ServiceError]) -> None:
    text = DOC.read_text(encoding="utf-8")
    assert f"`{error.__name__}`" in text
    assert f"`{error.code}`" in text


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(SandboxSettings)])
def test_every_sandbox_setting_is_documented(name: str) -> None:
    assert f"`{name}`" in DOC.read_text(encoding="utf-8")
