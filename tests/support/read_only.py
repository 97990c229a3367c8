"""A folder this process may not write, root included, and a file's fingerprint: for the tests
of commands that must read (or refuse in one sentence) a ledger there, and leave it as it was.

The tests run as root in CI, where permission bits stop nothing (root writes a 0555 folder),
so as root the folder is made immutable with ``chattr +i``: the kernel then refuses every
process, root included, to create, remove or rename an entry in it, and ``access(2)`` says so.
That is the folder SQLite cannot put a ``-wal``, ``-shm`` or journal in, which is what these
tests are about. As another user, ``chmod 0555`` is the same wall. Where neither takes (no
``CAP_LINUX_IMMUTABLE``, a filesystem without the flag), the test is skipped rather than
passing on a folder it could write.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["fingerprint", "unwritable"]


def fingerprint(path: Path) -> tuple[str, int]:
    """A file's SHA-256 and modification time (ns): both stay when nothing was written."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def _lock(folder: Path) -> list[str]:
    """Make ``folder`` unwritable; the command that undoes it."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return ["chmod", "0755", str(folder)]
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("root ignores permission bits, and chattr is not installed")
    done = subprocess.run([chattr, "+i", str(folder)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i refused here: {done.stderr.decode(errors='replace').strip()}")
    return [chattr, "-i", str(folder)]


@contextmanager
def unwritable(folder: Path) -> Iterator[Path]:
    """``folder``, which no entry can be created in until the block ends."""
    undo = _lock(folder)
    try:
        probe = folder / ".probe"
        try:
            probe.touch()
        except PermissionError:
            pass
        else:  # pragma: no cover - a filesystem that ignores the flag
            probe.unlink()
            pytest.skip(f"{folder} stayed writable")
        assert not os.access(folder, os.W_OK)
        yield folder
    finally:
        subprocess.run(undo, check=True)
