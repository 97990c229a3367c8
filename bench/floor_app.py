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

Served as ``bench.floor_app:create_app()`` and ``bench.floor_app:create_durable_app()``; the
durable one reads ``PAYHOOKS_DATABASE`` (its file is that path plus ``.floor.db``) and
``PAYHOOKS_SQLITE_SYNCHRONOUS`` from the environment; :func:`prepare_durable_floor` makes the
file first.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time

from flask import Flask, Response, jsonify, request
from payhooks.storage.sqlite import WalSync, WriteLock

__all__ = ["FLOOR_SUFFIX", "create_app", "create_durable_app", "prepare_durable_floor"]

NOTIFY = "/payhooks/notifications"
#: The durable floor's file: the receiver's ``PAYHOOKS_DATABASE`` with this appended.
FLOOR_SUFFIX = ".floor.db"


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
