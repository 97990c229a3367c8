"""The ``payhooks`` console script itself: what it says about itself."""

from __future__ import annotations

from importlib.metadata import version

from tests.support.cli import run


def test_version_prints_the_installed_version() -> None:
    result = run(["--version"])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"payhooks {version('payhooks')}\n"
