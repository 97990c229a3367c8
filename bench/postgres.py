"""The PostgreSQL database a bench measures on: the one given, or a throwaway server's.

``--postgres URL`` names an empty database the bench may write (and, for ``bench.reconcile``,
fill); ``--start-postgres`` starts a server of its own for the run instead, from the
distribution's binaries (:class:`tests.support.postgres.PostgresServer`, as an unprivileged
user when run as root, since PostgreSQL refuses root), and stops it and removes its files when
the bench ends, also when it fails. That server keeps PostgreSQL's durable defaults (``fsync``
and ``synchronous_commit`` on), unlike the test suite's: a bench that times commits must time
real ones. :func:`settings` prints what the server does, so a figure says what it was measured
on.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.postgres import INSTALL_COMMAND, PostgresServer, find_bin_dir

__all__ = ["add_arguments", "postgres_database", "settings"]


def add_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--postgres URL`` and ``--start-postgres``; ``what`` says what the bench does there."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--postgres", metavar="URL", default=None, help=f"also {what} on this empty database"
    )
    group.add_argument(
        "--start-postgres",
        action="store_true",
        help=f"also {what} on a throwaway PostgreSQL server started for the run (durable "
        "settings), stopped after",
    )


@contextmanager
def postgres_database(args: argparse.Namespace) -> Iterator[str | None]:
    """The URL to measure on (``args.postgres``, or a new database on a server started for
    the run when ``args.start_postgres``), or None for neither."""
    if args.postgres or not args.start_postgres:
        yield args.postgres
        return
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit(f"--start-postgres: no pg_ctl found; install it with: {INSTALL_COMMAND}")
    server = PostgresServer(bin_dir, durable=True)
    try:
        server.start()
        yield server.create_database()
    finally:
        from payhooks.storage.postgresql import close_pools

        close_pools()  # this process's connections, before the server goes
        server.stop()


def settings(url: str) -> str:
    """The server's version and the settings a commit's cost depends on, in one line."""
    import psycopg

    with psycopg.connect(url) as conn:
        shown = {
            name: conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
            for name in ("server_version", "fsync", "synchronous_commit", "shared_buffers")
        }
    values = {name: str(row[0]) if row else "?" for name, row in shown.items()}
    version = values.pop("server_version")
    return f"PostgreSQL {version} ({', '.join(f'{k}={v}' for k, v in values.items())})"
