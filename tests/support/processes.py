"""Servers the tests run as background processes: a free port, started in a session of their
own, waited for until they listen, and stopped with everything they started.

Shared by the docs walk's server blocks (:mod:`tests.support.docs_walk`), nginx
(:mod:`tests.support.nginx_server`), gunicorn (:mod:`tests.support.gunicorn_server`) and
PostgreSQL (:mod:`tests.support.postgres`), so that each says only what differs: the command,
the log, how it is asked to stop.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["free_port", "start_listening", "stop_session"]


#: Where the ports of parallel test workers are taken from: below the kernel's ephemeral range
#: (``ip_local_port_range``, where ``bind(("127.0.0.1", 0))`` and every outgoing connection
#: take theirs), so that no other worker's server or client can take a port between the
#: moment it is picked and the moment its server binds it.
_WORKER_PORTS_START = 10_000
_handed_out: set[int] = set()
#: Not the ``random`` module's generator, which a test (or a bench in a subprocess) may seed.
_pick = random.SystemRandom()


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _worker_slice() -> range | None:
    """This pytest-xdist worker's own slice of ports (``PYTEST_XDIST_WORKER`` is ``gwN``), or
    ``None`` outside a parallel run (or when the ephemeral range leaves no room below it)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit()):
        return None
    index, workers = int(worker[2:]), max(int(count), 1)
    size = (_ephemeral_start() - _WORKER_PORTS_START) // workers
    if size < 100 or index >= workers:
        return None
    start = _WORKER_PORTS_START + index * size
    return range(start, start + size)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A loopback port nothing listens on right now.

    Alone, the kernel's pick. Under pytest-xdist (``pytest -n``), a port from this worker's
    own slice (:func:`_worker_slice`), never one it handed out before: two workers starting
    servers side by side never get the same port, and a client's ephemeral port never takes
    it before the server binds.
    """
    ports = _worker_slice()
    if ports is not None:
        for _ in range(len(ports)):
            port = _pick.choice(ports)
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_listening(
    command: Sequence[str],
    *,
    port: int,
    log_path: Path,
    timeout: float,
    failure: Callable[[str], Exception],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own, its output in ``log_path``, and wait until
    something listens on ``port`` on loopback.

    :param failure: makes the error raised when the process exits first (``"exited"``) or
        never listens (``"did not listen"``); the process's session is stopped first.
    """
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise failure("exited")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return process
            except OSError:
                time.sleep(0.05)
        raise failure("did not listen")
    except BaseException:
        stop_session(process, signal.SIGTERM, whole_session=True, timeout=10)
        raise


def stop_session(
    process: subprocess.Popen[Any], signal_number: int, *, whole_session: bool, timeout: float
) -> None:
    """Send ``signal_number`` to the process, or to its whole session (``whole_session``), and
    SIGKILL it after ``timeout``; then SIGKILL whatever is left of its session (a worker whose
    master was killed, a child that ignored the signal)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if whole_session:
                os.killpg(process.pid, signal_number)
            else:
                process.send_signal(signal_number)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
