"""Benchmark: the receiver's p99 while viewers loop on the console's most expensive page and
exports run, at 10^6 payments, on SQLite and PostgreSQL.

Issue 37's goal: with four viewers looping on the most expensive page and two exports running,
the receiver's p99 is at most 2x its p99 alone. The ledger is :mod:`bench.console_ledger`'s
(10^6 payments and deliveries over 120 days, built once per ``--database`` and reused), served
by gunicorn as docs/deployment.md documents it (4 sync workers). Three layouts, each a
contender:

``alone``
    notifications only: the floor.
``shared``
    the console mounted in the receiver's app, served by the receiver's own workers, the way a
    merchant starts; the viewers and the exports go to that server.
``own processes``
    the console in processes of its own (a second gunicorn, 2 sync workers, 10 nicer than the
    receiver, the console alone on the same ledger), as docs/deployment.md recommends for shops
    with more than a few thousand payments a day; the viewers and the exports go there.

Each round runs every layout once, in rotated order (:mod:`bench.rounds`): the load starts
(``--viewers`` threads, each a person looping ``GET`` on ``--page``, and ``--exports`` people
each starting an export, waiting for it and downloading it, again and again), then
``--notifications`` signed notifications go one after another to the receiver, each timed on
the wall clock from request to answer; then the load stops, and the exports under way are
followed to their end and downloaded, so that none runs into the next phase (which may be the
receiver alone). A round's ratio is a layout's p99
over that round's ``alone`` p99; the median of the per-round ratios is printed with its spread,
beside the p50 and p99 over every round, the viewers' pages answered (and how many said they
stopped at the time limit) and the exports finished.

Run::

    python -m bench.console_load --n 20000 --rounds 1 --notifications 50   # a smoke run
    python -m bench.console_load --database /tmp/console-1e6.db            # 10^6, SQLite
    python -m bench.console_load --database /tmp/console-1e6.db --start-postgres --no-sqlite
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx

from bench.console import _built
from bench.console_ledger import build
from bench.postgres import add_arguments, postgres_database
from bench.receive import NOTIFY, REPO, register, sign
from bench.rounds import Ratios, at_least, order, ratios
from payhooks.verify import generate_keypair
from tests.support.gunicorn_server import GunicornServer

#: The goal: the receiver's p99 under the load, over its p99 alone.
P99_GOAL = 2.0
ALONE, SHARED, OWN = "alone", "shared", "own processes"
LAYOUTS = (ALONE, SHARED, OWN)
#: The most expensive page: the finance page over three years (1,095 days).
DEFAULT_PAGE = "/console/reconciliation?from=2023-05-03&until=2026-05-02"
#: How long a started export is waited for.
EXPORT_WAIT_SECONDS = 900
#: A cheap finance page (one day) the exports take their form from.
FORM_PAGE = "/console/reconciliation?from=2026-04-30&until=2026-05-01"
#: The first payment number the bench's notifications are about (far from the ledger's own).
FIRST_ORDER = 50_000_000

_FORM = re.compile(r"<form\b[^>]*>.*?</form>", re.S)
_ACTION = re.compile(r'action="([^"]*)"')
_HIDDEN = re.compile(r'<input\b[^>]*type="hidden"[^>]*>')
_NAME = re.compile(r'name="([^"]*)"')
_VALUE = re.compile(r'value="([^"]*)"')
_ERROR = re.compile(r'data-error="([a-z_]+)"')
_STATE = re.compile(r'class="export-state" data-state="([a-z]+)"')
_DOWNLOAD = re.compile(r'href="([^"]*/exports/[^"]*\.csv)"')


@dataclass
class Load:
    """What the viewers and the exports did during one phase."""

    pages: Counter[str] = field(default_factory=Counter)
    page_seconds: list[float] = field(default_factory=list)
    exports: Counter[str] = field(default_factory=Counter)


def _form(html: str, action_part: str) -> tuple[str, dict[str, str]]:
    """The action and hidden fields of the first form whose action contains ``action_part``."""
    for form in _FORM.findall(html):
        action = _ACTION.search(form)
        if action and action_part in action.group(1):
            fields = {}
            for hidden in _HIDDEN.findall(form):
                name, value = _NAME.search(hidden), _VALUE.search(hidden)
                if name:
                    fields[unescape(name.group(1))] = unescape(value.group(1)) if value else ""
            return unescape(action.group(1)), fields
    raise LookupError(f"no form posting to *{action_part}* on the page")


def _viewer(base: str, page: str, who: str, stop: threading.Event, load: Load) -> None:
    with httpx.Client(base_url=base, headers={"X-Bench-Viewer": who}, timeout=300) as client:
        while not stop.is_set():
            started = time.perf_counter()
            answer = client.get(page)
            load.page_seconds.append(time.perf_counter() - started)
            error = _ERROR.search(answer.text)
            if error:
                load.pages[f"{answer.status_code} {error.group(1)}"] += 1
            else:
                stopped = "stopped counting" in answer.text
                load.pages[f"{answer.status_code}{' stopped counting' if stopped else ''}"] += 1


def _exporter(base: str, page: str, who: str, stop: threading.Event, load: Load) -> None:
    headers = {"X-Bench-Viewer": who}
    with httpx.Client(base_url=base, headers=headers, timeout=300) as client:
        while not stop.is_set():
            # The form (and its token) from a day's page, which answers even when the long
            # period's page stops at the time limit; the export is of the long period.
            shown = client.get(FORM_PAGE)
            try:
                action, fields = _form(shown.text, "export")
                fields.update(parse_qsl(urlsplit(page).query))
            except LookupError:  # the page was the time limit's, or the person's turn's
                load.exports[f"page {shown.status_code} without the form"] += 1
                stop.wait(1)
                continue
            answer = client.post(action, data=fields, follow_redirects=True)
            if answer.status_code != 200:
                load.exports[f"start {answer.status_code}"] += 1
                stop.wait(1)
                continue
            where = str(answer.url)
            # Once started, an export is followed to its end even past the phase: one still
            # running would load the next phase, which may be the receiver alone.
            finish_by = time.monotonic() + EXPORT_WAIT_SECONDS
            while time.monotonic() < finish_by:
                state = _STATE.search(answer.text)
                if state and state.group(1) == "ready":
                    found = _DOWNLOAD.search(answer.text)
                    csv = client.get(unescape(found.group(1))) if found else None
                    load.exports[f"downloaded {csv.status_code if csv else 'no link'}"] += 1
                    break
                if state is None or state.group(1) != "running":
                    load.exports[f"{state.group(1) if state else answer.status_code}"] += 1
                    break
                time.sleep(0.5)
                answer = client.get(where)
            else:
                load.exports[f"not done after {EXPORT_WAIT_SECONDS} s"] += 1


@contextmanager
def loaded(base: str | None, page: str, viewers: int, exports: int) -> Iterator[Load]:
    """The viewers and exports running against ``base`` (nothing for None) while inside."""
    load, stop, threads = Load(), threading.Event(), []
    if base is not None:
        for number in range(viewers):
            threads.append((_viewer, f"viewer {number}"))
        for number in range(exports):
            threads.append((_exporter, f"exporter {number}"))
    running = [
        threading.Thread(target=work, args=(base, page, who, stop, load), daemon=True)
        for work, who in threads
    ]
    for thread in running:
        thread.start()
    if running:
        time.sleep(1.0)  # the load under way before the first notification
    try:
        yield load
    finally:
        stop.set()
        for thread in running:
            thread.join(timeout=600)


def send(
    port: int, jobs: Iterable[tuple[bytes, dict[str, str]]], every: float = 0.0
) -> list[float]:
    """Each job sent after the previous one's answer; each one's seconds to its answer.

    With ``every`` (seconds), at a steady rate instead: job ``i`` is due ``i * every`` after
    the first, sent when due (at once when the previous answer came late), and timed from when
    it was due, so that a receiver stalled for a second shows in every job it delayed, not in
    one slow answer only (a client that waits for answers would otherwise hide the stall)."""
    times = []
    first = time.perf_counter()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
        for number, (body, headers) in enumerate(jobs):
            if every:
                started = first + number * every
                time.sleep(max(0.0, started - time.perf_counter()))
            else:
                started = time.perf_counter()
            answer = client.post(NOTIFY, content=body, headers=headers)
            times.append(time.perf_counter() - started)
            if answer.status_code != 200:
                raise RuntimeError(f"a notification got {answer.status_code}: {answer.text[:200]}")
    return times


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _renice(server: GunicornServer, niceness: int) -> None:
    """``niceness`` more than the bench's own (which the receiver inherits)."""
    for pid in {server.master_pid, *server.worker_pids()}:
        os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0) + niceness)


def run(target: Path | str, args: argparse.Namespace, folder: Path) -> None:
    """Every round on ``target``; print the figures."""
    keys = generate_keypair("standard-webhooks")
    layouts = (ALONE, *(layout for layout in LAYOUTS[1:] if layout in args.layouts))
    total = args.rounds * len(layouts) * args.notifications
    register(target, FIRST_ORDER, total)
    env = {
        "PAYHOOKS_DATABASE": str(target),
        "PAYHOOKS_SECRETS": keys.verifying_key,
        "PYTHONPATH": str(REPO),
    }
    parts = {part: folder / part for part in ("receiver", "console")}  # instance folders
    for part_folder in parts.values():
        part_folder.mkdir(exist_ok=True)
    app = "bench.console_load_app:create_app()"
    with ExitStack() as stack:
        receiver = stack.enter_context(
            GunicornServer(
                app,
                env={**env, "BENCH_PART": "receiver", "BENCH_FOLDER": str(parts["receiver"])},
                cwd=folder,
                workers=4,
            )
        )
        console = stack.enter_context(
            GunicornServer(
                app,
                env={**env, "BENCH_PART": "console", "BENCH_FOLDER": str(parts["console"])},
                cwd=folder,
                workers=args.console_workers,
            )
        )
        _renice(console, args.nice)
        bases = {
            ALONE: None,
            SHARED: f"http://127.0.0.1:{receiver.port}",
            OWN: f"http://127.0.0.1:{console.port}",
        }
        p99s: dict[str, list[float]] = {layout: [] for layout in layouts}
        times: dict[str, list[float]] = {layout: [] for layout in layouts}
        loads: dict[str, Load] = {layout: Load() for layout in layouts}
        next_order = FIRST_ORDER
        send(receiver.port, sign(next_order - 20, 20, keys.signing_key))  # warm every worker
        for round_index in range(args.rounds):
            for layout in order(layouts, round_index):
                jobs = sign(next_order, args.notifications, keys.signing_key)
                next_order += args.notifications
                with loaded(bases[layout], args.page, args.viewers, args.exports) as load:
                    phase = send(receiver.port, jobs)
                p99s[layout].append(percentile(phase, 0.99))
                times[layout].extend(phase)
                loads[layout].pages.update(load.pages)
                loads[layout].page_seconds.extend(load.page_seconds)
                loads[layout].exports.update(load.exports)
                print(
                    f"  round {round_index + 1} {layout:>13}: p99 {p99s[layout][-1] * 1000:.0f} ms"
                    f"  pages {dict(load.pages)}  exports {dict(load.exports)}",
                    flush=True,
                )
        report(p99s, times, loads)


def report(
    p99s: dict[str, list[float]], times: dict[str, list[float]], loads: dict[str, Load]
) -> None:
    print(f"{'layout':>14} | {'p50 ms':>7} | {'p99 ms':>7} | p99 / alone's, median [spread]")
    for layout in p99s:
        shown = times[layout]
        ratio: Ratios = ratios(p99s, layout, ALONE)
        verdict = ""
        if layout != ALONE:
            verdict = "  goal met" if ratio.median <= P99_GOAL else "  goal MISSED"
        print(
            f"{layout:>14} | {percentile(shown, 0.5) * 1000:7.1f} | "
            f"{percentile(shown, 0.99) * 1000:7.1f} | {ratio.text()}{verdict}"
        )
        load = loads[layout]
        if load.page_seconds:
            print(
                f"{'':>14}   viewers' pages: {dict(load.pages)}, "
                f"p50 {statistics.median(load.page_seconds):.2f} s, "
                f"max {max(load.page_seconds):.2f} s; exports: {dict(load.exports)}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=at_least(100), default=1_000_000, help="payments in the ledger")
    parser.add_argument("--database", type=Path, default=None, help="the SQLite ledger, reused")
    parser.add_argument("--rounds", type=at_least(1), default=5)
    parser.add_argument("--notifications", type=at_least(1), default=200, help="per phase")
    parser.add_argument("--viewers", type=at_least(0), default=4)
    parser.add_argument("--exports", type=at_least(0), default=2)
    parser.add_argument("--console-workers", type=at_least(1), default=2)
    parser.add_argument(
        "--nice", type=int, default=10, help="the console processes' niceness over the bench's"
    )
    parser.add_argument("--page", default=DEFAULT_PAGE)
    parser.add_argument(
        "--layouts",
        nargs="+",
        choices=LAYOUTS[1:],
        default=list(LAYOUTS[1:]),
        help="the loaded layouts to compare with the receiver alone",
    )
    parser.add_argument("--no-sqlite", action="store_true")
    add_arguments(parser, "measure")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-console-load-") as temp:
        folder = Path(temp)
        with postgres_database(args) as url:
            targets: list[Path | str] = []
            if not args.no_sqlite:
                targets.append(args.database or folder / "console.db")
            if url:
                targets.append(url)
            for target in targets:
                if _built(target) != args.n:
                    print(f"building {args.n:,} payments in {target} ...", flush=True)
                    build(target, args.n)
                engine = "PostgreSQL" if isinstance(target, str) else "SQLite"
                print(
                    f"{engine}, {args.n:,} payments: {args.viewers} viewers on {args.page}, "
                    f"{args.exports} exports, {args.notifications} notifications per phase",
                    flush=True,
                )
                run(target, args, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
