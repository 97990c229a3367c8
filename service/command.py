"""``payhooks sandbox``: run the service's stand-in in the foreground until interrupted.

The sandbox needs httpx, the ``service`` extra, which the console script does not: this
module imports only click and payhooks.verify, and the sandbox itself once the command runs,
so ``payhooks`` works without the extra and ``payhooks sandbox`` says how to get it.

It prints what a developer needs to point a client and a receiver at it: the base URL, an
access token with every scope, the merchant account, and the notification scheme with the key
the receiver must be configured with. Exit codes: 0 stopped, 1 a failure it reports (the port
is taken), 2 bad usage. Its errors are one sentence each, worded as ``payhooks serve``'s.

``payhooks sandbox resend`` is the sandbox's own: it asks a running sandbox to resend each
notification the ledger's last ``payhooks sync`` found missed. It lives here, not in ``sync``,
because the production sync never talks to a sandbox (the interface has no resend).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import click

from payhooks.verify import DEFAULT_SCHEME, SCHEMES

__all__ = ["sandbox_command"]


class _BadUsage(click.ClickException):
    """Exit 2, as a usage error, but one sentence with no usage text (as ``payhooks serve``)."""

    exit_code = 2


@click.group("sandbox", invoke_without_command=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8400, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--notify-url",
    "notification_url",
    default=None,
    help="The merchant's notification URL for transactions (e.g. "
    "http://127.0.0.1:5000/payhooks/notifications).",
)
@click.option(
    "--scheme",
    type=click.Choice(sorted(SCHEMES)),
    default=DEFAULT_SCHEME,
    show_default=True,
    help="Signature scheme of the notifications.",
)
@click.option(
    "--signing-key",
    envvar="PAYHOOKS_SANDBOX_SIGNING_KEY",
    default="",
    help="Key to sign notifications with (env PAYHOOKS_SANDBOX_SIGNING_KEY); generated if "
    "not given.",
)
@click.option(
    "--merchant",
    "merchants",
    multiple=True,
    default=("sandbox-merchant",),
    show_default=True,
    help="A merchant account id; repeat for several.",
)
@click.option("--drop-notifications", is_flag=True, help="Log notifications but never send them.")
@click.option(
    "--notify-attempts", default=5, show_default=True, type=click.IntRange(1), help="Tries each."
)
@click.option(
    "--control-token",
    envvar="PAYHOOKS_SANDBOX_CONTROL_TOKEN",
    default=None,
    help="Bearer token the control API (/sandbox/...) requires (env "
    "PAYHOOKS_SANDBOX_CONTROL_TOKEN); needed to bind a --host other than loopback.",
)
@click.pass_context
def sandbox_command(
    ctx: click.Context,
    host: str,
    port: int,
    notification_url: str | None,
    scheme: str,
    signing_key: str,
    merchants: tuple[str, ...],
    drop_notifications: bool,
    notify_attempts: int,
    control_token: str | None,
) -> None:
    """Run a local sandbox of the payment service (API, hosted page, signed notifications).

    Its one command, resend, asks a running sandbox to resend what payhooks sync found missed.
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        from payhooks.service.sandbox import SandboxServer, SandboxSettings
    except ImportError as err:
        if err.name != "httpx":
            raise
        raise click.ClickException(
            "payhooks sandbox needs the service extra: pip install 'payhooks[service]'."
        ) from err
    try:
        settings = SandboxSettings(
            merchant_account_ids=merchants,
            scheme=scheme,
            signing_key=signing_key,
            notification_url=notification_url,
            drop_notifications=drop_notifications,
            notify_attempts=notify_attempts,
            control_token=control_token,
        )
    except ValueError as err:
        raise _BadUsage(f"The configuration cannot be used: {str(err).rstrip('.')}.") from err
    try:
        server = SandboxServer.start(settings, host=host, port=port, background=False)
    except ValueError as err:  # refused before binding: a non-loopback host with no token
        raise _BadUsage(
            f"--host {host} is not a loopback address: give --control-token (or "
            "PAYHOOKS_SANDBOX_CONTROL_TOKEN), or bind 127.0.0.1, as anyone who reaches it "
            "could settle payments through the control API."
        ) from err
    except OSError as err:
        raise click.ClickException(
            f"Cannot listen on {host} port {port}: {err.strerror or err}."
        ) from err
    click.echo(f"payhooks sandbox on {server.url}")
    click.echo(f"  merchant account(s): {', '.join(settings.merchant_account_ids)}")
    click.echo(f"  notifications: {settings.notification_url or 'not sent (no --notify-url)'}")
    click.echo(f"  signature scheme: {settings.scheme}")
    click.echo(
        "  control API: "
        + ("needs the control token" if control_token else "open (loopback only, no token)")
    )
    click.echo("  test cards: 4242424242424242 pays, 4000000000000002 fails; Ctrl-C stops")
    click.echo("Run these where your client runs (the token has every scope, for one hour):")
    click.echo(f"  export PAYHOOKS_SANDBOX_URL={server.url}")
    click.echo(f"  export PAYHOOKS_SANDBOX_TOKEN={server.issue_token()}")
    if not signing_key:
        kind = SCHEMES[scheme].key_kind
        key_config = "PAYHOOKS_SECRETS" if kind == "secret" else "PAYHOOKS_PUBLIC_KEYS"
        click.echo("and this where your receiver runs (the key was generated for this run):")
        click.echo(f"  export {key_config}={settings.verifying_key}")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it is meant to stop
        server.serve_forever()


@sandbox_command.command("resend")
@click.option(
    "--sandbox-url",
    envvar="PAYHOOKS_SERVICE_URL",
    metavar="URL",
    help="The running sandbox (default: PAYHOOKS_SERVICE_URL, as payhooks sync reads it).",
)
@click.option(
    "--control-token",
    envvar="PAYHOOKS_SANDBOX_CONTROL_TOKEN",
    metavar="TOKEN",
    help="The sandbox's control token, if it was started with one (default: "
    "PAYHOOKS_SANDBOX_CONTROL_TOKEN).",
)
@click.option(
    "--database",
    envvar="PAYHOOKS_DATABASE",
    metavar="PATH_OR_URL",
    help="The ledger payhooks sync wrote: a SQLite file or a postgresql:// URL. Default: "
    "$PAYHOOKS_DATABASE, else ./payhooks.db.",
)
def resend_command(
    sandbox_url: str | None, control_token: str | None, database: str | None
) -> None:
    """Ask the sandbox to resend each notification payhooks sync found missed."""
    if not sandbox_url:
        raise _BadUsage("payhooks sandbox resend needs --sandbox-url or PAYHOOKS_SERVICE_URL.")
    target: str = database or "payhooks.db"
    try:
        from payhooks.service.errors import ServiceError
        from payhooks.service.sandbox import SandboxResender, resend_missed
        from payhooks.storage import Ledger, NotALedgerError, StorageError, is_postgres_url
    except ImportError as err:
        if err.name != "httpx":
            raise
        raise click.ClickException(
            "payhooks sandbox needs the service extra: pip install 'payhooks[service]'."
        ) from err
    if not is_postgres_url(target) and not os.path.exists(target):
        raise _BadUsage(
            f"There is no ledger at {target}: pass --database or set PAYHOOKS_DATABASE."
        )
    try:
        with (
            Ledger(
                target if is_postgres_url(target) else Path(target), create=False, read_only=True
            ) as ledger,
            SandboxResender(sandbox_url, control_token=control_token) as resender,
        ):
            resent = resend_missed(ledger, resender)
    except NotALedgerError as err:
        raise _BadUsage(err.message) from err
    except (StorageError, ServiceError) as err:
        raise click.ClickException(err.message) from err
    click.echo(f"Asked the sandbox to resend {len(resent)} notification(s).")
