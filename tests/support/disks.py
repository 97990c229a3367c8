"""Real file systems that fill up: a small tmpfs mounted for a test, and a file size limit
for a child process, where mounting is not allowed.

A full disk is the failure that matters for whatever writes a file (the ledger, an archive, a
backup), and it is cheap to make real: a few MiB of tmpfs. Mounting needs root (or
``CAP_SYS_ADMIN``), which a developer's machine or a container may not give, so
:func:`small_tmpfs` skips there, under ``CI=true`` too (CI may run in such a container); each
test using it has a sibling that needs no mount: :func:`size_limited` runs a child process
under ``RLIMIT_FSIZE``, where a write past the limit fails with ``EFBIG`` as a full disk
fails with ``ENOSPC``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["size_limited", "small_tmpfs"]

# Run as the child: ignore SIGXFSZ (whose default kills the process) so a write past the
# limit fails with EFBIG, set the limit, then run the module as ``python -m`` would.
_CHILD = """\
import resource, runpy, signal, sys
limit = int(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
module = sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@contextmanager
def small_tmpfs(size: str = "4m") -> Iterator[Path]:
    """A real file system of ``size`` (tmpfs's spelling: ``4m``), mounted for the block and
    unmounted after it; the test is skipped where mounting is not allowed (not root, or a
    container without the capability)."""
    folder = Path(tempfile.mkdtemp(prefix="payhooks-small-disk-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        folder.rmdir()
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
        folder.rmdir()


def size_limited(
    limit: int,
    module: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m MODULE ARGS`` in a child process that may write no file past ``limit``
    bytes (``RLIMIT_FSIZE``); its output, as text."""
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(limit), module, *args],
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
