"""The ledger ``bench.console`` measures the console's pages on: N payments, about as many
deliveries, spread over 120 days.

``bench.reconcile``'s ledger does not fit: its deliveries all arrive at one moment with an
empty body and no headers, and name no payment, so a time window, an identifier filter or a
delivery's page would measure nothing real. Here delivery ``i`` is about payment ``i`` and
arrives at ``END - 120 days + i * 120 days / N`` (ids in time order, as the receiver stores
them), so the console's 1h, 24h and 7d windows hold about N/2880, N/120 and N/17 deliveries,
and a 90-day chart spans three quarters of them. Each stores the body a payment service sends
(a JSON notification of about 300 bytes) and the headers it comes with (Standard Webhooks'
three, the content type, a user agent).

The mix is fixed by ``i % 100``: most are processed with a paid outcome; some failed, some
paid another amount; some are duplicates (of an earlier payment's outcome, so their own
payment stays unseen); some were refused (malformed JSON, an invalid payload: they name no
payment) or failed while being processed (naming their payment), and one in a hundred is
stored but not processed yet. ``rejected_deliveries`` holds the newest
:data:`~payhooks.storage.DEFAULT_MAX_REJECTED` refused requests, spread over the same time.

Every payment's ``payment_states`` row is computed from the facts by the ledger's own rules
(:func:`bench.reconcile.state_rows`), and a sample is checked against the ledger's
per-payment path (:func:`bench.reconcile.check_sample`), as ``bench.reconcile`` does. A built
ledger says what it holds in a table of its own (``bench_console``: ``n``), so a later run with
the same ``--database`` reuses it instead of building it again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

from bench.reconcile import INSERT_STATE_SQL, check_sample, sample_identifiers, state_rows
from payhooks.storage import Ledger, PaymentState, migrate
from payhooks.storage.limits import DEFAULT_MAX_REJECTED
from payhooks.storage.payment_states import COLUMNS as PAYMENT_STATE_COLUMNS
from payhooks.storage.records import STATE_RANK
from payhooks.storage.times import to_text

__all__ = [
    "END",
    "SPAN",
    "build",
    "built_n",
    "delivery_at",
    "identifier",
    "late_candidates",
    "write_late",
]

#: The console's clock in the bench: the newest delivery arrives just before it.
END = datetime(2026, 5, 1, tzinfo=UTC)
#: How far back the deliveries go.
SPAN = timedelta(days=120)

PAYMENT_COLUMNS = "external_identifier, kind, amount_minor, currency, plan_amount_minor, created_at"
DELIVERY_COLUMNS = (
    "id, dedupe_key, received_at, headers, body, body_sha256, status, error, outcome_id, "
    "external_identifier, updated_at"
)
OUTCOME_COLUMNS = (
    "id, delivery_id, transaction_id, external_identifier, flow, payment_status, state, "
    "state_rank, amount, currency, amount_minor, paid_at, recorded_at"
)
REJECTED_COLUMNS = "received_at, remote_addr, reason, body, body_size"
SEQUENCES_SQL = tuple(
    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"  # noqa: S608
    for table in ("deliveries", "outcomes")
)
MARKER_SQL = "CREATE TABLE bench_console (n INTEGER NOT NULL)"
CURRENCIES = ("CNY", "USD", "EUR", "JPY")


def identifier(i: int) -> str:
    return f"order-{i:09d}"


def delivery_at(i: int, n: int) -> datetime:
    """When delivery ``i`` (0-based; its id is ``i + 1``) of ``n`` arrived."""
    return END - SPAN + SPAN * (i / n)


def _kind(bucket: int) -> str:
    """What became of delivery ``i`` by ``i % 100``."""
    if bucket < 86:
        return "paid"
    if bucket < 90:
        return "failed"
    if bucket < 92:
        return "other_amount"
    if bucket < 94:
        return "duplicate"  # of payment i - (bucket - 91)'s outcome: buckets 90 and 91 paid
    return {94: "malformed_json", 95: "invalid_payload", 96: "processing_error"}.get(
        bucket, "received" if bucket == 97 else "paid"
    )


#: The notification a payment service sends, as bytes (the bench writes a million: formatting
#: a template costs a fraction of ``json.dumps``, and gives the same compact JSON).
_BODY = (
    '{"ll_transaction_id":"ll-%(i)09d","merchant_transaction_id":"order-%(i)09d",'
    '"payment_data":{"payment_status":"%(status)s","payment_amount":"%(amount)s",'
    '"payment_currency_code":"%(currency)s","payment_time":"%(time)s",'
    '"payment_method":"wallet","stripe_payment_intent_id":"pi_%(i)024d"},'
    '"customer":{"email":"buyer-%(i)d@example.com","country":"DE"}}'
)
_HEADERS = (
    '{"Content-Type": "application/json", "User-Agent": "LinkLedger-Webhooks/2.4", '
    '"Webhook-Id": "msg_%(i)012d", "Webhook-Timestamp": "%(timestamp)d", '
    '"Webhook-Signature": "v1,%(signature)s="}'
)


def _body(i: int, status: str, amount_minor: int, currency: str, at: datetime) -> bytes:
    values = {
        "i": i,
        "status": status,
        "amount": f"{amount_minor // 100}.{amount_minor % 100:02d}",
        "currency": currency,
        "time": at.strftime("%Y%m%d%H%M%S"),
    }
    return (_BODY % values).encode()


def _headers(i: int, at: datetime) -> str:
    signature = hashlib.sha256(b"%d" % i).hexdigest()[:43]
    return _HEADERS % {"i": i, "timestamp": int(at.timestamp()), "signature": signature}


def _rows(n: int) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...] | None]]:
    """Per payment ``i``, in order: its row, its delivery's, and its outcome's (or None)."""
    outcome_id = 0
    outcome_of: dict[int, int] = {}  # payment -> its outcome's id, for the duplicates
    for i in range(n):
        at = delivery_at(i, n)
        bucket = i % 100
        kind = _kind(bucket)
        currency = CURRENCIES[i % len(CURRENCIES)]
        payment = (identifier(i), "transaction", 2500, currency, None, to_text(at - SPAN / 86400))
        amount = 2600 if kind == "other_amount" else 2500
        status, state = ("PF", PaymentState.FAILED) if kind == "failed" else ("PS", None)
        body = _body(i, status, amount, currency, at)
        received = to_text(at)
        about: str | None = identifier(i)
        outcome: tuple[Any, ...] | None = None
        error: str | None = None
        delivery_status, linked = "processed", None
        if kind in {"paid", "failed", "other_amount"}:
            outcome_id += 1
            outcome_of[i] = linked = outcome_id
            state = state or PaymentState.SUCCEEDED
            paid_at = to_text(at - timedelta(seconds=30))
            outcome = (
                outcome_id, i + 1, f"ll-{i:09d}", identifier(i), "wallet", status, str(state),
                STATE_RANK[state], f"{amount // 100}.{amount % 100:02d}", currency, amount,
                paid_at, received,
            )  # fmt: skip
        elif kind == "duplicate":
            original = i - (bucket - 91)
            delivery_status, linked, about = "duplicate", outcome_of[original], identifier(original)
        elif kind in {"malformed_json", "invalid_payload"}:
            delivery_status, about = kind, None
            error = "the body is not JSON" if kind == "malformed_json" else "payment_data missing"
            body = body[:120] if kind == "malformed_json" else body
        else:
            delivery_status = kind
            if kind == "processing_error":
                error = "OperationalError: database is locked"
        outcome_of.pop(i - 3, None)
        digest = hashlib.sha256(body).hexdigest()
        delivery = (
            i + 1, f"msg_{i:012d}", received, _headers(i, at), body, digest, delivery_status,
            error, linked, about, received,
        )  # fmt: skip
        yield payment, delivery, outcome


def _rejected(n: int) -> Iterator[tuple[Any, ...]]:
    count = min(n, DEFAULT_MAX_REJECTED)
    for k in range(count):
        at = END - SPAN + SPAN * (k / count)
        body = b'{"ll_transaction_id":"ll-forged-%d"}' % k
        yield (to_text(at), f"203.0.113.{k % 250}", "invalid_signature", body, len(body))


def _payment_fact(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A payment's row as :func:`bench.reconcile.state_rows` reads it (``creation`` last)."""
    return (*row, None)


def _outcome_fact(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """An outcome's row as :func:`bench.reconcile.state_rows` reads it."""
    return (row[3], row[0], row[2], row[6], row[10], row[9], row[11])


def built_n(conn: Any) -> int | None:
    """The N a ledger was built with, or None when it is not one of these (or is empty)."""
    try:
        found = conn.execute("SELECT n FROM bench_console").fetchone()
    except Exception:  # no such table, on either engine
        return None
    return None if found is None else int(found[0])


def _insert(columns: str, table: str) -> str:
    marks = ", ".join("?" for _ in columns.split(","))
    return f"INSERT INTO {table} ({columns}) VALUES ({marks})"  # noqa: S608 - constants


#: Payments written per batch: each batch's rows are made once and go to every table.
BATCH = 10_000


def _batches(n: int, now: str) -> Iterator[tuple[list[Any], list[Any], list[Any], list[Any]]]:
    """The rows of ``payments``, ``deliveries``, ``outcomes`` and ``payment_states``, a batch
    of payments at a time, each made once. Payment ``i`` is ``order-<i>``, zero-padded, so
    the payments come in the identifiers' order, as :func:`bench.reconcile.state_rows` needs
    (an outcome is its own payment's; a duplicate delivery makes none)."""
    rows = _rows(n)
    drift: list[tuple[str | None, str | None, str]] = []
    while batch := list(islice(rows, BATCH)):
        payments = [payment for payment, _, _ in batch]
        deliveries = [delivery for _, delivery, _ in batch]
        outcomes = [outcome for _, _, outcome in batch if outcome is not None]
        states = state_rows(
            map(_payment_fact, payments),
            map(_outcome_fact, outcomes),
            iter(()),
            missing_before=None,
            now=now,
            drift_updates=drift,
        )
        yield payments, deliveries, outcomes, list(states)


def build(target: Path | str, n: int) -> float:
    """Fill the new ledger ``target`` (a SQLite path, or an empty PostgreSQL database's URL)
    with ``n`` payments and their deliveries; return the seconds it took."""
    started = time.perf_counter()
    now = to_text(END)
    if isinstance(target, str):
        _build_postgres(target, n, now)
    else:
        _build_sqlite(target, n, now)
    return time.perf_counter() - started


def _build_sqlite(path: Path, n: int, now: str) -> None:
    with Ledger(path) as ledger:
        conn = ledger.database.conn
        conn.execute("PRAGMA synchronous = OFF")
        # A delivery names its outcome and the outcome its delivery, and SQLite would look
        # for a new outcome's deliveries by scanning them all (deliveries.outcome_id has no
        # index): the keys are checked once, after the inserts, instead.
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("BEGIN IMMEDIATE")
        for payments, deliveries, outcomes, states in _batches(n, now):
            conn.executemany(_insert(PAYMENT_COLUMNS, "payments"), payments)
            conn.executemany(_insert(DELIVERY_COLUMNS, "deliveries"), deliveries)
            conn.executemany(_insert(OUTCOME_COLUMNS, "outcomes"), outcomes)
            conn.executemany(INSERT_STATE_SQL, states)
        conn.executemany(_insert(REJECTED_COLUMNS, "rejected_deliveries"), _rejected(n))
        if broken := conn.execute("PRAGMA foreign_key_check").fetchmany(5):
            raise SystemExit(f"the bench's ledger breaks its foreign keys: {broken}")
        conn.execute(MARKER_SQL)
        conn.execute("INSERT INTO bench_console (n) VALUES (?)", (n,))
        conn.execute("COMMIT")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("ANALYZE")
        conn.execute("BEGIN IMMEDIATE")
        try:
            check_sample(conn, sample_identifiers(n, count=200), now)
        finally:
            conn.execute("ROLLBACK")


def _copy(cursor: Any, table: str, columns: str, rows: Iterable[tuple[Any, ...]]) -> None:
    statement = f"COPY {table} ({columns}) FROM STDIN"
    with cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)


def _build_postgres(url: str, n: int, now: str) -> None:
    import psycopg

    from payhooks.storage.postgresql.connection import PostgresConnection

    migrate(url)
    with psycopg.connect(url) as conn:
        with conn.cursor() as cursor:
            tables = {
                "payments": PAYMENT_COLUMNS,
                "deliveries": DELIVERY_COLUMNS,
                "outcomes": OUTCOME_COLUMNS,
                "payment_states": ", ".join(PAYMENT_STATE_COLUMNS),
            }
            # A delivery names its outcome and the outcome its delivery, each through a foreign
            # key checked at once: the load skips the checks (as a restore does; it needs a
            # superuser); SQLite's build checks the same rows' keys.
            cursor.execute("SET LOCAL session_replication_role = replica")
            for batch in _batches(n, now):  # one COPY per table and batch
                for (table, columns), rows in zip(tables.items(), batch, strict=True):
                    _copy(cursor, table, columns, rows)
            _copy(cursor, "rejected_deliveries", REJECTED_COLUMNS, _rejected(n))
            for sequence in SEQUENCES_SQL:  # the ids were given: move the sequences on
                cursor.execute(sequence)  # type: ignore[arg-type,unused-ignore]
            cursor.execute(MARKER_SQL)  # type: ignore[arg-type,unused-ignore]
            cursor.execute("INSERT INTO bench_console (n) VALUES (%s)", (n,))
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM (ANALYZE)")
        conn.autocommit = False
        try:
            check_sample(PostgresConnection(conn), sample_identifiers(n, count=200), now)
        finally:
            conn.rollback()


#: A late notification: the wallet form's four members, paid in full.
_LATE_BODY = (
    '{"ll_transaction_id":"ll-%(i)09d","merchant_transaction_id":"order-%(i)09d",'
    '"payment_data":{"payment_status":"PS","payment_amount":"25.00",'
    '"payment_currency_code":"%(currency)s","payment_time":"%(time)s"}}'
)


def late_candidates(n: int, count: int, days: int = 90) -> list[int]:
    """``count`` payments of the last ``days`` days that have no outcome yet (buckets 92 and
    93, whose deliveries duplicate another's, and 97, stored but never processed), evenly
    spread: each a past day a late delivery changes."""
    first = next(i for i in range(n) if delivery_at(i, n) >= END - timedelta(days=days))
    waiting = [i for i in range(first, n) if i % 100 in (92, 93, 97)]
    return sorted({waiting[k * len(waiting) // count] for k in range(min(count, len(waiting)))})


def write_late(target: Path | str, n: int, count: int, at: datetime) -> tuple[int, float]:
    """Record ``count`` late deliveries, each paying one of :func:`late_candidates`, through
    the receiver's own path (``Ledger.receiver``: the delivery, then its outcome and the
    payment's state, a transaction each), arriving at ``at``; how many and the seconds taken.
    Written again by a later run, each is a duplicate of the first (another dedupe key, the
    same outcome): the days still change nothing new, so measure after a fresh build."""
    from payhooks.receiver.payloads import parse_notification

    stamp = time.time_ns()
    started = time.perf_counter()
    chosen = late_candidates(n, count)
    with Ledger(target, clock=lambda: at) as ledger:
        for i in chosen:
            body = (
                _LATE_BODY
                % {
                    "i": i,
                    "currency": CURRENCIES[i % len(CURRENCIES)],
                    "time": delivery_at(i, n).strftime("%Y%m%d%H%M%S"),
                }
            ).encode()
            stored = ledger.receiver.record_delivery(
                dedupe_key=f"late-{stamp}-{i}", body=body, headers={}
            )
            ledger.receiver.record_outcome(parse_notification(body), delivery_id=stored.id)
    return len(chosen), time.perf_counter() - started
