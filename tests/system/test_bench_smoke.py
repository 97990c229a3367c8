"""The benchmarks in ``bench/`` still run, in a tiny size, and their own checks still pass.

They are run by hand for their figures, which belong to the machine and are never asserted
here. What is asserted is what would make a figure meaningless if it broke: each bench runs to
the end against the current code (they import the ledger's and the verifier's internals, which
change), ``bench.receive`` still finds every notification stored in every app it measured (SQLite's
settings and PostgreSQL, the receiver and its own durable floor, on the suite's server, in one
run, and the receiver on a ledger without an index), ``bench.console`` times every page (the finance
page's too: its chart against the bare aggregate, its CSV against the CLI's) against its bare
SQL and reuses its ledger, and
``bench.slowloris`` still starts every setup it compares (the recommended one runs nginx) and
reports each one, ``bench.write_pages`` still reads the log's frames (its per-b-tree figures
add up to its total), ``bench.group_commit`` stores every delivery both ways of syncing, and
``bench.prune`` prunes every old delivery and finds every acknowledged one stored, and every
bench refuses zero rounds or requests before it starts.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

from bench.console_ledger import END as CONSOLE_END
from bench.reconcile import FLOOR_SQL
from payhooks.storage.times import to_text
from payhooks.storage.views import RECONCILIATION_COLUMNS
from tests.support.gunicorn_server import HAS_PROC
from tests.support.nginx_server import require_nginx

REPO = Path(__file__).resolve().parents[2]
#: How bench.rounds prints a ratio: the median of the per-round ratios, then their spread.
RATIO = r"[\d.]+x \(spread [\d.]+x-[\d.]+x over \d+ rounds?\)"


#: How long a bench's smoke run may take: about 40 s on a quiet 2-CPU machine, over 300 s on a
#: slow shared one with the rest of the suite beside it; under pytest-timeout's 600 s, so the
#: bench's own output is what a failure shows.
BENCH_LIMIT = 540


def _run(*arguments: str, timeout: float) -> str:
    result = subprocess.run(
        [sys.executable, *arguments],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_verify_bench_compares_payhooks_with_the_package_and_the_floor() -> None:
    output = _run("-m", "bench.verify", "--rounds", "2", "--seconds", "0.05", timeout=120)

    for contender in ("payhooks", "standardwebhooks", "floor"):
        assert re.search(rf"^\s+{contender}\s+[\d,]+ verifications/s", output, re.MULTILINE)
    # The two ratios, last: medians of per-round ratios with their spread.
    *_, vs_package, vs_floor = output.strip().splitlines()
    assert re.search(rf"payhooks speed / standardwebhooks speed: {RATIO}", vs_package), output
    assert re.search(rf"payhooks time / floor time: +{RATIO}", vs_floor), output


def test_the_reconcile_bench_reports_every_payment(tmp_path: Path) -> None:
    output = _run(
        "-m",
        "bench.reconcile",
        "--n",
        "500",
        "--rounds",
        "2",
        "--database",
        str(tmp_path / "r.db"),
        timeout=120,
    )

    assert "N = 500 payments" in output
    assert re.search(r"^report\s+[\d.]+ s\s+[\d.]+ us per payment", output, re.MULTILINE)
    assert re.search(rf"report / floor: +{RATIO}$", output.strip().splitlines()[-1]), output
    # The build says how long it took and that its sampled rows equal refresh's.
    assert re.search(
        r"^built in [\d.]+ s, of which payment_states [\d.]+ s \(515 rows, .*; "
        r"1000 sampled rows equal to refresh's\)$",
        output,
        re.MULTILINE,
    ), output
    # The floor reads its own covering index: without it (the ledger's index on outcomes holds
    # the identifier alone) it would read the outcomes' rows and flatter the report's ratio.
    with closing(sqlite3.connect(tmp_path / "r.db")) as conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + FLOOR_SQL)]
    assert any("COVERING INDEX bench_floor_outcomes" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


def test_a_synced_bench_ledger_reconciles_as_an_unsynced_one_with_only_unexpected_drift(
    tmp_path: Path,
) -> None:
    """``--synced`` lists every outcome's transaction with the status notified: each payment's
    stored row then has its drift computed from its listed transactions (none), and must come
    out the same, or the bench would compare two different reconciliations."""
    files = {synced: tmp_path / f"synced-{synced}.db" for synced in (False, True)}
    for synced, path in files.items():
        flag = ("--synced",) if synced else ()
        output = _run(
            "-m", "bench.reconcile", "--n", "500", "--rounds", "1", "--database", str(path), *flag,
            timeout=120,
        )  # fmt: skip
        assert ("every transaction listed by a sync" in output) == synced, output
        assert re.search(r"^rows: report 515, floor 500, summary \d+$", output, re.MULTILINE)
    rows = {}
    for synced, path in files.items():
        with closing(sqlite3.connect(path)) as conn:
            rows[synced] = conn.execute("SELECT * FROM reconciliation").fetchall()
            listed, kinds = conn.execute(
                "SELECT (SELECT COUNT(*) FROM service_transactions), "
                "(SELECT group_concat(DISTINCT kind) FROM sync_drift)"
            ).fetchone()
        assert (listed, kinds) == ((500, "unexpected") if synced else (0, None))
    # The same rows, but that a listed identifier nobody registered is flagged as such.
    drift = RECONCILIATION_COLUMNS.index("drift")
    for synced_row, plain_row in zip(rows[True], rows[False], strict=True):
        unexpected = synced_row[1] is None  # no kind: nobody registered it
        assert synced_row[drift] == ("unexpected" if unexpected else None)
        assert plain_row[drift] is None
        assert synced_row[:drift] + synced_row[drift + 1 :] == (
            plain_row[:drift] + plain_row[drift + 1 :]
        )


@pytest.mark.parametrize("synced", [False, True], ids=["never-synced", "synced"])
def test_the_reconcile_bench_on_postgresql_reports_every_payment(
    postgres_url: str, synced: bool
) -> None:
    # The suite's database is migrated and empty: the bench fills it by COPY.
    flag = ("--synced",) if synced else ()
    output = _run(
        "-m", "bench.reconcile", "--n", "500", "--rounds", "2", "--postgres", postgres_url, *flag,
        timeout=120,
    )  # fmt: skip

    assert "N = 500 payments, 500 outcomes on PostgreSQL" in output
    assert ("every transaction listed by a sync" in output) == synced, output
    # The same rows as on SQLite's ledger: 500 payments and the unexpected identifiers.
    assert re.search(r"^rows: report 515, floor 500, summary \d+$", output, re.MULTILINE), output
    assert re.search(r"peak RSS \d+ MB", output), output
    *_, summary, report = output.strip().splitlines()
    assert re.search(rf"summary / floor: {RATIO}$", summary), output
    assert re.search(rf"report / floor: +{RATIO}$", report), output


#: The pages bench.console measures, in its table's order (issues 29 and 39).
CONSOLE_PAGES = (
    "log, 24h (default)",
    "log, status filter, 7d",
    "log, identifier, all",
    "log, deep cursor, all",
    "refused, 24h",
    "one delivery",
    "one payment",
    "finance, today",
    "finance, 7d (default)",
    "finance, 30d",
    "finance, 3 years",
    "finance, 90d",
    "finance, custom year",
    "finance, 90d, table",
    "finance chart, 90d",
    "finance csv, 90d",
)


def test_the_console_bench_times_every_page_against_its_bare_sql_on_a_ledger_it_reuses(
    tmp_path: Path,
) -> None:
    database = tmp_path / "console.db"
    output = _run(
        "-m", "bench.console", "--n", "2000", "--rounds", "1", "--database", str(database),
        timeout=BENCH_LIMIT,
    )  # fmt: skip

    assert re.search(r"^built the ledger in [\d.]+ s$", output, re.MULTILINE), output
    for page in CONSOLE_PAGES:
        assert re.search(
            rf"^{re.escape(page)} +(?:[\d.]+ms +){{4}}  {RATIO}$", output, re.MULTILINE
        ), output
    assert re.search(
        r"^peak RSS of this process, every page included: \d+ MB$", output, re.MULTILINE
    ), output
    goals = output.strip().splitlines()[-1]
    assert goals.startswith(
        "goals (p95 <= 150 ms and <= 3x the bare SQL; the chart <= 2x, the CSV <= 1.5x the "
        "CLI's, under 100 MB): "
    ), output
    # The deliveries span 120 days up to the console's clock, ids in time order, so its
    # windows hold what they would in production: about N/120 a day.
    with closing(sqlite3.connect(database)) as conn:
        windows = [
            conn.execute(
                "SELECT count(*) FROM deliveries WHERE received_at >= ?",
                (to_text(CONSOLE_END - reach),),
            ).fetchone()[0]
            for reach in (timedelta(hours=24), timedelta(days=7), timedelta(days=121))
        ]
        unordered = conn.execute(
            "SELECT count(*) FROM deliveries AS a JOIN deliveries AS b ON b.id = a.id + 1 "
            "WHERE b.received_at < a.received_at"
        ).fetchone()[0]
    assert windows == [16, 116, 2000]
    assert unordered == 0
    # A second run with the same path measures the same ledger instead of building another.
    again = _run(
        "-m", "bench.console", "--n", "2000", "--rounds", "1", "--requests", "1",
        "--database", str(database), timeout=BENCH_LIMIT,
    )  # fmt: skip
    assert f"reused the ledger built before at {database}" in again, again
    assert "built the ledger" not in again


#: bench.receive in a tiny size: 10 + 1 x 20 + 10 = 40 notifications per app (one round: each
#: round starts client processes for every app, the costly part of a smoke run).
TINY_RECEIVE = (
    "-m",
    "bench.receive",
    "--rounds",
    "1",
    "--count",
    "20",
    "--warmup",
    "10",
    "--wal-count",
    "10",
    "--workers",
    "2",
    "--in-process-count",
    "40",
)


#: The indexes the smoke run's ``--without-index`` drops: the first two the console added.
DROPPED = "deliveries_identifier,outcomes_paid"


@pytest.mark.skipif(not HAS_PROC, reason="bench.receive reads gunicorn's CPU time from /proc")
def test_the_receive_bench_finds_every_notification_stored_in_every_app(postgres_url: str) -> None:
    """One run measures every app, SQLite's settings and PostgreSQL side by side, as the bench
    is run by hand (each run starts every app's gunicorn: the costly part of a smoke run), with
    ``--without-index`` (issue 29): FULL once more, on a ledger without the indexes named (two,
    comma-separated), in the same rounds against the same durable floor."""
    output = _run(
        *TINY_RECEIVE, "--postgres", postgres_url, "--without-index", DROPPED, timeout=BENCH_LIMIT
    )

    share = RATIO.replace("x", "%")
    for floor in ("FULL", "NORMAL", "postgresql"):
        assert re.search(
            rf"^  durable floor, {floor}: {share} of the floor's throughput; "
            r"stored: 40 of 40 bodies$",
            output,
            re.MULTILINE,
        ), output
        assert re.search(
            rf"^  {floor}: {share} of the floor's throughput; .*stored: 40 of 40 deliveries "
            r"processed, 40 outcomes \(all\)$",
            output,
            re.MULTILINE,
        ), output
    assert "{200: 20}" in output  # one round of 20 per app
    # The receiver with metrics and logs: every delivery stored, counted and logged.
    assert re.search(
        rf"^  FULL\+metrics: {share} of the floor's throughput; stored: 40 of 40 deliveries "
        r"processed; counted by its metrics: 40; log lines: 40$",
        output,
        re.MULTILINE,
    ), output
    # Last: WAL pages (SQLite) or bytes (PostgreSQL) per delivery and server CPU per request
    # for every app, then the receiver's share of its durable floor per setting.
    per_app, shares = output.split("per app: WAL pages per delivery")[-1].split(
        "the receiver's share of its durable floor's throughput"
    )
    for app in (
        "durable floor, FULL",
        "receiver, synchronous=FULL",
        r"receiver, FULL\+metrics\+logs",
        "durable floor, NORMAL",
    ):
        assert re.search(
            rf"^  {app} +[\d.]+ WAL pages/delivery +\d+ us server CPU/request", per_app, re.M
        ), output
    for app in ("durable floor, PostgreSQL", r"receiver, PostgreSQL \(FULL\)"):
        assert re.search(
            rf"^  {app} +\d+ WAL bytes/delivery +\d+ us server CPU/request", per_app, re.M
        ), output
    assert re.search(r"^  floor \(bare Flask route\) +\d+ us server CPU/request", per_app, re.M)
    # Each setting's share, with the goals (issue 27) on FULL and PostgreSQL, the goal's
    # figure last; none against the bare route.
    assert re.search(rf"^  FULL +{share}  \(goal: 50%\)$", shares, re.MULTILINE), output
    assert re.search(
        rf"^  FULL\+metrics +{share}  \(goal: at most 3 points under FULL\)$", shares, re.M
    ), output
    assert re.search(rf"^  NORMAL +{share}$", shares, re.MULTILINE), output
    assert re.search(rf"^  postgresql +{share}  \(goal: 35%\)$", shares.strip().splitlines()[-1]), (
        output
    )
    assert "goal: 60%" not in output
    _assert_index_cost_reported(output)


def _assert_index_cost_reported(output: str) -> None:
    """The app without :data:`DROPPED`: every delivery stored, its share, its WAL pages (fewer
    than FULL's: the indexes really were dropped from its ledger) and their cost in points."""
    share = RATIO.replace("x", "%")
    assert re.search(
        rf"^  FULL without {DROPPED}: {share} of the floor's throughput; "
        r"stored: 40 of 40 deliveries processed, 40 outcomes \(all\)$",
        output,
        re.MULTILINE,
    ), output
    assert re.search(
        rf"^  cost of {DROPPED} to FULL's share: [+-][\d.]+ points "
        r"\(spread [+-][\d.]+ to [+-][\d.]+ over 1 round\) \(without minus with\)$",
        output,
        re.MULTILINE,
    ), output
    pages = {
        app: float(found.group(1))
        for app in ("receiver, synchronous=FULL", f"receiver, FULL without {DROPPED}")
        if (found := re.search(rf"^  {app} +([\d.]+) WAL pages/delivery", output, re.M))
    }
    assert pages[f"receiver, FULL without {DROPPED}"] < pages["receiver, synchronous=FULL"], output


def test_the_hostile_bench_prints_one_worst_ratio_per_scheme() -> None:
    from payhooks.verify import SCHEMES

    output = _run("-m", "bench.hostile", "--rounds", "1", "--count", "1", timeout=300)

    summary = output.split("worst hostile request / typical valid delivery, per scheme")[-1]
    for scheme in SCHEMES:
        assert re.search(rf"^\s+{scheme}\s+[\d.]+x\s+\(", summary, re.MULTILINE), output


def test_the_slowloris_bench_prints_a_line_per_setup() -> None:
    require_nginx()  # the recommended setup runs nginx in front

    output = _run("-m", "bench.slowloris", "--tiny", timeout=BENCH_LIMIT)

    for setup in ("today", "gthread", "nginx", "nginx-gthread"):
        assert re.search(
            rf"^setup {setup} \(.*\): throughput [\d.]+x today's .*; 2 slow: p50 .* of 5$",
            output,
            re.MULTILINE,
        ), output


def test_the_sync_bench_finds_every_transaction_a_missed_notification(tmp_path: Path) -> None:
    output = _run(
        "-m",
        "bench.sync",
        "--n",
        "300",
        "--trace",
        "--database",
        str(tmp_path / "s.db"),
        timeout=120,
    )

    assert "N = 300 transactions" in output
    assert re.search(r"^sync\s+[\d.]+ s\s+[\d,]+ transactions/s\s+3 pages$", output, re.MULTILINE)
    assert re.search(r"^peak RSS\s+[\d.]+ MiB", output, re.MULTILINE)
    assert "'missed_notification'>: 300}" in output


def test_the_health_bench_times_the_route_the_trivial_route_and_the_check() -> None:
    output = _run("-m", "bench.health", "--count", "20", timeout=120)

    times = re.findall(r"median\s+[\d.]+ us\s+p99\s+[\d.]+ us\s+\(20 calls\)", output)
    assert len(times) == 3, output
    assert "GET /payhooks/health" in output


def test_the_write_pages_bench_counts_every_commit_by_btree() -> None:
    output = _run("-m", "bench.write_pages", "--count", "5", "--receivers", "1", timeout=120)

    first, *btrees = output.strip().splitlines()
    match = re.fullmatch(
        r"([\d.]+) WAL frames per delivery, ([\d.]+) commits per delivery "
        r"\(5 deliveries, 1 receiver\(s\) per signal\)",
        first,
    )
    assert match, output
    # At least the one durable commit per delivery, each writing the delivery's table.
    assert float(match[2]) >= 1.0, output
    per_btree = {name: float(frames) for frames, name in (line.split() for line in btrees)}
    assert per_btree["deliveries"] >= 1.0, output
    assert abs(sum(per_btree.values()) - float(match[1])) < 0.05, output


def test_the_group_commit_bench_stores_every_delivery_for_both_ways_of_syncing() -> None:
    # The bench itself exits non-zero when a contender's file lacks a delivery.
    output = _run(
        "-m", "bench.group_commit", "--processes", "2", "--count", "5", "--rounds", "2", timeout=120
    )

    assert re.search(r"sync after the lock +\d+ \d+\n", output), output
    assert re.search(r"SQLite's FULL +\d+ \d+\n", output), output
    assert re.search(rf"sync after the lock / SQLite's FULL: {RATIO}$", output.strip()), output


@pytest.mark.skipif(not HAS_PROC, reason="the gunicorn harness needs /proc")
def test_the_prune_bench_prunes_every_old_delivery_and_loses_no_acknowledged_one() -> None:
    # The bench itself exits non-zero when a notification answered 200 has no delivery row.
    output = _run(
        "-m",
        "bench.prune",
        "--deliveries",
        "300",
        "--rounds",
        "2",
        "--requests",
        "20",
        "--batch-size",
        "50",
        timeout=BENCH_LIMIT,
    )

    assert "old deliveries left unpruned: 0" in output, output
    assert re.search(rf"p99 while pruning / alone: {RATIO}", output), output
    assert re.search(r"prune peak RSS: \d+ MiB", output), output


@pytest.mark.parametrize(
    ("bench", "argument"),
    [
        ("bench.prune", "--rounds"),
        ("bench.prune", "--deliveries"),
        ("bench.receive", "--rounds"),
        ("bench.receive", "--count"),
        ("bench.reconcile", "--rounds"),
        ("bench.console", "--rounds"),
        ("bench.console", "--requests"),
        ("bench.verify", "--rounds"),
        ("bench.hostile", "--count"),
        ("bench.slowloris", "--rounds"),
        ("bench.group_commit", "--processes"),
        ("bench.sync", "--n"),
        ("bench.write_pages", "--count"),
    ],
)
def test_a_bench_refuses_zero_rounds_or_requests_before_it_starts(
    bench: str, argument: str
) -> None:
    # Zero rounds used to run the whole setup and end in a traceback (no median of nothing).
    result = subprocess.run(
        [sys.executable, "-m", bench, argument, "0"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"argument {argument}: 0 is less than 1" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(not HAS_PROC, reason="finding gunicorn's workers to renice reads /proc")
def test_bench_console_load_times_the_receiver_beside_viewers_and_exports_in_both_layouts(
    tmp_path: Path,
) -> None:
    """Every notification of every layout answered 200 (the bench stops on any other), the
    viewers' pages answered (200, or the console's own 429 and time-limit 503, never a 500),
    and the exports downloaded, both where the console shares the receiver's workers and in
    processes of its own."""
    out = _run(
        "-m", "bench.console_load", "--n", "2000", "--rounds", "1", "--notifications", "20",
        "--database", str(tmp_path / "console.db"),
        timeout=BENCH_LIMIT,
    )  # fmt: skip
    for layout in ("alone", "shared", "own processes"):
        assert re.search(rf"{layout} \|\s+[\d.]+ \|\s+[\d.]+ \| {RATIO}", out), out
    pages = re.findall(r"viewers' pages: \{([^}]*)\}", out)
    assert len(pages) == 2, out
    allowed = {"200", "200 stopped counting", "429 console_busy", "503 console_time_limit"}
    for answered in pages:
        seen = set(re.findall(r"'([^']*)': \d+", answered))
        assert seen, out
        assert seen <= allowed, out
    exports = re.findall(r"exports: \{([^}]*)\}", out.split("layout |")[1])
    assert all("'downloaded 200'" in found for found in exports), out


def test_the_rollup_bench_times_the_receiver_during_full_refreshes_that_leave_the_rollup_exact(
    tmp_path: Path, postgres_url: str
) -> None:
    """On both engines: every notification answered 200 (the bench stops on any other), each
    round's refresh rebuilt every day of the ledger in a process of its own and said its time
    and memory, and the rollup the last one left, with the notifications received meanwhile
    read by the next refresh, equals the rows (``payhooks rollup --verify`` exits 0)."""
    database = tmp_path / "rollup.db"
    output = _run(
        "-m", "bench.rollup", "--n", "2000", "--rounds", "2", "--rate", "40", "--nice", "5",
        "--database", str(database), "--postgres", postgres_url, timeout=BENCH_LIMIT,
    )  # fmt: skip

    engines = output.split("PostgreSQL ")
    assert len(engines) == 2, output
    for shown in engines:
        assert "2,000 payments; 40 notifications/s; 2 rounds; the refresh at nice +5" in shown
        rounds = re.findall(
            r"^  round \d +(alone|refresh): (\d+) notifications, p50 [\d.]+ ms, p99 [\d.]+ ms"
            r"(; refresh [\d.]+ s, \d+ MB)?$",
            shown,
            re.MULTILINE,
        )
        assert sorted(name for name, _, _ in rounds) == ["alone"] * 2 + ["refresh"] * 2, shown
        assert all(int(sent) > 0 for _, sent, _ in rounds), shown
        assert all(bool(said) == (name == "refresh") for name, _, said in rounds), shown
        # the hours of 120 days that hold a row (about 2,000 here) and the bench's own.
        assert re.search(
            r"^full refresh: [\d.]+ s \(median of 2; [\d.]+-[\d.]+\), "
            r"peak RSS \d+ MB, [12]\d{3} hours$",
            shown,
            re.MULTILINE,
        ), shown
        assert re.search(
            rf"^receiver's p99 during a full refresh / alone: {RATIO}$", shown, re.MULTILINE
        ), shown
    for target in (str(database), postgres_url):
        verified = subprocess.run(
            [sys.executable, "-m", "payhooks.receiver", "rollup", "--verify", "--days", "800"],
            env={**os.environ, "PAYHOOKS_DATABASE": target},
            capture_output=True,
            text=True,
            timeout=BENCH_LIMIT,
            check=False,
        )
        assert verified.returncode == 0, verified.stdout[-2000:] + verified.stderr[-2000:]
        assert "Verified 800 day(s) in UTC: 0 bucket(s) differ." in verified.stdout
