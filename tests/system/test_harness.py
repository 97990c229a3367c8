"""The test harness itself: a gunicorn that cannot be seen to start leaves nothing running."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support import processes
from tests.support.app import TEST_SECRET
from tests.support.gunicorn_server import GunicornError, GunicornServer
from tests.support.parallel import GROUPS, group_of


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


def test_every_module_of_a_parallel_group_exists_and_is_a_test_module() -> None:
    """A group names its modules by path: a module renamed or moved would silently run side
    by side with the rest again."""
    root = Path(__file__).resolve().parents[2]
    for path, group in GROUPS.items():
        assert (root / path).is_file(), f"{path} ({group}) does not exist"
        assert group_of(f"{path}::test_x[a-b]") == group
    assert group_of("tests/system/test_docs.py::test_x") is None


@pytest.mark.parametrize(
    ("worker", "count", "expected"),
    [("gw0", "2", (10_000, 21_384)), ("gw1", "2", (21_384, 32_768)), ("", "", None)],
)
def test_each_parallel_worker_takes_ports_from_its_own_slice(
    monkeypatch: pytest.MonkeyPatch, worker: str, count: str, expected: tuple[int, int] | None
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", count)
    monkeypatch.setattr(processes, "_ephemeral_start", lambda: 32_768)

    ports = processes._worker_slice()

    assert ((ports.start, ports.stop) if ports else None) == expected
    picked = {processes.free_port() for _ in range(20)}
    assert len(picked) == 20  # never the same port twice
    if ports:
        assert picked <= set(ports)
