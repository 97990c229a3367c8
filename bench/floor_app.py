"""The floors for ``bench/receive.py``: the cheapest answers Flask and gunicorn can give.

``create_app()`` is the floor the goal is measured against: one route at the receiver's path
that reads the body and answers the same small JSON acknowledgement the receiver sends, with
no signature, no storage and no parsing. Whatever it reaches on a machine is the ceiling: the
cost of HTTP, WSGI and Flask that no change to payhooks could remove.

``create_durable_app()`` is the same route plus what the goal's "every notification durably
stored" costs by itself: the raw body inserted into a SQLite table (WAL mode, one connection
per worker, a unique key per notification) and committed as durably as the receiver commits,
with the same machinery: writers queue on :class:`payhooks.storage.sqlite.WriteLock`, and for
``FULL`` the commit is made under SQLite's ``NORMAL`` and the log then synced outside the lock
by :class:`payhooks.storage.sqlite.WalSync`. (Done the obvious way instead, SQLite's own ``FULL``
and its busy handler, this app reached a third of that.) No verification, no parsing, no outcome,
no reconciliation: it shows how much of the distance between the receiver and the floor
durability alone takes, and what is left for payhooks' own work.

``create_durable_postgres_app()`` is the durable floor of the receiver on PostgreSQL, by the
same rule: the bare route plus an ``INSERT`` of the raw body, with a unique key, into a table of
the receiver's own database (:data:`PG_FLOOR_TABLE`), committed as the receiver commits a
``FULL`` write. It borrows its connection from the same per-process pool the ledger does
(:func:`payhooks.storage.postgresql.pool_for`: autocommit, the same ``lock_timeout``, at most
that many connections per worker), opens a transaction and commits it with the server's own
``synchronous_commit``, as :class:`payhooks.storage.postgresql.writer.Writer` does for a
durable write. So what it costs beyond the bare route is the round trips of one transaction
and the server's WAL flush, which no receiver on that server can avoid; the rest of the
receiver's distance to it is payhooks' own work (and its extra statements and round trips).

Served as ``bench.floor_app:create_app()``, ``bench.floor_app:create_durable_app()`` and
``bench.floor_app:create_durable_postgres_app()``; the durable ones read ``PAYHOOKS_DATABASE``
from the environment (SQLite's file is that path plus ``.floor.db``; PostgreSQL's is a table in
that database), and SQLite's ``PAYHOOKS_SQLITE_SYNCHRONOUS``; :func:`prepare_durable_floor`
and :func:`prepare_durable_postgres_floor` make the file or the table first.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time

from flask import Flask, Response, jsonify, request

from payhooks.storage.sqlite import WalSync, WriteLock

__all__ = [
    "FLOOR_SUFFIX",
    "PG_BUSY_TIMEOUT_MS",
    "PG_FLOOR_TABLE",
    "create_app",
    "create_durable_app",
    "create_durable_postgres_app",
    "postgres_floor_stored",
    "prepare_durable_floor",
    "prepare_durable_postgres_floor",
]

NOTIFY = "/payhooks/notifications"
#: The durable floor's file: the receiver's ``PAYHOOKS_DATABASE`` with this appended.
FLOOR_SUFFIX = ".floor.db"
#: The PostgreSQL durable floor's table, in the receiver's database (no payhooks table has
#: this name).
PG_FLOOR_TABLE = "bench_floor_deliveries"
#: The ledger's default busy timeout (``Ledger(busy_timeout_ms=5000)``), which the receiver
#: runs with: its pool's ``lock_timeout`` and checkout wait, so the floor's pool is the same.
PG_BUSY_TIMEOUT_MS = 5000


def _acknowledgement() -> Response:
    return jsonify({"code": "200", "msg": "success", "status": "processed"})


def _flask_app() -> Flask:
    app = Flask(__name__)
    # A merchant's app has a secret key (payhooks' return URLs need one), and with one Flask
    # opens the session cookie on every request: the floors pay that too.
    app.config["SECRET_KEY"] = "floor"
    return app


def create_app() -> Flask:
    app = _flask_app()

    @app.post(NOTIFY)
    def notifications() -> Response:
        request.get_data()  # the receiver reads every byte; so does the floor
        return _acknowledgement()

    return app


class _Store:
    """One SQLite connection (with its write lock and syncer) per thread and process."""

    def __init__(self, path: str, synchronous: str) -> None:
        self.path = path
        self.synchronous = synchronous
        self._local = threading.local()

    def _open(self) -> tuple[sqlite3.Connection, WriteLock, WalSync | None]:
        local = self._local
        if getattr(local, "pid", None) != os.getpid():
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            conn.execute("PRAGMA synchronous = NORMAL")  # FULL: synced below, as the ledger does
            syncer = WalSync(self.path) if self.synchronous == "FULL" else None
            local.parts, local.pid = (conn, WriteLock(self.path), syncer), os.getpid()
        parts: tuple[sqlite3.Connection, WriteLock, WalSync | None] = local.parts
        return parts

    def store(self, dedupe_key: str, body: bytes) -> None:
        conn, lock, syncer = self._open()
        lock.acquire(time.monotonic() + 30)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT INTO deliveries (dedupe_key, body) VALUES (?, ?) "
                    "ON CONFLICT (dedupe_key) DO NOTHING",
                    (dedupe_key, body),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            lock.release()
        if syncer is not None:
            syncer.sync()


def prepare_durable_floor(database: str) -> None:
    """Create the durable floor's file, in WAL mode, before its workers start (several
    processes switching a new file to WAL at once fail with ``SQLITE_BUSY``)."""
    conn = sqlite3.connect(database + FLOOR_SUFFIX, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS deliveries (id INTEGER PRIMARY KEY, "
            "dedupe_key TEXT NOT NULL UNIQUE, body BLOB NOT NULL)"
        )
    finally:
        conn.close()


def create_durable_app() -> Flask:
    app = _flask_app()
    synchronous = os.environ.get("PAYHOOKS_SQLITE_SYNCHRONOUS", "FULL").upper()
    if synchronous not in {"FULL", "NORMAL"}:
        raise ValueError(f"PAYHOOKS_SQLITE_SYNCHRONOUS must be FULL or NORMAL, not {synchronous}")
    store = _Store(os.environ["PAYHOOKS_DATABASE"] + FLOOR_SUFFIX, synchronous)

    @app.post(NOTIFY)
    def notifications() -> Response:
        store.store(request.headers.get("webhook-id", ""), request.get_data())
        return _acknowledgement()

    return app


def prepare_durable_postgres_floor(url: str) -> None:
    """Create the PostgreSQL durable floor's table in ``url``'s database and empty it, before
    its workers start: the rounds begin on an empty table, as the receiver's ledger does."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {PG_FLOOR_TABLE} ("
            "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
            'dedupe_key TEXT COLLATE "C" NOT NULL UNIQUE, body BYTEA NOT NULL)'
        )
        conn.execute(f"TRUNCATE {PG_FLOOR_TABLE}")


def postgres_floor_stored(url: str) -> int:
    """How many bodies the PostgreSQL durable floor committed, read after its server stopped."""
    import psycopg

    with psycopg.connect(url) as conn:
        found = conn.execute(f"SELECT COUNT(*) FROM {PG_FLOOR_TABLE}").fetchone()  # noqa: S608
    assert found is not None
    return int(found[0])


def create_durable_postgres_app() -> Flask:
    """The PostgreSQL durable floor (see the module docstring); ``PAYHOOKS_DATABASE`` is the
    receiver's ``postgresql://`` URL."""
    from payhooks.storage.postgresql import pool_for

    app = _flask_app()
    url = os.environ["PAYHOOKS_DATABASE"]
    insert = (
        f"INSERT INTO {PG_FLOOR_TABLE} (dedupe_key, body) VALUES (%s, %s) "  # noqa: S608
        "ON CONFLICT (dedupe_key) DO NOTHING"
    )

    @app.post(NOTIFY)
    def notifications() -> Response:
        body = request.get_data()
        # Looked up per request, as the ledger's writer does: the pool is per process.
        with (
            pool_for(url, busy_timeout_ms=PG_BUSY_TIMEOUT_MS).connection() as conn,
            conn.transaction(),
        ):
            conn.execute(insert, (request.headers.get("webhook-id", ""), body))
        return _acknowledgement()

    return app
