"""Run the documented nginx configuration on loopback, in front of a server on another port.

The recommended production setup puts nginx in front of gunicorn as a buffering reverse proxy
(``docs/deployment.md``): nginx reads each request whole before gunicorn sees it, so a slow
client holds a cheap nginx connection instead of one of gunicorn's few workers. What the bench
(``bench/slowloris.py``) measures and what ``tests/system/test_deployment.py`` checks must be
that documented configuration, not a copy that drifts from it, so :func:`documented_site`
reads it out of ``docs/deployment.md`` (the block marked ``<!-- file: payhooks-nginx.conf -->``)
and :class:`NginxServer` serves it with only what a test must change: the ports it listens on
(``listen 443 ssl`` and ``listen 80`` become free loopback ports), the certificate (a
throwaway one, made by :func:`throwaway_certificate`) and the upstream's address (gunicorn's
port). The slow-client measurements may serve the HTTPS site without TLS (``tls=False``): what
they measure is nginx's buffering, and a plain socket can trickle bytes where a TLS one cannot.

nginx runs unprivileged-style from a private prefix folder (its pid file, logs and temporary
files there, ``daemon off``), in a session of its own, so :meth:`NginxServer.stop` ends the
master and every worker it forked, even when start-up fails.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import shutil
import signal
import ssl
import subprocess
from pathlib import Path
from types import TracebackType

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

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
    "throwaway_certificate",
]

DEPLOYMENT_PAGE = ROOT / "docs" / "deployment.md"
#: The name the deployment page gives the nginx site file (its ``<!-- file: NAME -->`` block).
SITE_FILE = "payhooks-nginx.conf"
#: What to run where nginx is missing (Debian and Ubuntu; CI installs it this way).
INSTALL = "apt-get install -y nginx"

_LISTEN = re.compile(r"(?m)^(\s*)listen\s+80\s*;")
_LISTEN_TLS = re.compile(r"(?m)^(\s*)listen\s+443\s+ssl\s*;")
_CERTIFICATE = re.compile(r"(?m)^(\s*ssl_certificate\s+)\S+;")
_CERTIFICATE_KEY = re.compile(r"(?m)^(\s*ssl_certificate_key\s+)\S+;")
#: The host names the throwaway certificate is good for.
CERTIFICATE_HOSTS = ("127.0.0.1", "localhost", "shop.example")
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


def throwaway_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for :data:`CERTIFICATE_HOSTS`, valid for a day, and its key,
    written to ``folder``: (certificate, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "payhooks test")])
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    names += [x509.DNSName(host) for host in CERTIFICATE_HOSTS[1:]]
    certificate = (
        x509.CertificateBuilder(subject_name=name, issuer_name=name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / "throwaway.pem", folder / "throwaway.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def loopback_site(
    site: str,
    *,
    listen_port: int,
    http_port: int,
    upstream: str,
    certificate: tuple[Path, Path],
    tls: bool = True,
) -> str:
    """``site`` serving HTTPS on ``127.0.0.1:listen_port`` (plain HTTP without ``tls``) with
    ``certificate`` (a pair of paths), its HTTP redirect on ``http_port``, and proxying to
    ``upstream`` (an address in nginx's syntax: ``127.0.0.1:PORT``, or ``unix:PATH``).

    Exactly one of each line rewritten is expected: a documented configuration that no longer
    has them must fail here, not be half rewritten.
    """
    ssl_suffix = " ssl" if tls else ""
    counts = []
    for pattern, replacement in (
        (_LISTEN_TLS, rf"\g<1>listen 127.0.0.1:{listen_port}{ssl_suffix};"),
        (_LISTEN, rf"\g<1>listen 127.0.0.1:{http_port};"),
        (_CERTIFICATE, rf"\g<1>{certificate[0]};"),
        (_CERTIFICATE_KEY, rf"\g<1>{certificate[1]};"),
        (_UPSTREAM, rf"\g<1>{upstream}\g<2>"),
    ):
        site, count = pattern.subn(replacement, site)
        counts.append(count)
    if counts != [1] * len(counts):
        raise NginxError(
            "expected one each of 'listen 443 ssl;', 'listen 80;', 'ssl_certificate',"
            f" 'ssl_certificate_key' and 'server 127.0.0.1:8000;' in the site, found {counts}"
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
        #: The documented site's plain-HTTP port (its redirect to HTTPS), and a client TLS
        #: context that trusts its throwaway certificate: set by :meth:`documented`.
        self.http_port: int | None = None
        self.client_context: ssl.SSLContext | None = None
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
        cls, *, upstream: str, prefix: Path, worker_processes: str = "auto", tls: bool = True
    ) -> NginxServer:
        """The configuration from ``docs/deployment.md``, in front of ``upstream``
        (``127.0.0.1:PORT`` or ``unix:PATH``), with a throwaway certificate; :attr:`port`
        serves HTTPS (plain HTTP without ``tls``), :attr:`http_port` the redirect to it."""
        port, http_port = free_port(), free_port()
        while http_port == port:
            http_port = free_port()
        certificate = throwaway_certificate(prefix)
        site = loopback_site(
            documented_site(),
            listen_port=port,
            http_port=http_port,
            upstream=upstream,
            certificate=certificate,
            tls=tls,
        )
        server = cls(site, port=port, prefix=prefix, worker_processes=worker_processes)
        server.http_port = http_port
        server.client_context = ssl.create_default_context(cafile=certificate[0])
        return server

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
