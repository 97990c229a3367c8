"""The test harness itself: a gunicorn that cannot be seen to start leaves nothing running."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.app import TEST_SECRET
from tests.support.gunicorn_server import GunicornError, GunicornServer


def _running_in(folder: Path) -> list[int]:
    """Live processes whose working directory is ``folder``: gunicorn's master and workers
    all run in the test's own temporary folder, and nothing else does."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) != folder:
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


def _wait_gone(folder: Path, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := _running_in(folder)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_a_start_that_times_out_stops_the_master_and_its_workers(tmp_path: Path) -> None:
    env = {"PAYHOOKS_SECRETS": TEST_SECRET, "PAYHOOKS_DATABASE": str(tmp_path / "p.db")}
    server = GunicornServer("payhooks.receiver.demo:create_app()", env=env, cwd=tmp_path, workers=2)
    with pytest.raises(GunicornError):
        server.start(timeout=0.0)
    assert _wait_gone(tmp_path) == []
