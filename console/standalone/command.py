"""``payhooks console``: serve the console on 127.0.0.1 and print its one-time login link.

Loopback only, and no ``--host``: the link's token and then the session cookie travel in plain
HTTP, which on loopback no other machine sees or reaches. To read a ledger from elsewhere,
mount :class:`~payhooks.console.Console` in the merchant's app behind HTTPS and their login,
or forward the port over SSH.

Werkzeug's threaded server (what ``payhooks serve`` runs): one person's pages need no more, it
ships with Flask, and it stops on Ctrl-C, which ends the command with exit code 0.
"""

from __future__ import annotations

import getpass
import os
import tempfile
import unicodedata
from pathlib import Path
from typing import Final

import click
from werkzeug.serving import WSGIRequestHandler, make_server

from payhooks.console import ConsoleRole
from payhooks.console.limits import DEFAULT_TIME_LIMIT_MS, MAX_TIME_LIMIT_MS
from payhooks.console.standalone.app import ConsoleRun, create_console_app
from payhooks.console.standalone.login_token import TOKEN_LIFETIME
from payhooks.receiver.cli.common import (
    BadUsage,
    database_option,
    resolve_database,
    settings,
    shown,
)
from payhooks.storage import Ledger, NotALedgerError, StorageError, is_postgres_url

__all__ = ["HOST", "MAX_WHO_LENGTH", "console_command"]

#: The only address the console listens on.
HOST: Final = "127.0.0.1"
#: The longest name ``--who`` takes.
MAX_WHO_LENGTH: Final = 64


class _SilentHandler(WSGIRequestHandler):
    """No access log: its lines would carry the login link's token and the run's prefix."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return


def _who(value: str | None) -> str:
    name = value if value is not None else getpass.getuser()
    if not 1 <= len(name) <= MAX_WHO_LENGTH or any(
        unicodedata.category(char)[0] in "CZ" and char != " " for char in name
    ):
        raise BadUsage(
            f"--who must be a name of 1 to {MAX_WHO_LENGTH} characters, without control "
            "characters or line breaks."
        )
    return name


def _check_ledger(target: Path | str, *, read_only: bool, busy_timeout_ms: int) -> None:
    """Open the ledger once, as each thread will, so that a ledger that cannot be served
    fails now, in one sentence, rather than on every page."""
    if isinstance(target, Path) and not target.is_file():
        raise BadUsage(f"There is no ledger at {target}: pass --database.")
    try:
        Ledger(target, busy_timeout_ms=busy_timeout_ms, create=False, read_only=read_only).close()
    except NotALedgerError as err:
        raise click.ClickException(err.message) from err
    except StorageError as err:
        raise click.ClickException(
            f"Cannot open the ledger at {shown(target)}: {err.message}"
        ) from err


@click.command("console")
@database_option
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="The port to listen on, on 127.0.0.1; 0 takes any free one.",
)
@click.option(
    "--role",
    type=click.Choice([role.value for role in ConsoleRole]),
    default=ConsoleRole.VIEWER.value,
    show_default=True,
    help="What the person logging in may do. A viewer's ledger is opened read-only.",
)
@click.option("--who", default=None, help="Your name, for the record. Default: your user name.")
@click.option(
    "--time-limit-ms",
    type=click.IntRange(1, MAX_TIME_LIMIT_MS),
    default=DEFAULT_TIME_LIMIT_MS,
    show_default=True,
    help="How long one page's reads may take together; past it a count stops, and says so.",
)
def console_command(
    database: Path | str | None, port: int, role: str, who: str | None, time_limit_ms: int
) -> None:
    """Serve the console on 127.0.0.1 for one person, and print the link to open.

    The link carries a login token that works once, within 10 minutes; the browser then keeps
    a session until the command stops (Ctrl-C). With --role viewer (the default) the ledger is
    opened read-only, so a read-only file or a PostgreSQL role with only SELECT is enough.
    With PAYHOOKS_SECRETS (or PAYHOOKS_PUBLIC_KEYS) set, a delivery's page checks its
    signature again with those keys, as the console in the app does.
    """
    target = resolve_database(database)
    if isinstance(target, Path):
        target = target.absolute()
    granted = ConsoleRole(role)
    name = _who(who)
    read_only = granted is ConsoleRole.VIEWER
    configured = settings()  # the environment's, checked as every command reads them
    busy_timeout_ms = configured.busy_timeout_ms
    _check_ledger(target, read_only=read_only, busy_timeout_ms=busy_timeout_ms)
    # The run's exports live as long as the run: the folder goes when the command stops.
    with tempfile.TemporaryDirectory(prefix="payhooks-console-exports-") as exports:
        _serve(
            create_console_app(
                target if is_postgres_url(target) else os.fspath(target),
                role=granted,
                who=name,
                read_only=read_only,
                busy_timeout_ms=busy_timeout_ms,
                settings=configured,
                exports=exports,
                time_limit_ms=time_limit_ms,
            ),
            port,
            f"payhooks console on {shown(target)} "
            f"({'read-only' if read_only else 'read-write'}), as {granted.value} for {name}",
        )


def _serve(run: ConsoleRun, port: int, banner: str) -> None:
    """Serve ``run`` on 127.0.0.1 until Ctrl-C, after printing ``banner`` and the link."""
    try:
        server = make_server(HOST, port, run.app, threaded=True, request_handler=_SilentHandler)
    except OSError as err:
        raise click.ClickException(
            f"Cannot listen on {HOST} port {port}: {err.strerror or err}."
        ) from err
    real_port = server.socket.getsockname()[1]
    minutes = int(TOKEN_LIFETIME.total_seconds() // 60)
    try:  # from here on, Ctrl-C is how the command is meant to end
        click.echo(banner)
        click.echo(f"Open this link within {minutes} minutes; it works once:")
        click.echo(f"  http://{HOST}:{real_port}{run.login_path}")
        click.echo("Press Ctrl-C to stop.")
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        click.echo("Stopped.")
    finally:
        server.server_close()
