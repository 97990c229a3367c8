"""A real PostgreSQL server for the tests, from the distribution's binaries.

:class:`PostgresServer` makes a temporary data directory, ``initdb``s it and starts the server
on a free loopback port with ``pg_ctl``, as an unprivileged user when the tests run as root
(PostgreSQL refuses root). It trades durability for speed (``fsync=off``, and its data in
memory where ``/dev/shm`` has room): what is tested is the ledger's SQL, transactions and
concurrency, not the server's crash safety. The benches
(:mod:`bench.postgres`) start it with ``durable=True`` instead: PostgreSQL's own defaults
(``fsync``, ``synchronous_commit``), because what they time is a durable commit. :meth:`stop`
stops it and removes the directory, and is safe to call after a failed start.

Each test gets a database of its own, copied from a template migrated once
(``CREATE DATABASE ... TEMPLATE``), and dropped after.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.support.processes import free_port

#: What a developer without the server runs (Debian and Ubuntu).
INSTALL_COMMAND = "apt-get update && apt-get install -y postgresql"

_names = itertools.count(1)


#: Where the tests' throwaway servers keep their data when it can: memory (tmpfs), not disk.
#: Each test copies the template database (``CREATE DATABASE ... TEMPLATE``, several MB of
#: catalog), which on a loaded disk takes up to half a second and in memory a tenth of that;
#: the data is thrown away anyway (``fsync=off``). Only with room to spare: a container's
#: ``/dev/shm`` is often 64 MB.
MEMORY_FOLDER = Path("/dev/shm")
_MEMORY_NEEDED = 1 << 30


def _scratch_folder(durable: bool) -> str | None:
    """The folder for a server's data: :data:`MEMORY_FOLDER` for the tests' server when it is
    there, writable and roomy; else (and for a durable bench server) the usual temp folder."""
    if durable or not os.access(MEMORY_FOLDER, os.W_OK | os.X_OK):
        return None
    try:
        roomy = shutil.disk_usage(MEMORY_FOLDER).free >= _MEMORY_NEEDED
    except OSError:
        return None
    return str(MEMORY_FOLDER) if roomy else None


def find_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` with ``pg_ctl``, else ``pg_ctl``'s folder on
    the PATH, else None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda path: int(Path(path).parent.parent.name or 0),
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


class PostgresServer:
    """One throwaway server; see the module docstring.

    :param bin_dir: the folder of ``initdb`` and ``pg_ctl``.
    :param durable: keep PostgreSQL's durable defaults (a bench timing commits); the tests'
        server runs with ``fsync=off`` and ``synchronous_commit=off``.
    """

    def __init__(self, bin_dir: Path, *, durable: bool = False) -> None:
        self.bin_dir = bin_dir
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="payhooks-pg-", dir=_scratch_folder(durable)))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.started = False
        # PostgreSQL refuses to run as root: then as the distribution's `postgres` user.
        self._user: dict[str, Any] = {}
        if os.geteuid() == 0:
            self._user = {"user": "postgres", "group": "postgres", "extra_groups": []}
            shutil.chown(self.root, "postgres", "postgres")
        self.admin_url = f"postgresql://payhooks@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            [str(self.bin_dir / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.root,
            **self._user,
        )
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{args[0]} failed: {result.stderr or result.stdout}\n{log}")

    def start(self) -> None:
        """initdb and start; raises RuntimeError with the server's words when either fails."""
        self._run(
            "initdb", "-D", str(self.data), "-U", "payhooks", "--auth=trust",
            "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        self.started = True  # pg_ctl may have started it even when it reports a failure
        self.start_again()

    def start_again(self) -> None:
        """Start the server initdb made (after :meth:`halt`), on the same port."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
        if not self.durable:
            options += "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        options += "-c max_connections=300"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def halt(self) -> None:
        """Stop the server, keeping its data, to see what a client does without it."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, database: str) -> str:
        return f"postgresql://payhooks@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str) -> None:
        """Run one statement as the superuser, outside a transaction (CREATE DATABASE...)."""
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type,unused-ignore]

    def create_database(self, template: str | None = None) -> str:
        """A new, empty database (or a copy of ``template``); its URL."""
        name = f"payhooks_{os.getpid()}_{next(_names)}"
        self.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        self.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        """Stop the server (if it started) and remove its directory."""
        try:
            if self.started:
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
