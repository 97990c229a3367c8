"""Benchmark: the console's pages on a large ledger, each against the bare SQL it needs.

Issue 29's goals, on a ledger of a million payments and a million deliveries: every console
page's server time at most 150 ms at the 95th percentile and within 3x of its bare SQL.

The ledger is :mod:`bench.console_ledger`'s (deliveries over 120 days, realistic bodies and
headers), built once per ``--database`` path and reused by later runs (or, with
``--postgres URL`` / ``--start-postgres``, in PostgreSQL). The pages are served by a real app:
``PayHooks`` and ``Console`` (its ``authorize`` hook grants ``viewer``, its clock is the
ledger's end), called through Flask's test client, so what is timed is the server's work:
routing, the ledger's queries, building rows, rendering the template.

Each page is one entry of :data:`PAGES`: its URL and the bare SQL it needs (the statements
that fetch the same rows and counts), run through the same driver (``sqlite3``, or psycopg
with ``%s`` for ``?``) on a connection of its own, without the app, and fetched whole. Both
contenders are called request by request, alternating, ``--requests`` times per page and
round, with the pages' order rotated from round to round (:mod:`bench.rounds`); each round's
ratio is the median of the page's times over the median of its bare SQL's, and the median of
those per-round ratios is printed with its spread, beside the page's p50 and p95 over every
round, and whether each goal is met.

Times are CPU time, not the wall clock: this machine is small and shared, and with other
work beside it the scheduler's pauses land on whichever request was running, which makes a
wall-clock p95 a measure of the neighbours. On SQLite everything a page costs runs in this
process (the app, the driver, SQLite itself), so its CPU time is the server's time; on a
PostgreSQL server on this machine, the server's processes' CPU time is added (read from
``/proc``, as ``bench.reconcile`` does; the wall clock for a server elsewhere). The data is
warm in the caches (one untimed pass first), so the pages are CPU-bound.

Run::

    python -m bench.console --n 2000 --rounds 1          # a smoke run, seconds
    python -m bench.console --database /tmp/console-1e6.db   # N = 1,000,000, built once
    python -m bench.console --n 100000 --start-postgres  # on a throwaway PostgreSQL server

The finance page is measured too, as the console serves it (tiles, chart, first page of rows,
totals: whatever the page reads them from): ``/reconciliation`` for today, 7 days (its
default), 30 and 90 days, 90 days with the chart as a table, a custom year and three years
(issue 39's periods; the console's clock is a second before the ledger's end, so "today" is its
last day) against the statements of ``storage/reads/finance_sql.py`` it runs,
its 90-day chart (``Ledger.finance.buckets``, the SQL and the folding into buckets) against the
bare daily aggregates (goal 2x), and the console's export of the 90 days' rows (what its
writer does outside the request, run here on this thread, into a file) against what
``payhooks reconcile --format csv --since --until`` does for the same rows (``Ledger.reconcile``
through the command's ``write_report``; goal 1.5x). The last line gives this process's peak
RSS (``ru_maxrss``) after every page, the CSV's included (goal: under 100 MB).

The goals hold "with the rollups up to date": before timing, ``payhooks rollup`` brings
finance's rollup up to date in a process of its own, and its line says what it did, its wall
time and its peak RSS (on a ledger just built, a full refresh's cost).

At 10^6 payments and more, ``--no-bare`` times the pages alone (half the time), and ``--page
'finance, ' --page 'finance chart'`` leaves out the CSV, whose time follows its rows.
``--late 1000`` then records 1,000 late deliveries over the last 90 days through the receiver's
own path (``Ledger.receiver``: each pays a payment opened on a past day), times the first
finance page after them apart (it pays for any totals it must bring up to date) and measures
the finance pages again. It changes the ledger: measure it on a fresh build.

    python -m bench.console --database /tmp/c1e6.db --no-bare --rounds 1 --requests 3 \\
        --page 'finance, ' --page 'finance chart' --late 1000
"""

from __future__ import annotations

import argparse
import io
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from flask import Flask
from werkzeug.datastructures import MultiDict

from bench.console_ledger import END, build, built_n, identifier, write_late
from bench.postgres import add_arguments, postgres_database, settings
from bench.reconcile import _ServerClock
from bench.rounds import Ratios, alternate, at_least
from payhooks.console import Console
from payhooks.console.export_files import ExportFolder
from payhooks.console.export_writer import write_export
from payhooks.console.finance_query import parse_finance_query
from payhooks.receiver import PayHooks, receiver_state
from payhooks.receiver.cli.reports import write_report
from payhooks.storage import Ledger
from payhooks.storage.reads import FinanceFilter, finance_sql
from payhooks.storage.reads.finance import bucket_size_for
from payhooks.storage.times import to_text
from payhooks.storage.views import RECONCILIATION_COLUMNS
from payhooks.verify import generate_keypair

#: The goals of issue 29: a page's p95 server time, and its ratio to its bare SQL.
P95_GOAL_MS = 150.0
RATIO_GOAL = 3.0
#: The finance page's goals: its chart against the bare aggregate, its CSV against the CLI's.
CHART_GOAL = 2.0
CSV_GOAL = 1.5
RSS_GOAL_MB = 100.0

Statement = tuple[str, tuple[Any, ...]]

#: The console's clock: a second before the newest delivery's end, so its "today" (UTC) is
#: the ledger's last day, with a day's payments in it (at END itself it would be empty).
NOW = END - timedelta(seconds=1)

#: How many answers of each page were the console's 503 ``console_time_limit`` (its rows
#: stopped at the time limit): bounded answers, timed like the others.
STOPPED: Counter[str] = Counter()

_LOG_COLUMNS = (
    "d.id, d.received_at, d.status, d.attempts, d.error, d.signal_error, "
    "d.external_identifier, d.outcome_id, o.payment_status, o.amount_minor, o.currency, "
    "length(d.body), d.dedupe_key"
)
_LOG_FROM = "FROM deliveries d LEFT JOIN outcomes o ON o.id = d.outcome_id"


@dataclass(frozen=True)
class Page:
    """One console page: its URL under the console's prefix and the bare SQL it needs.

    ``app`` (given a ledger) replaces the request, for a part of a page measured on its own;
    ``against`` (given a ledger) replaces the bare SQL, for a page measured against another
    way of getting the same answer; ``goal`` is the ratio the page must stay within.
    """

    name: str
    url: str
    bare: tuple[Statement, ...] = ()
    goal: float = RATIO_GOAL
    #: The p95 goal in ms; None for an export, whose time follows its rows.
    p95_goal: float | None = P95_GOAL_MS
    app: Callable[[Ledger], object] | None = None
    against: Callable[[Ledger], object] | None = None


def _log(
    where: Sequence[str], params: tuple[Any, ...], before: int | None = None
) -> tuple[Statement, ...]:
    """The log's page (one more row than it shows: that one says an older page exists),
    below the cursor ``before`` when given, and the count for the same filter (every page's).
    """
    clauses = " WHERE " + " AND ".join(where) if where else ""
    paged = [*where, "d.id < ?"] if before is not None else list(where)
    page_params = (*params, before) if before is not None else params
    page_sql = f"SELECT {_LOG_COLUMNS} {_LOG_FROM} WHERE {' AND '.join(paged)}"
    return (
        (f"{page_sql} ORDER BY d.id DESC LIMIT ?", (*page_params, 51)),
        (f"SELECT count(*) FROM deliveries d{clauses}", params),  # noqa: S608 - constants
    )


def pages(n: int) -> list[Page]:
    """The pages measured on a ledger of ``n`` payments, with their bare SQL."""
    day, week = to_text(NOW - timedelta(hours=24)), to_text(NOW - timedelta(days=7))
    # A payment with a delivery, an outcome and a state: bucket 10 of the mix, mid-ledger.
    middle = n // 2 - (n // 2) % 100 + 10
    one = identifier(middle)
    deep = max(2, n // 10)  # the cursor of a page a tenth of the way from the oldest
    refused_cols = "id, received_at, remote_addr, reason, body_size"
    return [
        Page("log, 24h (default)", "/deliveries", _log(["d.received_at >= ?"], (day,))),
        Page(
            "log, status filter, 7d",
            "/deliveries?status=malformed_json&status=invalid_payload&window=7d",
            _log(
                ["d.status IN (?, ?)", "d.status <> 'processed'", "d.received_at >= ?"],
                ("invalid_payload", "malformed_json", week),
            ),
        ),
        Page(
            "log, identifier, all",
            f"/deliveries?identifier={one}&window=all",
            _log(["d.external_identifier = ?"], (one,)),
        ),
        Page(
            "log, deep cursor, all",
            f"/deliveries?window=all&before={deep}",
            _log([], (), before=deep),
        ),
        Page(
            "refused, 24h",
            "/deliveries/refused",
            (
                (
                    f"SELECT {refused_cols} FROM rejected_deliveries "  # noqa: S608 - constants
                    "WHERE received_at >= ? ORDER BY id DESC LIMIT ?",
                    (day, 51),
                ),
                ("SELECT count(*) FROM rejected_deliveries WHERE received_at >= ?", (day,)),
            ),
        ),
        Page(
            "one delivery",
            f"/deliveries/{middle + 1}",
            (
                (
                    f"SELECT {_LOG_COLUMNS}, d.headers, d.body {_LOG_FROM} WHERE d.id = ?",
                    (middle + 1,),
                ),
            ),
        ),
        Page("one payment", f"/payments/{one}", _story(one)),
        *_finance_pages(),
    ]


def _finance_query(url: str) -> Any:
    """The finance page's view that ``url``'s arguments ask for at the console's clock."""
    return parse_finance_query(MultiDict(parse_qsl(url.partition("?")[2])), NOW)


def _finance(url: str) -> tuple[Statement, ...]:
    """What ``/reconciliation`` reads: the period's rows grouped by bucket, its money paid by
    bucket and the part of it paid in full; the previous period's tiles; a page of rows; and,
    for a filter other than the period, that filter's totals."""
    query = _finance_query(url)
    since, until = query.since, query.until
    width = _width(since, until)
    span = (to_text(since), to_text(until))
    opened_sql, opened_params = finance_sql.opened_groups(since, until, width)
    statements: list[Statement] = [
        (opened_sql, tuple(opened_params)),
        (finance_sql.RECEIVED_BUCKETS_SQL, (width, *span)),
        (finance_sql.PAID_SQL, span),
    ]
    before = tuple(to_text(moment) for moment in query.previous)
    sql, params = finance_sql.opened_groups(*query.previous)
    statements += [
        (finance_sql.RECEIVED_SQL, before),
        (finance_sql.PAID_SQL, before),
        (sql, tuple(params)),
    ]
    wanted = query.finance_filter()
    rows_sql, rows_params = finance_sql.filtered_rows(wanted, after=None, limit=query.limit + 1)
    statements.append((rows_sql, tuple(rows_params)))
    if wanted != FinanceFilter(registered_since=since, registered_until=until):
        groups_sql, groups_params = finance_sql.filtered_groups(wanted)
        statements.append((groups_sql, tuple(groups_params)))
    return tuple(statements)


#: The bare aggregate of a chart's expected bars: registered payments' expected money per
#: bucket of registration and currency, with nothing else grouped.
EXPECTED_BUCKETS_SQL = """
SELECT substr(p.created_at, 1, ?) AS bucket, s.currency, COUNT(*),
    CAST(SUM(COALESCE(s.expected_amount_minor, 0)) AS BIGINT)
FROM payments AS p
JOIN payment_states AS s ON s.external_identifier = p.external_identifier
WHERE p.created_at >= ? AND p.created_at < ?
GROUP BY 1, 2"""


def _width(since: Any, until: Any) -> int:
    """How many characters of a stored time name the chart's bucket."""
    return {"hour": 13, "day": 10, "week": 10}[bucket_size_for(since, until).value]


def _buckets(since: Any, until: Any) -> list[Statement]:
    """The chart's bare aggregates: expected and received per bucket and currency."""
    params = (_width(since, until), to_text(since), to_text(until))
    return [(EXPECTED_BUCKETS_SQL, params), (finance_sql.RECEIVED_BUCKETS_SQL, params)]


def _finance_pages() -> list[Page]:
    quarter = _finance_query("?period=90d")

    def chart(ledger: Ledger) -> object:
        return ledger.finance.buckets(quarter.since, quarter.until)

    def export_csv(ledger: Ledger) -> object:
        # What the console's export writer does on its own thread, here on this one: the rows
        # on a connection of their own, each a CSV line, into a file, hashed.
        wanted = quarter.finance_filter()
        with tempfile.TemporaryDirectory() as folder:
            exports = ExportFolder(folder)
            record = exports.start(who="bench", role="viewer", shown_filter={}, now=END)
            return write_export(
                exports,
                record,
                lambda: ledger.finance.rows(wanted, connection_apart=True),
                lambda: END,
            )

    def cli_csv(ledger: Ledger) -> object:
        # What ``payhooks reconcile --format csv --since --until`` does, to a sink.
        rows = ledger.reconcile(since=quarter.since, until=quarter.until)
        return write_report(rows, _Sink(), "csv")

    three_years = "?from=2023-05-01&until=2026-05-01"
    year = "?from=2025-05-01&until=2026-05-01"
    return [
        Page("finance, today", "/reconciliation?period=today", _finance("?period=today")),
        Page("finance, 7d (default)", "/reconciliation", _finance("")),
        Page("finance, 30d", "/reconciliation?period=30d", _finance("?period=30d")),
        # The most expensive page a viewer can ask for: every row of the ledger grouped.
        Page(
            "finance, 3 years",
            f"/reconciliation{three_years}",
            _finance(three_years),
            goal=RATIO_GOAL,
            p95_goal=None,
        ),
        Page("finance, 90d", "/reconciliation?period=90d", _finance("?period=90d")),
        Page("finance, custom year", f"/reconciliation{year}", _finance(year)),
        Page(
            "finance, 90d, table",
            "/reconciliation?period=90d&view=table",
            _finance("?period=90d&view=table"),
        ),
        Page(
            "finance chart, 90d",
            "",
            tuple(_buckets(quarter.since, quarter.until)),
            goal=CHART_GOAL,
            app=chart,
        ),
        Page(
            "finance csv, 90d",
            "",
            goal=CSV_GOAL,
            p95_goal=None,
            app=export_csv,
            against=cli_csv,
        ),
    ]


class _Sink(io.StringIO):
    """A text stream that keeps nothing (a report's bytes are not what is measured)."""

    def write(self, text: str) -> int:
        return len(text)


def _story(one: str) -> tuple[Statement, ...]:
    """What a payment's page reads: every table's rows naming it, and its reconciliation."""
    key = (one,)
    return (
        ("SELECT created_at, kind, amount_minor, currency, plan_amount_minor, description, "
         "metadata FROM payments WHERE external_identifier = ?", key),
        ("SELECT id, external_identifier, kind, idempotency_key, state, service_id, "
         "http_status, error_code, error, started_at, finished_at FROM creation_attempts "
         "WHERE external_identifier = ? ORDER BY id", key),
        ("SELECT received_at, id, dedupe_key, status, attempts, error, signal_error, "
         "outcome_id FROM deliveries WHERE external_identifier = ? ORDER BY id", key),
        ("SELECT recorded_at, id, delivery_id, transaction_id, payment_status, state, amount, "
         "currency, amount_minor, paid_at FROM outcomes WHERE external_identifier = ? "
         "ORDER BY id", key),
        ("SELECT s.owed_at, s.outcome_id, s.delivery_id, s.signal, s.reconciliation, "
         "s.sent_at, s.error, s.claimed_until FROM owed_signals AS s JOIN outcomes AS o "
         "ON o.id = s.outcome_id WHERE o.external_identifier = ? "
         "ORDER BY s.outcome_id, s.position", key),
        ("SELECT returned_at, id, kind, result_code FROM returns WHERE external_identifier = ? "
         "ORDER BY returned_at, id", key),
        ("SELECT first_seen_at, transaction_id, status, state, currency, amount_minor, "
         "last_seen_at, drift FROM service_transactions WHERE external_identifier = ? "
         "ORDER BY transaction_id", key),
        (f"SELECT {', '.join(RECONCILIATION_COLUMNS)} FROM reconciliation "  # noqa: S608
         "WHERE external_identifier = ?", key),
    )  # fmt: skip


def console_app(target: Path | str, folder: Path) -> Flask:
    """The receiver and the console on ``target``; every console request is a viewer's."""
    app = Flask("bench_console", instance_path=str(folder))
    app.config.update(
        PAYHOOKS_DATABASE=str(target),
        PAYHOOKS_SECRETS=[generate_keypair("standard-webhooks").verifying_key],
        SECRET_KEY="bench",
    )
    PayHooks(app)
    Console(app, authorize=lambda request: "viewer", url_prefix="/console", clock=lambda: NOW)
    return app


def bare_runner(
    target: Path | str,
) -> tuple[Callable[[Sequence[Statement]], int], Callable[[], None]]:
    """A function running statements through the engine's driver on a connection of its own
    (returning the rows fetched), and one closing it."""
    if isinstance(target, str):
        import psycopg

        pg = psycopg.connect(target, autocommit=True)

        def run_pg(statements: Sequence[Statement]) -> int:
            return sum(
                len(pg.execute(sql.replace("?", "%s"), params).fetchall())  # type: ignore[call-overload,unused-ignore]
                for sql, params in statements
            )

        return run_pg, pg.close
    conn = sqlite3.connect(target)

    def run(statements: Sequence[Statement]) -> int:
        return sum(len(conn.execute(sql, params).fetchall()) for sql, params in statements)

    return run, conn.close


@dataclass
class Timings:
    """One page's times (seconds), both contenders, by round."""

    app: list[list[float]]
    bare: list[list[float]]
    goal: float = RATIO_GOAL
    p95_goal: float | None = P95_GOAL_MS

    def ratios(self) -> Ratios:
        return Ratios(
            tuple(
                statistics.median(app) / statistics.median(bare)
                for app, bare in zip(self.app, self.bare, strict=True)
            )
        )


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def clocks(target: Path | str) -> tuple[Callable[[], float], Callable[[], float], str]:
    """A start and a stop clock, and what they read: this process's CPU time, plus that of
    a PostgreSQL server on this machine. The server's CPU time is read by scanning ``/proc``,
    so the start clock reads it before this process's, and the stop clock after: the scan's
    own CPU is never counted."""
    if isinstance(target, str):
        import psycopg

        with psycopg.connect(target) as pg:
            server = _ServerClock.find(pg)
        if server is None:
            return time.perf_counter, time.perf_counter, "the wall clock (a remote server)"
        found = server

        def start() -> float:
            return found.seconds() + time.process_time()

        def stop() -> float:
            return time.process_time() + found.seconds()

        return start, stop, "CPU time of this process and the server's"
    return time.process_time, time.process_time, "CPU time"


def measure(
    target: Path | str,
    n: int,
    rounds: int,
    requests: int,
    only: Sequence[str] = (),
    *,
    bare_too: bool = True,
) -> tuple[dict[str, Timings], str]:
    """Every page (or those whose name holds one of ``only``) and its bare SQL (unless not
    ``bare_too``: the pages alone, in half the time, for the largest ledgers), request by
    request, in alternating rounds; and what the times were read from."""
    measured = [page for page in pages(n) if not only or any(text in page.name for text in only)]
    if not measured:
        raise SystemExit(f"--page: no page's name holds any of {list(only)}")
    timings = {page.name: Timings([], [], page.goal, page.p95_goal) for page in measured}
    start, stop, clock = clocks(target)
    run_bare, close = bare_runner(target)
    with tempfile.TemporaryDirectory() as folder:
        app = console_app(target, Path(folder))
        client = app.test_client()
        ledger = Ledger(target, read_only=True)

        def serve(page: Page) -> float:
            if page.app is not None:
                started = start()
                page.app(ledger)
                return stop() - started
            started = start()
            # Unbuffered, and read through as a server sends it: buffered, the test client
            # would hold a whole export in this process, which the RSS goal would count.
            response = client.get("/console" + page.url, buffered=False)
            refused = []
            for chunk in response.iter_encoded():
                if response.status_code != 200:
                    refused.append(chunk)
            response.close()
            took = stop() - started
            if response.status_code == 503 and b"console_time_limit" in b"".join(refused):
                STOPPED[page.name] += 1  # stopped at the console's time limit: a bounded answer
            elif response.status_code != 200:
                raise SystemExit(f"{page.url} answered {response.status_code}")
            return took

        def bare(page: Page) -> float:
            started = start()
            if page.against is not None:
                page.against(ledger)
            else:
                run_bare(page.bare)
            return stop() - started

        for page in measured:  # warm every cache alike, untimed
            serve(page)
            if bare_too:
                bare(page)
        by_name = {page.name: page for page in measured}

        def one_round(name: str, round_index: int) -> float:
            page, app_times, bare_times = by_name[name], [], []
            for request in range(requests):  # interleaved, the first one alternating
                if not bare_too:
                    app_times.append(serve(page))
                    continue
                first, second = (serve, bare) if request % 2 == 0 else (bare, serve)
                times = {first: first(page), second: second(page)}
                app_times.append(times[serve])
                bare_times.append(times[bare])
            timings[name].app.append(app_times)
            timings[name].bare.append(bare_times)
            return statistics.median(app_times)

        try:
            alternate([page.name for page in measured], rounds, one_round)
        finally:
            receiver_state(app).ledgers.close()
            ledger.close()
            close()
    return timings, clock


def report(timings: dict[str, Timings], rounds: int, requests: int) -> None:
    print(
        f"{'page':<24} {'app p50':>8} {'p95':>8} {'bare p50':>9} {'p95':>8}   app / bare "
        f"(median of per-round ratios; {rounds} rounds x {requests} requests)"
    )
    missed = []
    for name, timing in timings.items():
        app = [value * 1000 for values in timing.app for value in values]
        bare = [value * 1000 for values in timing.bare for value in values]
        goals = []
        if timing.p95_goal is not None and percentile(app, 0.95) > timing.p95_goal:
            goals.append(f"p95 over {timing.p95_goal:.0f} ms")
        against = "      -          -   (--no-bare)"
        if bare:
            ratio = timing.ratios()
            if ratio.median > timing.goal:
                goals.append(f"over {timing.goal:g}x")
            against = (
                f"{statistics.median(bare):7.1f}ms {percentile(bare, 0.95):6.1f}ms   "
                + ratio.text()
            )
        if goals:
            missed.append(f"{name}: {', '.join(goals)}")
        print(
            f"{name:<24} {statistics.median(app):6.1f}ms {percentile(app, 0.95):6.1f}ms {against}"
        )
    for name, count in sorted(STOPPED.items()):
        print(f"{name}: {count} answers were the 503 console_time_limit (the page's rows stopped)")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process, every page included: {rss:.0f} MB")
    if rss > RSS_GOAL_MB:
        missed.append(f"peak RSS over {RSS_GOAL_MB:.0f} MB")
    goal = (
        f"p95 <= {P95_GOAL_MS:.0f} ms and <= {RATIO_GOAL:.0f}x the bare SQL; the chart "
        f"<= {CHART_GOAL:g}x, the CSV <= {CSV_GOAL:g}x the CLI's, under {RSS_GOAL_MB:.0f} MB"
    )
    print(f"goals ({goal}): " + ("all met" if not missed else "MISSED by " + "; ".join(missed)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=at_least(100), default=1_000_000, help="payments")
    parser.add_argument("--rounds", type=at_least(1), default=5, help="alternating rounds")
    parser.add_argument(
        "--requests", type=at_least(1), default=20, help="requests per page and round"
    )
    parser.add_argument(
        "--database", type=Path, help="the SQLite ledger: reused when built with this --n"
    )
    parser.add_argument(
        "--page",
        action="append",
        default=[],
        metavar="TEXT",
        help="only the pages whose name holds TEXT (repeat for several)",
    )
    parser.add_argument(
        "--no-bare", action="store_true", help="time the pages alone, not their bare SQL"
    )
    parser.add_argument(
        "--late",
        type=at_least(1),
        metavar="COUNT",
        help="then record COUNT late deliveries over the last 90 days through the receiver's "
        "path and measure the finance pages again (it changes the ledger: use a fresh one)",
    )
    add_arguments(parser, "measure the console (instead of on SQLite)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp, postgres_database(args) as postgres:
        target: Path | str = postgres if postgres is not None else (
            args.database or Path(tmp) / "console.db"
        )  # fmt: skip
        found = _built(target)
        if found is None:
            seconds = build(target, args.n)
            print(f"built the ledger in {seconds:.1f} s")
        elif found != args.n:
            print(f"{target} holds a ledger of N = {found:,}, not {args.n:,}", file=sys.stderr)
            return 2
        else:
            print(f"reused the ledger built before at {target}")
        where = settings(target) if isinstance(target, str) else f"SQLite, {_size_mb(target)}"
        print(f"N = {args.n:,} payments, about as many deliveries over 120 days, on {where}")
        print(rollup_up_to_date(target))
        timings, clock = measure(
            target, args.n, args.rounds, args.requests, args.page, bare_too=not args.no_bare
        )
        print(f"timed by {clock}")
        report(timings, args.rounds, args.requests)
        if args.late:
            _after_late(target, args)
    return 0


def _after_late(target: Path | str, args: argparse.Namespace) -> None:
    """The finance pages again, right after ``--late`` late deliveries: the first request
    (which pays for any totals it must bring up to date first) said apart, then the rest."""
    start, stop, _ = clocks(target)
    urls = ("/reconciliation?period=90d", "/reconciliation")
    with tempfile.TemporaryDirectory() as folder:
        app = console_app(target, Path(folder))
        client = app.test_client()
        for url in urls:  # warm: what is timed below is the late deliveries' cost alone
            client.get("/console" + url)
        count, seconds = write_late(target, args.n, args.late, NOW)
        print(f"\nrecorded {count} late deliveries through the receiver's path in {seconds:.1f} s")
        for url in urls:
            started, wall = start(), time.perf_counter()
            status = client.get("/console" + url).status_code
            took, walled = stop() - started, time.perf_counter() - wall
            print(f"first {url} after them: {took * 1000:.0f} ms ({walled * 1000:.0f} ms wall), "
                  f"{status}")  # fmt: skip
        receiver_state(app).ledgers.close()
    STOPPED.clear()
    finance = [text for text in args.page if "finance" in text] or ["finance, ", "finance chart"]
    timings, _ = measure(
        target, args.n, args.rounds, args.requests, finance, bare_too=not args.no_bare
    )
    report(timings, args.rounds, args.requests)


def rollup_up_to_date(target: Path | str) -> str:
    """Bring finance's rollup up to date before the pages are timed (the goal's condition),
    as an operator does: ``payhooks rollup`` in a process of its own, whose time and peak RSS
    are the refresh's own cost (a full build the first time, on a ledger just built)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "payhooks.receiver", "rollup", "--database", str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"payhooks rollup failed before timing: {done.stderr.strip()}")
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    said = done.stdout.strip()
    return (
        f"payhooks rollup before timing: {said} ({seconds:.1f} s wall, peak RSS {peak_mb:.0f} MB)"
    )


def _built(target: Path | str) -> int | None:
    """The N of the ledger at ``target``, or None when none is built there yet."""
    if isinstance(target, str):
        import psycopg

        with psycopg.connect(target, autocommit=True) as pg:
            return built_n(pg)
    if not target.exists():
        return None
    with closing(sqlite3.connect(target)) as conn:
        found = built_n(conn)
    if found is None:
        raise SystemExit(f"{target} exists and is not a ledger this bench built")
    return found


def _size_mb(path: Path) -> str:
    return f"{path.stat().st_size / 2**20:.0f} MB"


if __name__ == "__main__":
    sys.exit(main())
