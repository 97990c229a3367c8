"""A hostile service on loopback, and the peak memory of ``payhooks sync`` against it.

:class:`HostileService` answers ``GET /v4/transactions`` in one of :data:`BEHAVIOURS`: a gzip
bomb (``--bomb-mib`` decoded, about a thousandth of it on the wire), a new cursor on every page
forever, a page trickled one byte every ``--trickle-seconds``, a cursor of 70,000 characters,
JSON nested 100,000 deep, a page holding an item the ledger cannot store, and a new cursor on
every page whose 100 items each carry a status string never seen before (150 characters),
forever or for ``fresh_pages`` pages. Any of them can wait ``pause_seconds`` before each
answer. The tests use it too
(``tests/service/sync/test_hostile.py``).

Run by hand: ``python -m bench.hostile_service [--bomb-mib N] [--trickle-seconds S]``. For each
behaviour it runs ``payhooks sync`` in a child process against a fresh ledger and prints its
exit status, time, peak RSS (``ru_maxrss`` of the child) and the last line it printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from payhooks.storage import Ledger

BEHAVIOURS = (
    "gzip-bomb",
    "endless",
    "trickle",
    "huge-cursor",
    "deep",
    "bad-item",
    "fresh-statuses",
)


def item(number: int, **changes: Any) -> dict[str, Any]:
    """One list item as the sandbox lists it."""
    return {
        "type": "transaction",
        "id": f"tx-{number}",
        "status": "succeeded",
        "external_identifier": f"order-{number}",
        **changes,
    }


def page(items: list[dict[str, Any]], next_cursor: str | None) -> bytes:
    body = {"items": items, "limit": 20, "next_cursor": next_cursor, "previous_cursor": None}
    return json.dumps(body).encode()


def _gzip_bomb(mib: int) -> bytes:
    """A page whose first item is followed by ``mib`` MiB of spaces, gzip-compressed."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = page([item(1)], None)
    parts = [packer.compress(head[:-1])]
    spaces = b" " * (1024 * 1024)
    parts += [packer.compress(spaces) for _ in range(mib)]
    parts += [packer.compress(b"}"), packer.flush()]
    return b"".join(parts)


class HostileService:
    """A real HTTP server on loopback answering the list in one hostile way."""

    def __init__(
        self,
        behaviour: str,
        *,
        bomb_mib: int = 64,
        trickle_seconds: float = 0.2,
        pause_seconds: float = 0.0,
        fresh_pages: int = 0,
    ):
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour must be one of {BEHAVIOURS}, not {behaviour!r}")
        self.behaviour = behaviour
        self.trickle_seconds = trickle_seconds
        self.pause_seconds = pause_seconds
        self.fresh_pages = fresh_pages
        self.bomb = _gzip_bomb(bomb_mib) if behaviour == "gzip-bomb" else b""
        self.requests = 0
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                service.requests += 1
                cursor = parse_qs(urlsplit(self.path).query).get("cursor", [None])[0]
                service.answer(self, cursor)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def answer(self, handler: BaseHTTPRequestHandler, cursor: str | None) -> None:
        headers = {"Content-Type": "application/json"}
        number = int(cursor.rsplit("-", 1)[1]) if cursor and cursor[-1].isdigit() else 0
        time.sleep(self.pause_seconds)
        if self.behaviour == "gzip-bomb":
            body, headers["Content-Encoding"] = self.bomb, "gzip"
        elif self.behaviour == "endless":
            body = page([item(number)], f"page-{number + 1}")
        elif self.behaviour == "huge-cursor":
            body = page([item(number)], "c" * 70_000 if cursor is None else None)
        elif self.behaviour == "deep":
            body = b"[" * 100_000 + b"]" * 100_000
        elif self.behaviour == "fresh-statuses":
            fresh = [
                item(100 * number + i, status=f"made-up-{100 * number + i:010}".ljust(150, "."))
                for i in range(100)
            ]
            last = self.fresh_pages and number + 1 >= self.fresh_pages
            body = page(fresh, None if last else f"page-{number + 1}")
        elif self.behaviour == "bad-item":
            bad = [item(2, external_identifier="x" * 250), item(3, id="tx-\u0000")]
            body = page([item(1), *bad, item(4)], None)
        else:
            body = page([item(1)], None)
        handler.send_response(200)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        try:
            if self.behaviour == "trickle":
                for byte in _bytes(body):
                    handler.wfile.write(byte)
                    handler.wfile.flush()
                    time.sleep(self.trickle_seconds)
            else:
                handler.wfile.write(body)
        except OSError:  # the client gave up: what this server is for
            pass

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> HostileService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bytes(body: bytes) -> Iterator[bytes]:
    return (body[i : i + 1] for i in range(len(body)))


def run_sync(
    url: str, database: Path, *extra: str, give_up: float = 120
) -> tuple[int, float, float, str]:
    """``payhooks sync`` in a child, killed after ``give_up`` seconds: its exit status,
    seconds, peak RSS in MiB, last line printed."""
    env = {
        **os.environ,
        "PAYHOOKS_DATABASE": str(database),
        "PAYHOOKS_SERVICE_URL": url,
        "PAYHOOKS_SERVICE_TOKEN": "token",
        "PAYHOOKS_MERCHANT_ACCOUNT_ID": "merchant",
    }
    Ledger(database).close()
    command = [str(Path(sys.executable).with_name("payhooks")), "sync", *extra]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as output:
        child = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
        killer = threading.Timer(give_up, child.kill)
        killer.start()
        _, status, usage = os.wait4(child.pid, 0)
        killer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        took = time.perf_counter() - started
        output.seek(0)
        lines = output.read().decode(errors="replace").strip().splitlines() or [""]
    return child.returncode, took, usage.ru_maxrss / 1024, lines[-1][:160]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bomb-mib", type=int, default=2048, help="the bomb, decoded (MiB)")
    parser.add_argument("--trickle-seconds", type=float, default=4.0)
    parser.add_argument("--give-up", type=float, default=120, help="seconds before a kill")
    parser.add_argument("sync_options", nargs="*", help="passed to payhooks sync (after --)")
    args = parser.parse_args()
    extra = args.sync_options
    with tempfile.TemporaryDirectory() as folder:
        for behaviour in BEHAVIOURS:
            options = {"bomb_mib": args.bomb_mib, "trickle_seconds": args.trickle_seconds}
            with HostileService(behaviour, **options) as service:
                wire = f" ({len(service.bomb):,} bytes on the wire)" if service.bomb else ""
                database = Path(folder) / f"{behaviour}.db"
                status, took, rss, last = run_sync(
                    service.url, database, *extra, give_up=args.give_up
                )
            print(f"{behaviour}{wire}: exit {status}, {took:.1f} s, peak RSS {rss:.1f} MiB")
            print(f"    {last}")


if __name__ == "__main__":
    main()
