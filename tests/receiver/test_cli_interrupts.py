"""Ctrl-C in the middle of a command that writes a file: the file is whole or not there at all.
Each runs the command as a user does, in a subprocess sent SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from payhooks.storage import Ledger

_COMMAND = [sys.executable, "-m", "payhooks.receiver"]


def _interrupt_when(
    args: list[str], cwd: Path, ready: Callable[[], bool]
) -> subprocess.CompletedProcess[str]:
    """Run ``payhooks ARGS``, send SIGINT as soon as ``ready()`` holds, and wait for the end."""
    process = subprocess.Popen(
        [*_COMMAND, *args],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    process.send_signal(signal.SIGINT)
    try:
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    return subprocess.CompletedProcess(args, process.returncode, out, err)


def test_expect_csv_interrupted_leaves_no_ledger_it_created(tmp_path: Path) -> None:
    rows = "".join(f"order-{n},100,CNY\n" for n in range(50_000))
    (tmp_path / "expected.csv").write_text("external_identifier,amount_minor,currency\n" + rows)
    ledger = tmp_path / "payhooks.db"

    done = _interrupt_when(
        ["expect", "--csv", "expected.csv", "--database", str(ledger)], tmp_path, ledger.exists
    )

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["expected.csv"]


def test_reconcile_output_interrupted_leaves_no_report(tmp_path: Path) -> None:
    database = tmp_path / "payhooks.db"
    with Ledger(database) as ledger, ledger.transaction():
        for n in range(5000):
            ledger.expect_transaction(f"order-{n}", 100, "CNY")
    folder = tmp_path / "reports"
    folder.mkdir()
    report = folder / "report.csv"

    def started() -> bool:
        return any(folder.iterdir())

    args = ["reconcile", "--format", "csv", "--output", str(report), "--database", str(database)]
    done = _interrupt_when(args, tmp_path, started)

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert list(folder.iterdir()) == []  # neither a truncated report nor a temporary file
