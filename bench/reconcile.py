"""Benchmark: the full reconciliation report and summary against a bare SQL floor.

Builds a ledger with N payments and N outcomes (a realistic mix: most paid, some mismatched,
failed, pending, refunded before their success arrived, duplicated, unexpected), then every
payment's stored reconciliation row (``payment_states``) computed from them by the ledger's own
rules (:func:`payhooks.storage.rules.reconcile`) in one pass over the sorted facts
(:func:`state_rows`), and checks a sample of those rows against the ledger's per-payment path
(:func:`payhooks.storage.payment_states.refresh`). It prints how long the build took, and how
much of it the rows. Then it measures, in a fresh child process so its peak memory is the
report's own and not the build's. With ``--synced``, the ledger also holds one complete
``payhooks sync`` that listed every outcome's transaction with the status notified: every
payment's row then has its drift computed from its listed transactions (none, but
``unexpected`` for identifiers no payment names), as a production ledger that syncs has.

- ``floor``: a bare SQL aggregate over the same tables, one row per payment joined to its
  outcomes (``COUNT``, ``SUM``, ``MAX``) through an index made for it (:data:`FLOOR_INDEX_SQL`),
  fetched as plain tuples: the least any per-payment report can cost;
- ``report``: ``Ledger.reconcile()`` iterated to the end, reading every row's Decimal
  amounts as the CLI does;
- ``summary``: ``Ledger.summary()``.

The phases (and the two SQL-only queries that tell where the report's time goes) alternate
round by round in the child, the order rotated each round (:mod:`bench.rounds`). It prints each
phase's median CPU time, the per-row cost (compare two N for linearity), the child's peak RSS
(``ru_maxrss``: SQLite's page cache included), and last the ratios to the floor: the medians of
the per-round ratios with their spread, the report's (the figure to keep down) at the very
end.

With ``--postgres URL`` (an empty database) or ``--start-postgres`` (a throwaway server,
stopped after) the same ledger is built in PostgreSQL instead (the facts by ``COPY``, then the
rows of ``payment_states`` computed as on SQLite and written by ``COPY``, then
``VACUUM (ANALYZE)``) and measured the same way, against the same floor: ``FLOOR_SQL``
streamed through a server-side cursor fetching
:data:`~payhooks.storage.postgresql.engine.STREAM_BATCH_ROWS` rows at a time, as the ledger's
``reconcile()`` streams its rows (fetching a million rows at once would put them all in the
client's memory, which no report may do). On PostgreSQL most of a phase's work is the server's,
in another process, so a phase's cost is the CPU time of the measuring process *plus* that of
the server's processes (read from ``/proc``, when the server runs on this machine; the wall
clock otherwise, and the output says which). The peak RSS is the measuring process's alone: the
client's memory while it streams. Run::

    python -m bench.reconcile            # N = 100,000
    python -m bench.reconcile --n 1000000
    python -m bench.reconcile --n 1000000 --synced
    python -m bench.reconcile --n 1000000 --postgres postgresql://...   # or --start-postgres
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import groupby, islice
from operator import itemgetter
from pathlib import Path
from typing import Any

from bench.postgres import add_arguments, postgres_database, settings
from bench.proc_cpu import TICKS_PER_SECOND, cpu_ticks
from bench.rounds import alternate, at_least, ratios
from payhooks.storage import Ledger, PaymentKind, PaymentState, migrate
from payhooks.storage.creation_attempts import LATEST_FINISHED_STATE
from payhooks.storage.payment_states import COLUMNS as PAYMENT_STATE_COLUMNS
from payhooks.storage.payment_states import _values as payment_state_values
from payhooks.storage.payment_states import refresh
from payhooks.storage.records import STATE_RANK
from payhooks.storage.rules import (
    Expectation,
    Inputs,
    ListedFact,
    OutcomeFact,
    Problems,
    reconcile,
    transaction_drift,
)
from payhooks.storage.sql import Connection
from payhooks.storage.times import to_text

CURRENCIES = ("CNY", "USD", "JPY", "KWD")
START = datetime(2026, 1, 1, tzinfo=UTC)

FLOOR_SQL = """
SELECT p.external_identifier, COUNT(o.id), SUM(o.amount_minor), MAX(o.paid_at)
FROM payments AS p LEFT JOIN outcomes AS o ON o.external_identifier = p.external_identifier
GROUP BY p.external_identifier"""

#: The floor's own covering index, made by both builds: the least a per-payment aggregate of
#: outcomes can cost is one scan of an index in the payments' order. The ledger keeps no such
#: covering index (its ``outcomes_identifier`` holds the identifier alone, and its
#: reconciliation reads ``payment_states``, never outcomes), and without one the floor would
#: look up each outcome's row, or sort a million outcomes each round, and look slower than it
#: can be, flattering the ratios.
FLOOR_INDEX_SQL = (
    "CREATE INDEX bench_floor_outcomes ON outcomes (external_identifier, id, amount_minor, paid_at)"
)

# The floor, with only a count leaving SQLite.
FLOOR_SQL_ONLY = (
    "SELECT COUNT(*), MAX(n) "  # noqa: S608 - constants only
    f"FROM ({FLOOR_SQL.replace('COUNT(o.id)', 'COUNT(o.id) AS n')}) AS floor"
)

# Columns of the view read (stored rows: nothing is computed), only a count leaves the database.
VIEW_ONLY_SQL = """
SELECT COUNT(*), MAX(state), MAX(transaction_ids), MAX(received_amount_minor), MAX(opened_at)
FROM reconciliation"""


def _payment(i: int) -> tuple[object, ...]:
    subscription = i % 10 == 9
    return (
        f"order-{i:09d}",
        "subscription" if subscription else "transaction",
        2500,
        CURRENCIES[i % len(CURRENCIES)],
        1900 if subscription else None,
        (START + timedelta(seconds=i)).isoformat(),
    )


def _outcome(j: int, n: int) -> tuple[object, ...]:
    """Outcome j, mostly for payment j; the mix is fixed by j % 100."""
    bucket = j % 100
    target, status, state, amount = j, "PS", PaymentState.SUCCEEDED, 2500
    if 80 <= bucket < 85:
        amount = 2600
    elif 85 <= bucket < 90:
        status, state = "PF", PaymentState.FAILED
    elif 90 <= bucket < 93:
        status, state = "WP", PaymentState.PENDING
    elif 93 <= bucket < 95:
        status, state = "RS", PaymentState.REFUNDED
    elif 95 <= bucket < 98:
        target = n + j  # no such payment: unexpected
    elif bucket >= 98:
        target, amount = j - 1, 1900  # a second transaction: a period, or a duplicate
    currency = CURRENCIES[target % len(CURRENCIES)] if target < n else "CNY"
    paid_at = (START + timedelta(days=1, seconds=j)).isoformat()
    return (
        j + 1,
        f"ll-{j:09d}",
        f"order-{target:09d}",
        "wallet",
        status,
        str(state),
        STATE_RANK[state],
        f"{amount // 100}.{amount % 100:02d}",
        currency,
        amount,
        paid_at,
        paid_at,
    )


_EMPTY_BODY_SHA256 = hashlib.sha256(b"{}").hexdigest()


def _deliveries(n: int) -> Iterator[tuple[object, ...]]:
    now = START.isoformat()
    for j in range(n):
        yield (j + 1, f"msg_{j:09d}", now, "{}", b"{}", _EMPTY_BODY_SHA256, "processed", now)


#: The sync run every listed transaction of a ``--synced`` build belongs to: complete, and its
#: ``expected_before`` earlier than every payment, so none is ``missing_at_service``.
SYNC_RUN = (
    1,
    START.isoformat(),
    (START - timedelta(days=1)).isoformat(),
    "complete",
    1,
    1,
    START.isoformat(),
)
SYNC_RUN_COLUMNS = "id, started_at, expected_before, status, pages, items, updated_at"
LISTED_COLUMNS = (
    "transaction_id, external_identifier, status, state, state_rank, currency, amount_minor, "
    "first_seen_at, last_seen_at, sync_run"
)


def _listed(j: int, n: int) -> tuple[object, ...]:
    """Outcome j's transaction as the service's list gives it: the same status, so the sync
    finds no drift but ``unexpected`` (a transaction for an identifier no payment names)."""
    _, transaction_id, target, _, status, state, rank, _, currency, amount, paid_at, _ = _outcome(
        j, n
    )
    return (transaction_id, target, status, state, rank, currency, amount, paid_at, paid_at, 1)


@dataclass(frozen=True)
class Built:
    """What a build took: all of it, and the part that computed and stored ``payment_states``."""

    seconds: float
    states_seconds: float
    #: Rows of ``payment_states`` written, and how many sampled ones were checked against
    #: :func:`~payhooks.storage.payment_states.refresh`.
    states: int
    checked: int

    def text(self, n: int) -> str:
        return (
            f"built in {self.seconds:.1f} s, of which payment_states {self.states_seconds:.1f} s "
            f"({self.states:,} rows, {self.states_seconds / n * 1e6:.1f} us per payment; "
            f"{self.checked} sampled rows equal to refresh's)"
        )


#: Each input of a payment's row, read in the identifiers' order (byte order on both engines:
#: SQLite's BINARY, PostgreSQL's "C"; the identifiers are ASCII, so Python's order too).
PAYMENT_FACTS_SQL = (
    "SELECT external_identifier, kind, amount_minor, currency, plan_amount_minor, created_at, "  # noqa: S608
    f"{LATEST_FINISHED_STATE} FROM payments AS p ORDER BY external_identifier"
)
OUTCOME_FACTS_SQL = (
    "SELECT external_identifier, id, transaction_id, state, amount_minor, currency, paid_at "
    "FROM outcomes ORDER BY external_identifier, id"
)
LISTED_FACTS_SQL = (
    "SELECT external_identifier, transaction_id, state, currency, first_seen_at "
    "FROM service_transactions ORDER BY external_identifier, transaction_id"
)
#: The bench stores no refused or conflicting delivery, so every row's ``Problems()`` is empty;
#: the build checks that none is stored rather than read them.
PROBLEM_COUNT_SQL = (
    "SELECT COUNT(*) FROM deliveries "
    "WHERE status IN ('malformed_json', 'invalid_payload', 'conflicting_outcome')"
)
LATEST_COMPLETE_SQL = (
    "SELECT expected_before FROM sync_runs WHERE status = 'complete' ORDER BY id DESC LIMIT 1"
)
DRIFT_UPDATE_SQL = (
    "UPDATE service_transactions SET drift = ?, ledger_state = ? WHERE transaction_id = ?"
)
#: How many rows of ``payment_states`` one ``executemany`` writes on SQLite.
STATES_BATCH = 10_000


def _groups(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    """Rows sorted by their first column (the identifier), grouped by it."""
    for identifier, group in groupby(rows, key=itemgetter(0)):
        yield identifier, list(group)


def _merged(
    *streams: Iterator[tuple[str, list[tuple[Any, ...]]]],
) -> Iterator[tuple[str, list[list[tuple[Any, ...]]]]]:
    """Each identifier any stream names, in order, with each stream's group for it (empty
    where that stream has none)."""
    heads = [next(stream, None) for stream in streams]
    while True:
        present = [head[0] for head in heads if head is not None]
        if not present:
            return
        identifier = min(present)
        groups: list[list[tuple[Any, ...]]] = []
        for index, head in enumerate(heads):
            if head is not None and head[0] == identifier:
                groups.append(head[1])
                heads[index] = next(streams[index], None)
            else:
                groups.append([])
        yield identifier, groups


def state_rows(
    payments: Iterable[tuple[Any, ...]],
    outcomes: Iterable[tuple[Any, ...]],
    listed: Iterable[tuple[Any, ...]],
    *,
    missing_before: str | None,
    now: str,
    drift_updates: list[tuple[str | None, str | None, str]],
) -> Iterator[tuple[Any, ...]]:
    """Every identifier's ``payment_states`` row, computed by the ledger's own rules
    (:func:`payhooks.storage.rules.reconcile`) from the facts loaded, in the identifiers'
    order; the listed transactions whose drift is not NULL are appended to ``drift_updates``.

    What :func:`payhooks.storage.payment_states.refresh` does for one payment, for all of them
    in one pass over three sorted streams (one query each, not six per payment). It owes no
    signal: the bench's ledger stands for one whose signals went out long ago.
    """
    for identifier, (expected, outcome_rows, listed_rows) in _merged(
        _groups(payments), _groups(outcomes), _groups(listed)
    ):
        expectation = None
        if expected:
            _, kind, amount, currency, plan, created_at, creation = expected[0]
            expectation = Expectation(
                PaymentKind(kind), amount, currency, plan, created_at, creation
            )
        facts = [
            OutcomeFact(oid, tid, PaymentState(state), amount, currency, paid_at)
            for _, oid, tid, state, amount, currency, paid_at in outcome_rows
        ]
        listed_facts = [
            ListedFact(tid, PaymentState(state), currency, first_seen)
            for _, tid, state, currency, first_seen in listed_rows
        ]
        unseen = expectation is not None and not facts and not listed_facts
        row = reconcile(
            Inputs(
                identifier,
                expectation,
                facts,
                listed_facts,
                Problems(),
                missing_before if unseen else None,
            )
        )
        for item in listed_facts:
            drift, lifecycle = transaction_drift(item, facts, expected=expectation is not None)
            if drift is not None or lifecycle is not None:
                drift_updates.append(
                    (
                        None if drift is None else drift.value,
                        None if lifecycle is None else lifecycle.value,
                        item.transaction_id,
                    )
                )
        if row is not None:
            yield payment_state_values(row, now)


def _no_lock(conn: Connection, identifier: str) -> None:
    """The check is the database's only writer: no payment lock to take."""


def sample_identifiers(n: int, *, count: int = 1000) -> list[str]:
    """The identifiers whose rows the build checks against ``refresh``: the first 200 (every
    bucket of the outcomes' mix twice), then a stride over the payments and the unexpected
    identifiers after them (most of those name nothing: refresh must then store nothing)."""
    head = range(min(n, 200))
    stride = max(1, 2 * n // count)
    return [f"order-{i:09d}" for i in sorted({*head, *range(0, 2 * n, stride)})]


def check_sample(conn: Connection, identifiers: Iterable[str], now: str) -> int:
    """Refresh each identifier's row with the ledger's own per-payment path
    (:func:`~payhooks.storage.payment_states.refresh`) inside the caller's transaction, which
    the caller rolls back, and exit when a row (but its ``updated_at``) or a listed
    transaction's drift comes out other than the bulk build stored it. Returns how many."""
    columns = ", ".join(c for c in PAYMENT_STATE_COLUMNS if c != "updated_at")
    row_sql = f"SELECT {columns} FROM payment_states WHERE external_identifier = ?"  # noqa: S608
    listed_sql = (
        "SELECT transaction_id, drift, ledger_state FROM service_transactions "
        "WHERE external_identifier = ? ORDER BY transaction_id"
    )
    checked = 0
    for identifier in identifiers:
        before = conn.execute(row_sql, (identifier,)).fetchone()
        listed_before = conn.execute(listed_sql, (identifier,)).fetchall()
        refresh(conn, identifier, now=now, lock=_no_lock)
        after = conn.execute(row_sql, (identifier,)).fetchone()
        listed_after = conn.execute(listed_sql, (identifier,)).fetchall()
        if (before, listed_before) != (after, listed_after):
            raise SystemExit(
                f"the bulk build's row of {identifier} differs from refresh's:\n"
                f"  bulk:    {before} {listed_before}\n  refresh: {after} {listed_after}"
            )
        checked += 1
    return checked


def _no_problems(conn: Any) -> None:
    found = conn.execute(PROBLEM_COUNT_SQL).fetchone()
    if found is None or found[0]:
        raise SystemExit("the bench stores no refused delivery, yet some are stored")


def build(path: Path, n: int, *, synced: bool = False) -> Built:
    """Create the ledger file with N payments, deliveries and outcomes (and with ``synced``,
    one complete sync that listed every outcome's transaction), then every payment's
    ``payment_states`` row from them (:func:`state_rows`); check a sample against
    ``refresh``."""
    started = time.perf_counter()
    now = to_text(datetime.now(UTC))
    with Ledger(path) as ledger:
        conn = ledger.database.conn
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO payments (external_identifier, kind, amount_minor, currency, "
            "plan_amount_minor, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (_payment(i) for i in range(n)),
        )
        conn.executemany(
            "INSERT INTO deliveries (id, dedupe_key, received_at, headers, body, body_sha256, "
            "status, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            _deliveries(n),
        )
        conn.executemany(
            "INSERT INTO outcomes (delivery_id, transaction_id, external_identifier, flow, "
            "payment_status, state, state_rank, amount, currency, amount_minor, paid_at, "
            "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (_outcome(j, n) for j in range(n)),
        )
        if synced:
            conn.execute(
                f"INSERT INTO sync_runs ({SYNC_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                SYNC_RUN,
            )
            conn.executemany(
                f"INSERT INTO service_transactions ({LISTED_COLUMNS}) "  # noqa: S608
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (_listed(j, n) for j in range(n)),
            )
        states_started = time.perf_counter()
        _no_problems(conn)
        found = conn.execute(LATEST_COMPLETE_SQL).fetchone()
        drift_updates: list[tuple[str | None, str | None, str]] = []
        rows = state_rows(
            conn.execute(PAYMENT_FACTS_SQL),
            conn.execute(OUTCOME_FACTS_SQL),
            conn.execute(LISTED_FACTS_SQL),
            missing_before=None if found is None else found[0],
            now=now,
            drift_updates=drift_updates,
        )
        states = 0
        while batch := list(islice(rows, STATES_BATCH)):
            conn.executemany(INSERT_STATE_SQL, batch)
            states += len(batch)
        conn.executemany(DRIFT_UPDATE_SQL, drift_updates)
        states_seconds = time.perf_counter() - states_started
        conn.execute(FLOOR_INDEX_SQL)
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        seconds = time.perf_counter() - started
        conn.execute("BEGIN IMMEDIATE")
        try:
            checked = check_sample(conn, sample_identifiers(n), now)
        finally:
            conn.execute("ROLLBACK")
    return Built(seconds, states_seconds, states, checked)


PAYMENT_COLUMNS = "external_identifier, kind, amount_minor, currency, plan_amount_minor, created_at"
DELIVERY_COLUMNS = "id, dedupe_key, received_at, headers, body, body_sha256, status, updated_at"
OUTCOME_COLUMNS = (
    "delivery_id, transaction_id, external_identifier, flow, payment_status, state, "
    "state_rank, amount, currency, amount_minor, paid_at, recorded_at"
)
INSERT_STATE_SQL = (
    f"INSERT INTO payment_states ({', '.join(PAYMENT_STATE_COLUMNS)}) "  # noqa: S608
    f"VALUES ({', '.join('?' for _ in PAYMENT_STATE_COLUMNS)})"
)
#: Rows a server-side cursor of the PostgreSQL build fetches at a time.
PG_FETCH_ROWS = 10_000


def build_postgres(url: str, n: int, *, synced: bool = False) -> Built:
    """Fill the empty database at ``url`` with the same N payments, deliveries and outcomes as
    :func:`build` (migrated first), and their ``payment_states`` rows; check a sample against
    ``refresh``.

    The facts by ``COPY`` in one transaction; then the rows of :func:`state_rows`, read from
    the facts through server-side cursors on one connection and written by one ``COPY`` on
    another, in a second transaction; then ``VACUUM (ANALYZE)``, so the planner knows the
    tables' sizes as it would in production.
    """
    import psycopg

    from payhooks.storage.postgresql.connection import PostgresConnection

    started = time.perf_counter()
    now = to_text(datetime.now(UTC))
    migrate(url)
    with psycopg.connect(url, autocommit=True) as conn, psycopg.connect(url) as writer:
        found = conn.execute("SELECT COUNT(*) FROM payments").fetchone()
        if found is None or found[0]:
            raise SystemExit("--postgres: give an empty database; this one holds payments")
        with conn.transaction():
            tables: list[tuple[str, str, Iterable[tuple[object, ...]]]] = [
                ("payments", PAYMENT_COLUMNS, (_payment(i) for i in range(n))),
                ("deliveries", DELIVERY_COLUMNS, _deliveries(n)),
                ("outcomes", OUTCOME_COLUMNS, (_outcome(j, n) for j in range(n))),
            ]
            if synced:
                tables += [
                    ("sync_runs", SYNC_RUN_COLUMNS, [SYNC_RUN]),
                    ("service_transactions", LISTED_COLUMNS, (_listed(j, n) for j in range(n))),
                ]
            with conn.cursor() as cursor:
                for table, columns, rows in tables:
                    statement = f"COPY {table} ({columns}) FROM STDIN"
                    with cursor.copy(statement) as copy:  # type: ignore[arg-type,unused-ignore]
                        for row in rows:
                            copy.write_row(row)
        # The facts are committed: one connection streams them while the other copies rows.
        states_started = time.perf_counter()
        _no_problems(conn)
        latest = conn.execute(LATEST_COMPLETE_SQL).fetchone()  # type: ignore[arg-type,unused-ignore]
        drift_updates: list[tuple[str | None, str | None, str]] = []
        states = 0
        with conn.transaction():

            def stream(name: str, sql: str) -> Iterator[tuple[Any, ...]]:
                cursor = conn.cursor(name=name)
                cursor.itersize = PG_FETCH_ROWS
                cursor.execute(sql)  # type: ignore[arg-type,unused-ignore]
                return iter(cursor)

            rows = state_rows(
                stream("bench_payments", PAYMENT_FACTS_SQL),
                stream("bench_outcomes", OUTCOME_FACTS_SQL),
                stream("bench_listed", LISTED_FACTS_SQL),
                missing_before=None if latest is None else latest[0],
                now=now,
                drift_updates=drift_updates,
            )
            statement = f"COPY payment_states ({', '.join(PAYMENT_STATE_COLUMNS)}) FROM STDIN"
            with writer.cursor().copy(statement) as copy:  # type: ignore[arg-type,unused-ignore]
                for row in rows:
                    copy.write_row(row)
                    states += 1
        PostgresConnection(writer).executemany(DRIFT_UPDATE_SQL, drift_updates)
        writer.commit()
        states_seconds = time.perf_counter() - states_started
        conn.execute(FLOOR_INDEX_SQL)  # type: ignore[arg-type,unused-ignore]
        # VACUUM too: autovacuum would otherwise visit the new tables during the rounds, and
        # its CPU land on a phase; a ledger this size has long been vacuumed in production.
        conn.execute("VACUUM (ANALYZE)")
        seconds = time.perf_counter() - started
        try:
            checked = check_sample(PostgresConnection(writer), sample_identifiers(n), now)
        finally:
            writer.rollback()
    return Built(seconds, states_seconds, states, checked)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _postgres_pids(postmaster: int) -> list[int]:
    """The server's processes: the postmaster and its children (backends, parallel workers,
    the WAL writer...)."""
    pids = [postmaster]
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2 :].split()[1]) == postmaster:  # ppid
                pids.append(int(entry.name))
    return pids


class _ServerClock:
    """CPU seconds spent by a PostgreSQL server running on this machine, from ``/proc``: its
    processes' user and system time, and the postmaster's reaped children's (a parallel
    worker that exited counts there), so every phase is charged the server's work it caused.
    """

    def __init__(self, postmaster: int) -> None:
        self.postmaster = postmaster

    @classmethod
    def find(cls, conn: Any) -> _ServerClock | None:
        """The clock of ``conn``'s server when it runs here (its backend is a process of this
        machine named postgres), else None."""
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        backend = Path(f"/proc/{row[0]}")
        try:
            if backend.joinpath("comm").read_text().strip() != "postgres":
                return None
            stat = backend.joinpath("stat").read_text()
        except OSError:
            return None
        return cls(int(stat[stat.rfind(")") + 2 :].split()[1]))

    def seconds(self) -> float:
        total = sum(
            cpu_ticks(pid, reaped_children=pid == self.postmaster)
            for pid in _postgres_pids(self.postmaster)
        )
        return total / TICKS_PER_SECOND


def measure(target: Path | str, rounds: int) -> dict[str, Any]:
    """The timed phases, in alternating rounds; runs in the child process. ``target`` is the
    SQLite file or the PostgreSQL URL."""
    results: dict[str, Any] = {}
    with Ledger(target) as ledger:
        results["open_rss_mb"] = _rss_mb()
        counted: dict[str, int] = {}
        server: _ServerClock | None = None
        if isinstance(target, str):  # PostgreSQL: the floor streams, as reconcile() does
            import psycopg

            from payhooks.storage.postgresql.engine import STREAM_BATCH_ROWS

            pg = psycopg.connect(target, autocommit=True)
            server = _ServerClock.find(pg)

            def stream_floor() -> int:
                with pg.transaction(), pg.cursor(name="bench_floor") as cursor:
                    cursor.itersize = STREAM_BATCH_ROWS
                    cursor.execute(FLOOR_SQL)  # type: ignore[arg-type,unused-ignore]
                    return sum(1 for _ in cursor)

            def sql_only(sql: str) -> None:
                pg.execute(sql).fetchall()  # type: ignore[arg-type,unused-ignore]

        else:
            conn = ledger.database.conn

            def stream_floor() -> int:
                return sum(1 for _ in conn.execute(FLOOR_SQL))

            def sql_only(sql: str) -> None:
                conn.execute(sql).fetchall()

        stream_floor()  # warm the caches for every phase alike

        def floor() -> None:
            counted["floor"] = stream_floor()

        def report() -> None:
            rows = 0
            for row in ledger.reconcile():
                row.expected_amount  # noqa: B018 - what a report prints
                row.received_amount  # noqa: B018
                rows += 1
            counted["report"] = rows

        def summary() -> None:
            counted["summary"] = len(ledger.summary())

        phases: dict[str, Callable[[], None]] = {
            "floor": floor,
            "report": report,
            "summary": summary,
            # Where the report's time goes: the view computed by the database alone, no rows
            # leaving it.
            "view_sql": partial(sql_only, VIEW_ONLY_SQL),
            "floor_sql": partial(sql_only, FLOOR_SQL_ONLY),
        }

        def cpu() -> float:
            return time.process_time() + (server.seconds() if server is not None else 0.0)

        # CPU time, not the wall clock: the data is in the caches (warmed above), so every
        # phase is CPU-bound, and on a shared machine the scheduler's pauses would otherwise
        # land on whichever phase was running. On PostgreSQL, the server's CPU too; on a
        # remote server, which /proc cannot see, the wall clock.
        clock = time.perf_counter if isinstance(target, str) and server is None else cpu
        results["clock"] = (
            "wall clock (the server is not on this machine)"
            if clock is time.perf_counter
            else "CPU time of this process and the server's"
            if server is not None
            else "CPU time"
        )

        def timed(name: str, _: int) -> float:
            started = clock()
            phases[name]()
            return clock() - started

        results["seconds"] = alternate(list(phases), rounds, timed)
        results["peak_rss_mb"] = _rss_mb()

        # The Python heap during the report, in a separate untimed pass (tracemalloc is slow).
        tracemalloc.start()
        for row in ledger.reconcile():
            row.received_amount  # noqa: B018
        results["report_heap_peak_kb"] = tracemalloc.get_traced_memory()[1] / 2**10
        tracemalloc.stop()
        if isinstance(target, str):
            pg.close()

    results["floor_rows"] = counted["floor"]
    results["report_rows"] = counted["report"]
    results["summary_rows"] = counted["summary"]
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=at_least(1), default=100_000, help="payments and outcomes")
    parser.add_argument("--rounds", type=at_least(1), default=7, help="alternating rounds")
    parser.add_argument("--database", type=Path, help="keep the ledger here (default: temp)")
    parser.add_argument(
        "--synced",
        action="store_true",
        help="a ledger that payhooks sync has filled: every transaction listed by the service",
    )
    add_arguments(parser, "measure the report (instead of on SQLite)")
    parser.add_argument("--measure-only", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.measure_only is not None:
        target: Path | str = args.measure_only
        if not args.measure_only.startswith("postgresql://"):
            target = Path(args.measure_only)
        print(json.dumps(measure(target, args.rounds)))
        return

    with tempfile.TemporaryDirectory() as tmp, postgres_database(args) as postgres:
        if postgres is not None:
            target = postgres
            built = build_postgres(postgres, args.n, synced=args.synced)
            where = settings(postgres)
            import psycopg

            with psycopg.connect(postgres) as pg:
                found = pg.execute("SELECT pg_database_size(current_database())").fetchone()
            size_mb = (found[0] if found else 0) / 2**20
        else:
            path = args.database or Path(tmp) / "bench.db"
            if path.exists():
                sys.exit(f"{path} exists; choose a new path")
            target, where = path, "SQLite"
            built = build(path, args.n, synced=args.synced)
            size_mb = path.stat().st_size / 2**20
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.reconcile",
                "--rounds",
                str(args.rounds),
                "--measure-only",
                str(target),
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        if child.returncode != 0:
            sys.exit(f"the measuring process failed:\n{child.stderr}")
        r = json.loads(child.stdout)

    n = args.n
    listed = ", every transaction listed by a sync" if args.synced else ""
    seconds: dict[str, list[float]] = r["seconds"]
    median = {name: statistics.median(values) for name, values in seconds.items()}
    print(
        f"N = {n:,} payments, {n:,} outcomes on {where}{listed}; {size_mb:.0f} MB; "
        f"{args.rounds} alternating rounds, timed by {r['clock']}"
    )
    print(built.text(n))
    print(f"floor   (bare SQL per-payment aggregate): {median['floor']:7.2f} s (median of rounds)")
    for phase in ("report", "summary"):
        print(f"{phase:7} {median[phase]:37.2f} s  {median[phase] / n * 1e6:6.2f} us per payment")
    print(
        f"  of which SQL alone: view {median['view_sql']:.2f} s vs floor "
        f"{median['floor_sql']:.2f} s ({ratios(seconds, 'view_sql', 'floor_sql').text()}); "
        "the rest is building Python rows"
    )
    print(
        f"rows: report {r['report_rows']:,}, floor {r['floor_rows']:,}, summary {r['summary_rows']}"
    )
    print(
        f"memory of the measuring process: peak RSS {r['peak_rss_mb']:.0f} MB "
        f"({r['open_rss_mb']:.0f} MB once open); Python heap peak during the report "
        f"{r['report_heap_peak_kb']:.0f} KiB"
    )
    print(f"summary / floor: {ratios(seconds, 'summary', 'floor').text()}")
    print(f"report / floor:  {ratios(seconds, 'report', 'floor').text()}")


if __name__ == "__main__":
    main()
