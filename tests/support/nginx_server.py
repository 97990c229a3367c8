"""Run the documented nginx configuration on loopback, in front of a server on another port.

The recommended production setup puts nginx in front of gunicorn as a buffering reverse proxy
(``docs/deployment.md``): nginx reads each request whole before gunicorn sees it, so a slow
client holds a cheap nginx connection instead of one of gunicorn's few workers. What the bench
(``bench/slowloris.py``) measures and what ``tests/system/test_deployment.py`` checks must be
that documented configuration, not a copy that drifts from it, so :func:`documented_site`
reads it out of ``docs/deployment.md`` (the block marked ``<!-- file: payhooks-nginx.conf -->``)
and :class:`NginxServer` serves it with only what a test must change: the port it listens on
(``listen 80`` becomes a free loopback port) and the upstream's address (gunicorn's port).

nginx runs unprivileged-style from a private prefix folder (its pid file, logs and temporary
files there, ``daemon off``), in a session of its own, so :meth:`NginxServer.stop` ends the
master and every worker it forked, even when start-up fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from types import TracebackType

import pytest

from tests.support.docs_walk import ROOT, read_blocks
from tests.support.processes import free_port, start_listening, stop_session

__all__ = [
    "DEPLOYMENT_PAGE",
    "SITE_FILE",
    "NginxError",
    "NginxServer",
    "documented_site",
    "find_nginx",
    "nginx_missing_reason",
    "require_nginx",
]

DEPLOYMENT_PAGE = ROOT / "docs" / "deployment.md"
#: The name the deployment page gives the nginx site file (its ``<!-- file: NAME -->`` block).
SITE_FILE = "payhooks-nginx.conf"
#: What to run where nginx is missing (Debian and Ubuntu; CI installs it this way).
INSTALL = "apt-get install -y nginx"

_LISTEN = re.compile(r"(?m)^(\s*)listen\s+80\s*;")
_UPSTREAM = re.compile(r"(?m)^(\s*server\s+)127\.0\.0\.1:8000(\s*;)")


class NginxError(RuntimeError):
    """nginx did not start or did not listen; the message has its error log."""


def find_nginx() -> str | None:
    """The nginx binary: on the PATH, else where Debian puts it (``/usr/sbin``, often not on
    an unprivileged user's PATH)."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


def nginx_missing_reason() -> str | None:
    """Why nginx cannot run here (with the command that fixes it), or ``None`` if it can."""
    if find_nginx() is None:
        return f"nginx is not installed (run: {INSTALL})"
    return None


def require_nginx() -> None:
    """Skip the calling test where nginx is missing, with the command that installs it; but
    fail it in CI (``CI=true``), which installs nginx and must run every deployment test."""
    reason = nginx_missing_reason()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run this test: {reason}")
    pytest.skip(reason)


def documented_site() -> str:
    """The nginx site configuration as ``docs/deployment.md`` gives it, word for word."""
    blocks = [
        block
        for block in read_blocks(DEPLOYMENT_PAGE)
        if block.marker == "file" and block.argument == SITE_FILE
    ]
    if len(blocks) != 1:
        raise NginxError(f"docs/deployment.md has {len(blocks)} blocks for {SITE_FILE}, not 1")
    return blocks[0].text


def loopback_site(site: str, *, listen_port: int, upstream: str) -> str:
    """``site`` listening on ``127.0.0.1:listen_port`` and proxying to ``upstream`` (an
    address in nginx's syntax: ``127.0.0.1:PORT``, or ``unix:PATH`` to compare a socket).

    Exactly one ``listen 80;`` and one ``server 127.0.0.1:8000;`` are expected: a documented
    configuration that no longer has them must fail here, not be half rewritten.
    """
    site, listens = _LISTEN.subn(rf"\g<1>listen 127.0.0.1:{listen_port};", site)
    site, upstreams = _UPSTREAM.subn(rf"\g<1>{upstream}\g<2>", site)
    if (listens, upstreams) != (1, 1):
        raise NginxError(
            f"expected one 'listen 80;' and one 'server 127.0.0.1:8000;' in the site, "
            f"found {listens} and {upstreams}"
        )
    return site


def _main_config(prefix: Path, site_path: Path, worker_processes: str) -> str:
    """The main ``nginx.conf`` around the site: what a distribution's own file provides
    (Debian's: ``worker_processes auto``, 768 connections each, the ``http`` block that
    includes the site), with every path in ``prefix`` and no access log (the bench would
    measure the disk)."""
    temp = "\n".join(
        f"    {kind}_temp_path {prefix / (kind + '_temp')};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""daemon off;
worker_processes {worker_processes};
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} warn;
events {{
    worker_connections 768;
}}
http {{
    access_log off;
{temp}
    include {site_path};
}}
"""


class NginxServer:
    """nginx serving ``site`` (a ``server``/``upstream`` configuration for the ``http``
    block) on a free loopback port, from the private folder ``prefix``.

    :param site: the site configuration, already pointing at loopback ports
        (:func:`loopback_site`).
    :param port: the port the site listens on.
    :param prefix: an empty private folder for the configuration, logs and temporary files.
    :param worker_processes: nginx's ``worker_processes`` (``auto``: one per CPU).
    """

    def __init__(
        self, site: str, *, port: int, prefix: Path, worker_processes: str = "auto"
    ) -> None:
        binary = find_nginx()
        if binary is None:
            raise NginxError(nginx_missing_reason() or "nginx not found")
        self.port = port
        self.prefix = prefix
        prefix.mkdir(parents=True, exist_ok=True)
        site_path = prefix / SITE_FILE
        site_path.write_text(site, encoding="utf-8")
        self.config = prefix / "nginx.conf"
        self.config.write_text(_main_config(prefix, site_path, worker_processes), encoding="utf-8")
        self._command = [binary, "-p", str(prefix), "-c", str(self.config), "-e", "stderr"]
        self._process: subprocess.Popen[bytes] | None = None
        self._log = prefix / "nginx.stderr"

    @classmethod
    def documented(
        cls, *, upstream: str, prefix: Path, worker_processes: str = "auto"
    ) -> NginxServer:
        """The configuration from ``docs/deployment.md``, in front of ``upstream``
        (``127.0.0.1:PORT`` or ``unix:PATH``)."""
        port = free_port()
        site = loopback_site(documented_site(), listen_port=port, upstream=upstream)
        return cls(site, port=port, prefix=prefix, worker_processes=worker_processes)

    def start(self, *, timeout: float = 15.0) -> NginxServer:
        """Check the configuration (``nginx -t``), start nginx and wait until it listens;
        stop it again if it never does."""
        checked = subprocess.run(
            [*self._command, "-t"], capture_output=True, text=True, timeout=30, check=False
        )
        if checked.returncode != 0:
            raise NginxError(f"nginx -t refused the configuration:\n{checked.stderr}")
        self._process = start_listening(
            self._command,
            port=self.port,
            log_path=self._log,
            timeout=timeout,
            failure=lambda what: NginxError(
                f"nginx {what} on port {self.port}:\n{self.log_text()}"
            ),
        )
        return self

    def log_text(self) -> str:
        try:
            return self._log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def stop(self, *, timeout: float = 10.0) -> None:
        """SIGQUIT (nginx's graceful stop), SIGKILL after ``timeout``; then SIGKILL to
        whatever is left in its session."""
        process, self._process = self._process, None
        if process is not None:
            stop_session(process, signal.SIGQUIT, whole_session=False, timeout=timeout)

    def __enter__(self) -> NginxServer:
        return self.start() if self._process is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
