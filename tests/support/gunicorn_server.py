"""Run an app under gunicorn on loopback, for the load tests and ``bench/receive.py``.

gunicorn is what a merchant runs payhooks under, and it differs from the test client and
werkzeug's thread in the ways that matter under load: several processes share one SQLite file,
workers are forked, and the master restarts a worker that dies. :class:`GunicornServer` starts
``python -m gunicorn`` as a child process bound to ``127.0.0.1`` on a port the kernel picks,
reads the port from gunicorn's log, and can find, kill and wait for its workers.

Finding workers reads ``/proc`` (the master's children), so :meth:`GunicornServer.worker_pids`
works on Linux only; :data:`HAS_PROC` says whether it can.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from tests.support.gunicorn_ready import READY
from tests.support.processes import stop_session

__all__ = ["HAS_PROC", "GunicornError", "GunicornServer", "child_pids"]

#: Whether this system has a ``/proc`` to find a process's children in.
HAS_PROC = Path("/proc/self/stat").exists()

#: The gunicorn configuration file that logs :data:`READY` once a worker has loaded the app.
_READY_CONFIG = Path(__file__).with_name("gunicorn_ready.py")

_LISTENING = re.compile(r"Listening at: http://127\.0\.0\.1:(\d+)")


class GunicornError(RuntimeError):
    """gunicorn did not start, or its workers did not come back; the message has its log."""


def _sockets(pid: int) -> set[str]:
    """The sockets ``pid`` holds open (``socket:[inode]``), from ``/proc``."""
    held: set[str] = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return held
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:  # closed while we looked
            continue
        if target.startswith("socket:"):
            held.add(target)
    return held


def child_pids(parent: int) -> set[int]:
    """The pids of the live processes whose parent is ``parent``, from ``/proc``."""
    children: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # the process ended while we looked
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after
        # its last closing parenthesis.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == parent and fields[0] != "Z":
            children.add(int(entry.name))
    return children


class GunicornServer:
    """``python -m gunicorn APP`` on ``127.0.0.1``, started by :meth:`start`.

    :param app: the WSGI app in gunicorn's syntax, e.g. ``"payhooks.receiver.demo:create_app()"``.
    :param env: the environment of the server (``PAYHOOKS_*``); ``HOME`` is set to ``cwd`` so
        gunicorn's control socket lands in a private folder.
    :param cwd: the server's working directory (a temporary folder).
    :param workers: how many worker processes.
    :param worker_class: gunicorn's ``--worker-class`` (``sync``, ``gthread``).
    :param threads: ``--threads`` per worker (``gthread`` only).
    :param preload: ``--preload``: import the app in the master, then fork the workers.
    :param extra_args: any further gunicorn arguments.
    """

    def __init__(
        self,
        app: str,
        *,
        env: Mapping[str, str],
        cwd: str | os.PathLike[str],
        workers: int = 4,
        worker_class: str = "sync",
        threads: int | None = None,
        preload: bool = False,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.workers = workers
        command = [
            sys.executable, "-m", "gunicorn",
            "--bind", "127.0.0.1:0",
            "--workers", str(workers),
            "--worker-class", worker_class,
            "--log-level", "info",
            "--config", str(_READY_CONFIG),
            # A sync worker silent for gunicorn's default 30 s is killed as stuck; on a loaded
            # shared machine a request waiting for a lock can take that long.
            "--timeout", "120",
            *(["--threads", str(threads)] if threads else []),
            *(["--preload"] if preload else []),
            *extra_args,
            app,
        ]  # fmt: skip
        self._command = command
        self._env = {**os.environ, "HOME": os.fspath(cwd), **env}
        self._cwd = os.fspath(cwd)
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str] = queue.Queue()
        #: Every line gunicorn wrote to stderr so far (its log, and any traceback).
        self.log: list[str] = []
        self._reader: threading.Thread | None = None
        #: The port gunicorn listens on, once started.
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, *, timeout: float = 120.0) -> GunicornServer:
        """Start gunicorn and wait until it listens and every worker has loaded the app.

        The wait is long because it costs nothing when the machine is quick: on a loaded
        shared machine, importing Flask alone has taken seconds of CPU per worker.

        gunicorn runs in a session of its own, so that whatever happens, :meth:`stop` can end
        the master and every worker it forked. A start that fails or times out stops what it
        started before the error leaves.
        """
        self._process = subprocess.Popen(
            self._command,
            cwd=self._cwd,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._pump, name="gunicorn-log", daemon=True)
        self._reader.start()
        try:
            self._wait_until_booted(time.monotonic() + timeout)
        except BaseException:
            self.stop(timeout=5.0)
            raise
        return self

    def _wait_until_booted(self, deadline: float) -> None:
        while not self.port:
            match = _LISTENING.search(self._next_line(deadline))
            if match:
                self.port = int(match.group(1))
        ready = 0
        while ready < self.workers:
            if READY in self._next_line(deadline):
                ready += 1

    def _pump(self) -> None:
        assert self._process is not None
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self._lines.put(line)

    def _next_line(self, deadline: float) -> str:
        """The next log line; :class:`GunicornError` if gunicorn exits or stays silent."""
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
            except queue.Empty:
                if self._process is not None and self._process.poll() is not None:
                    raise GunicornError("gunicorn exited:\n" + self.log_text()) from None
                if time.monotonic() >= deadline:
                    raise GunicornError("gunicorn did not start:\n" + self.log_text()) from None
                continue
            self.log.append(line)
            return line

    def drain_log(self) -> list[str]:
        """Move every line gunicorn has written so far into :attr:`log`; return it."""
        while True:
            try:
                self.log.append(self._lines.get_nowait())
            except queue.Empty:
                return self.log

    def log_text(self) -> str:
        return "".join(self.drain_log())

    def stop(self, *, timeout: float = 30.0) -> int | None:
        """Stop gunicorn gracefully (SIGTERM), killing it after ``timeout``; its exit code.

        Then every process left in gunicorn's session (a worker whose master was killed) is
        killed too, so no test leaves a server behind.
        """
        process = self._process
        if process is None:
            return None
        stop_session(process, signal.SIGTERM, whole_session=False, timeout=timeout)
        if self._reader is not None:
            self._reader.join(timeout=timeout)
        if process.stderr is not None:
            process.stderr.close()
        self.drain_log()
        return process.returncode

    def __enter__(self) -> GunicornServer:
        return self.start() if self._process is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- workers -----------------------------------------------------------------------------

    @property
    def master_pid(self) -> int:
        if self._process is None:
            raise GunicornError("gunicorn is not started")
        return self._process.pid

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def worker_pids(self) -> set[int]:
        """The pids of the master's live children: its workers (Linux only)."""
        return child_pids(self.master_pid)

    def busy_workers(self) -> set[int]:
        """Workers holding a client connection, so in the middle of a request: a sync worker
        holds the listening socket it shares with the master, plus the one it is serving."""
        listening = _sockets(self.master_pid)
        return {pid for pid in self.worker_pids() if _sockets(pid) - listening}

    def kill_busy_worker(self, *, timeout: float = 10.0) -> int:
        """SIGKILL a worker in the middle of a request; its pid.

        A busy worker is frozen with SIGSTOP first and killed only if it still holds its
        client's connection (else it is let go and another is tried), so the kill lands
        between accepting a request and closing its connection, not in an idle ``accept``.
        After ``timeout`` without catching one busy, any worker is killed.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid in self.busy_workers():
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                listening = _sockets(self.master_pid)
                if _sockets(pid) - listening:
                    os.kill(pid, signal.SIGKILL)
                    return pid
                os.kill(pid, signal.SIGCONT)
            time.sleep(0.001)
        return self.kill_worker()

    def kill_worker(self, pid: int | None = None, *, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` (default SIGKILL: no cleanup at all) to one worker; its pid."""
        if pid is None:
            pids = self.worker_pids()
            if not pids:
                raise GunicornError("gunicorn has no worker to kill:\n" + self.log_text())
            pid = min(pids)
        os.kill(pid, sig)
        return pid

    def wait_for_workers(self, *, gone: int, timeout: float = 30.0) -> set[int]:
        """Wait until the master runs its full count of workers again and ``gone`` is not one
        of them (the master noticed the death and forked a replacement); the new pids."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.worker_pids()
            if gone not in pids and len(pids) >= self.workers:
                return pids
            time.sleep(0.05)
        raise GunicornError(
            f"gunicorn did not replace worker {gone} in {timeout} s:\n" + self.log_text()
        )
