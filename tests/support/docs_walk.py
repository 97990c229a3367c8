"""Reading the docs as a reader works through them: their fenced blocks, run in order.

The manual is ``README.md`` and every ``docs/*.md`` (a glob: a page added later is walked
without touching the tests). Each page is a sequence of fenced blocks, each optionally preceded
(on the line just above the fence) by an HTML comment that the rendered page does not show:

- ```` ```python ````: run as a script in a subprocess, as a reader who pastes it into a file
  would. ``<!-- continued -->`` continues the previous Python block: a chain is run once,
  whole, when it ends.
- ```` ```sh ````: run with ``bash -euo pipefail``; ``payhooks``, ``flask``, ``gunicorn`` and
  ``python`` are this environment's.
- ```` ```sql ````: run against ``./payhooks.db``, the ledger the shell examples built.
- ```` ```json ````: must parse.
- ``<!-- file: NAME -->`` before any block: its text is written to ``NAME`` for later blocks.
- ``<!-- add-to: NAME before: LINE -->``: the reader adds the block to the file ``NAME``, just
  above its last line that reads ``LINE`` (ignoring indentation).
- ``<!-- server -->`` before a ```` ```sh ```` block: it serves until stopped (the reader's
  first terminal). It is started in the background with its documented port (one of
  :data:`DOCUMENTED_PORTS`) swapped for a free one, and stopped at the next server block or
  the end of the walk.
- ``<!-- with-server -->``: run while that server listens (the reader's second terminal), with
  the port swapped too, and with any ``export NAME=value`` line the server printed run first,
  as the docs tell the reader to.
- A PostgreSQL URL written as :data:`DOCUMENTED_DATABASE_URL` in a shell block is swapped for
  the walk's own server's (:attr:`Walkthrough.database_url`), as a port is.
- ``<!-- not-tested: reason -->``: skipped, with the reason given (a network install).
- ``<!-- tree -->`` before a ```` ```text ```` block: a drawing of the source tree (the code
  map's), not run; ``tests/system/test_docs.py`` checks it against the folders.

A page that builds on another says so once, anywhere on the page: ``<!-- after: PAGE -->``
(a path relative to the page). It is walked right after that page, in the same folder, as a
reader who has just done the other page's steps; pages that name no other are each walked in a
fresh folder.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from tests.support.processes import free_port, start_listening, stop_session

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

#: The port each kind of server in the docs is written with, one per kind, so that a reader can
#: run them side by side: the README's shop (flask, gunicorn), ``payhooks serve``, the sandbox.
DOCUMENTED_PORTS = {"shop": 8000, "payhooks serve": 8100, "payhooks sandbox": 8400}

#: The database URL the docs write for a PostgreSQL ledger.
DOCUMENTED_DATABASE_URL = "postgresql://payhooks:SECRET@db.internal:5432/payhooks"

_FENCE = re.compile(r"^```(\S*)\s*$")
_MARKER = re.compile(r"^<!--\s*([a-z-]+)(?::\s*(.*?))?\s*-->$")
_EXPORT = re.compile(r"^\s*export ([A-Z_][A-Z0-9_]*)=(\S+)\s*$", re.MULTILINE)


def pages() -> list[Path]:
    """The manual's pages: the README, then every page of ``docs/``."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def page_name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def manual_text() -> str:
    """Every page, one after the other: where the reference tables are looked for."""
    return "\n".join(page.read_text(encoding="utf-8") for page in pages())


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    text: str
    marker: str | None
    argument: str | None

    @property
    def where(self) -> str:
        return f"{self.page} line {self.line} ({self.language})"


def read_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` with the marker comment just above it, if any."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        start = index
        index += 1
        body: list[str] = []
        while not lines[index].startswith("```"):
            body.append(lines[index])
            index += 1
        index += 1
        above = _MARKER.match(lines[start - 1].strip()) if start else None
        found.append(
            Block(
                page=page_name(page),
                line=start + 1,
                language=fence.group(1),
                text="\n".join(body) + "\n",
                marker=above.group(1) if above else None,
                argument=above.group(2) if above else None,
            )
        )
    return found


def predecessor(page: Path) -> Path | None:
    """The page ``page`` builds on (its ``<!-- after: PAGE -->``), if any."""
    for line in page.read_text(encoding="utf-8").splitlines():
        marker = _MARKER.match(line.strip())
        if marker and marker.group(1) == "after" and marker.group(2):
            return (page.parent / marker.group(2)).resolve()
    return None


def walks() -> list[list[Path]]:
    """The walks through the manual: each page that builds on none, followed by the pages that
    build on it (and on those), depth first, in name order."""
    every = pages()
    after = {page: predecessor(page) for page in every}

    def chain(page: Path) -> list[Path]:
        followers = [other for other in every if after[other] == page.resolve()]
        return [page, *(step for other in followers for step in chain(other))]

    return [chain(page) for page in every if after[page] is None]


def server_kind(text: str) -> str:
    """Which kind of server a server block starts: a key of :data:`DOCUMENTED_PORTS`."""
    for kind in ("payhooks serve", "payhooks sandbox"):
        if re.search(rf"(?m)^{kind}\b", text):
            return kind
    return "shop"


def swap_port(text: str, port: int, documented: int) -> str:
    """``text`` with the ``documented`` port swapped for ``port``, on loopback."""
    swapped = text.replace(f"0.0.0.0:{documented}", f"127.0.0.1:{port}")
    swapped = swapped.replace(f"127.0.0.1:{documented}", f"127.0.0.1:{port}")
    return swapped.replace(f"--port {documented}", f"--port {port}")


class ServerError(AssertionError):
    """A documented server command did not come up; the message has its output."""


class Server:
    """A documented server command, run with ``bash`` in a session of its own."""

    def __init__(self, block: Block, *, folder: Path, env: dict[str, str]) -> None:
        self.block = block
        self.port = free_port()
        kind = server_kind(block.text)
        #: The port the docs wrote for this server, swapped in the reader's other blocks too.
        self.documented_port = DOCUMENTED_PORTS[kind]
        self.command = swap_port(block.text, self.port, self.documented_port)
        if self.command == block.text:
            raise ServerError(
                f"{block.where}: a server block of {kind} must name port {self.documented_port}"
            )
        self.log_path = folder / f".server_line_{block.line}.log"
        self._folder = folder
        self._env = env
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, *, timeout: float = 60.0) -> Server:
        """Start the command and wait until it listens; stop it again if it never does."""
        self._process = start_listening(
            ["bash", "-euo", "pipefail", "-c", self.command],
            port=self.port,
            log_path=self.log_path,
            timeout=timeout,
            failure=lambda what: ServerError(f"{self.block.where} {what}:\n{self.output()}"),
            cwd=self._folder,
            env=self._env,
        )
        return self

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def documented_exports(self, env: Mapping[str, str]) -> set[str]:
        """The names of the ``export NAME=...`` lines the docs show this server printing (in
        its block's comments) that the reader has not set: a reader runs those before the
        next block, whether that block names them (``$NAME``) or a command reads them."""
        shown = "\n".join(
            line.lstrip().lstrip("#") for line in self.block.text.splitlines()
            if line.lstrip().startswith("#")
        )  # fmt: skip
        return set(dict(_EXPORT.findall(shown))) - env.keys()

    def exports(self, needed: Iterable[str], *, timeout: float = 30.0) -> dict[str, str]:
        """The ``export NAME=value`` lines the server printed for the reader to run.

        A server listens before it prints (``payhooks serve``, ``payhooks sandbox``), so on a
        loaded machine the lines can come after the port is open: wait until every name the
        reader's block ``needed`` is there (or the timeout, and let the block fail on it).
        """
        wanted = set(needed)
        deadline = time.monotonic() + timeout
        found = dict(_EXPORT.findall(self.output()))
        while not wanted <= found.keys() and time.monotonic() < deadline:
            time.sleep(0.05)
            found = dict(_EXPORT.findall(self.output()))
        return found

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self, *, timeout: float = 30.0) -> None:
        """SIGTERM to the server's session, then SIGKILL to whatever is left of it."""
        process, self._process = self._process, None
        if process is not None:
            stop_session(process, signal.SIGTERM, whole_session=True, timeout=timeout)


def printed_names(text: str, env: Mapping[str, str]) -> set[str]:
    """The variables a shell block reads (``$NAME``, ``${NAME}``) that neither the reader's
    environment nor the block itself sets: those a server printed for the reader to export."""
    read = set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", text))
    assigned = set(re.findall(r"(?:^|\s)([A-Z_][A-Z0-9_]*)=", text, re.MULTILINE))
    return read - assigned - env.keys()


class WalkError(AssertionError):
    """A block did not run as the docs say; the message names the page and line."""


class Walkthrough:
    """Runs pages' blocks in one folder, like a reader working through them."""

    def __init__(self, folder: Path, *, secret: str, service_public_key: str) -> None:
        self.folder = folder
        base = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("PAYHOOKS_", "FLASK_")) and name != "SECRET_KEY"
        }
        # payhooks and python from this environment come first, as after `. .venv/bin/activate`.
        base["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), base.get("PATH", "")])
        self.env = base
        # What a reader has exported before the Python examples: a secret from `payhooks
        # keygen`, a Flask secret key, the service's RSA public key.
        self.python_env = {
            **base,
            "PAYHOOKS_SECRETS": secret,
            "SECRET_KEY": "docs-secret-key",
            "SERVICE_PUBLIC_KEY": service_public_key,
        }
        self.chain: list[Block] = []
        self.server: Server | None = None
        #: The PostgreSQL database that stands in for :data:`DOCUMENTED_DATABASE_URL`.
        self.database_url: str | None = None

    def localized(self, block: Block) -> Block:
        """``block`` with the documented database URL swapped for the walk's own."""
        if DOCUMENTED_DATABASE_URL not in block.text:
            return block
        if self.database_url is None:
            self.fail(block, "names a PostgreSQL database, and the walk has none", "")
        text = block.text.replace(DOCUMENTED_DATABASE_URL, self.database_url)
        return dataclasses.replace(block, text=text)

    def fail(self, block: Block, what: str, output: str) -> NoReturn:
        raise WalkError(f"{block.where} {what}:\n{output}")

    def walk(self, page: Path) -> None:
        self.run(read_blocks(page))

    def run(self, blocks: list[Block]) -> None:
        for block in blocks:
            if block.marker != "continued":
                self.flush_python()
            if block.marker == "not-tested":
                continue
            if block.language == "json":
                self.check_json(block)
            if block.marker == "file":
                assert block.argument
                (self.folder / block.argument).write_text(block.text, encoding="utf-8")
            elif block.marker == "add-to":
                self.add_to(block)
            elif block.marker == "server":
                self.start_server(block)
            elif block.language == "python":
                self.chain.append(block)
            elif block.language == "sh":
                self.shell(block)
            elif block.language == "sql":
                self.sql(block)
        self.flush_python()

    def check_json(self, block: Block) -> None:
        try:
            json.loads(block.text)
        except ValueError as err:
            self.fail(block, "is not JSON", str(err))

    def add_to(self, block: Block) -> None:
        name, _, line = (block.argument or "").partition(" before: ")
        target = self.folder / name
        lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
        spots = [index for index, text in enumerate(lines) if text.strip() == line.strip()]
        if not spots:
            self.fail(block, f"names no line {line!r} of {name}", "".join(lines))
        lines.insert(spots[-1], block.text + "\n")
        target.write_text("".join(lines), encoding="utf-8")

    def flush_python(self) -> None:
        if not self.chain:
            return
        chain, self.chain = self.chain, []
        first = chain[0]
        script = self.folder / f"docs_{Path(first.page).stem}_line_{first.line}.py"
        script.write_text("\n".join(block.text for block in chain), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, script.name],
            cwd=self.folder,
            env=self.python_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            self.fail(chain[-1], f"failed (chain from line {first.line})", done.stderr)

    def shell(self, block: Block) -> None:
        text, env = self.localized(block).text, self.env
        if block.marker == "with-server":
            if self.server is None:
                self.fail(block, "needs a server, and no server block came before it", "")
            text = swap_port(text, self.server.port, self.server.documented_port)
            needed = printed_names(text, env) | self.server.documented_exports(env)
            env = {**env, **self.server.exports(needed)}
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", text],
            cwd=self.folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            self.fail(block, f"exited {done.returncode}", done.stdout + done.stderr)

    def sql(self, block: Block) -> None:
        conn = sqlite3.connect(self.folder / "payhooks.db")
        try:
            conn.execute(block.text).fetchall()
        except sqlite3.Error as err:
            self.fail(block, "is not valid against the ledger", str(err))
        finally:
            conn.close()

    def start_server(self, block: Block) -> Server:
        self.stop_server()
        self.server = Server(self.localized(block), folder=self.folder, env=self.env).start()
        return self.server

    def stop_server(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def close(self) -> None:
        self.stop_server()
