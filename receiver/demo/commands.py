"""``payhooks serve`` and ``payhooks demo``: the demo app, served or run through its paces.

Both import the demo app only when they run, so ``payhooks --help`` and the in-app commands do
not pay for building it.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import click

from payhooks.receiver.cli.common import SIGNING_KEY_ENV, BadUsage, ledger_for, shown

__all__ = ["demo_command", "serve_command"]


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Hold back a logger's warnings for a moment (the command says the same thing better)."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host`` and ``port``, bound here rather than by werkzeug, which
    prints two lines of its own and exits when it cannot bind.

    :raises click.ClickException: the address cannot be used (a busy port), in one sentence.
    """
    from werkzeug.serving import get_sockaddr, select_address_family

    family = select_address_family(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug does
        sock.bind(get_sockaddr(host, port, family))
        sock.listen(socket.SOMAXCONN)
    except OSError as err:
        sock.close()
        raise click.ClickException(
            f"Cannot listen on {host} port {port}: {err.strerror or err}."
        ) from err
    return sock


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="The port to listen on.",
)
def serve_command(host: str, port: int) -> None:
    """Run the demo app (payhooks.receiver.demo:create_app) on Werkzeug's development server.

    It reads every PAYHOOKS_* setting from the environment, keeps its ledger in
    ./payhooks.db unless PAYHOOKS_DATABASE says otherwise, and when no key is set generates a
    development key and prints it. For development only: run a real app under gunicorn.
    """
    from werkzeug.serving import make_server

    from payhooks.receiver.demo.app import DEMO_SIGNING_KEY, create_app

    try:
        with _quiet("payhooks"):
            app = create_app()
    except ValueError as err:
        raise BadUsage(f"The configuration cannot be used: {str(err).rstrip('.')}.") from err
    database = str(app.config["PAYHOOKS_DATABASE"])
    # Listen first: a server that cannot start (a busy port) leaves no new ledger file behind,
    # and prints no key, which would be a key for nothing left in the terminal's scrollback.
    listening = _listen(host, port)
    try:
        with ledger_for(database, must_exist=False):
            pass  # a ledger that cannot be opened (psycopg missing, a bad URL) fails here
        server = make_server(host, port, app, threaded=True, fd=listening.fileno())
    finally:
        listening.close()  # the server holds its own duplicate of the socket
    port = server.socket.getsockname()[1]  # the real one, when --port 0 asked for any
    scheme = app.config["PAYHOOKS_SIGNATURE_SCHEME"]
    prefix = app.config["PAYHOOKS_URL_PREFIX"]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}{prefix}/notifications"
    click.echo(f"payhooks receiver at {url}")
    click.echo(f"  scheme {scheme}, ledger {shown(database)}")
    generated = app.config.get(DEMO_SIGNING_KEY)
    if generated:
        from payhooks.verify import SCHEMES

        if SCHEMES[scheme].key_kind == "secret":
            click.echo(
                "  PAYHOOKS_SECRETS is not set: generated a development secret for this run:"
            )
            click.echo(f"  export PAYHOOKS_SECRETS={generated}")
        else:
            click.echo(
                "  PAYHOOKS_PUBLIC_KEYS is not set: generated a development key pair; sign with:"
            )
            click.echo(f"  export {SIGNING_KEY_ENV}={generated}")
        click.echo(f"  then, in another terminal: payhooks replay BODY.json --url {url}")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("payhooks")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    server.log_startup()
    server.serve_forever()  # until Ctrl+C; it closes the socket on the way out


@click.command("demo")
def demo_command() -> None:
    """See payhooks work, with nothing to set up: a receiver on a free loopback port, payments
    registered, signed deliveries sent over HTTP (an amount mismatch, a redelivery and a
    forgery among them), customers returning, and the reconciliation printed.
    """
    from payhooks.receiver.demo.run import run_demo
    from payhooks.storage import StorageError

    try:
        result = run_demo(click.echo)
    except OSError as err:
        raise click.ClickException(f"The demo could not run: {err}.") from err
    except StorageError as err:
        raise click.ClickException(f"The demo could not run: {err.message}") from err
    if not result.ok:
        raise click.ClickException(
            "The demo did not go as expected: " + "; ".join(result.problems) + "."
        )
