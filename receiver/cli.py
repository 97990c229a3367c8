"""The ``payhooks`` command group: ``payhooks ...`` on its own, ``flask payhooks ...`` in an app.

:class:`receiver.PayHooks` adds this group to the app's CLI, where the ledger commands default
to the app's ``PAYHOOKS_DATABASE`` (see :mod:`receiver.cli_common` for where every setting
comes from). The commands live in small modules by subject; this one only gathers them.

Exit codes: 0 success, 1 a failure the command reports, 2 bad usage.
"""

from __future__ import annotations

import click

from receiver.cli_ledger import expect, reconcile, reprocess
from receiver.cli_replay import replay
from receiver.cli_server import demo, serve
from receiver.cli_signing import keygen, sign, verify

__all__ = ["main", "payhooks"]


@click.group("payhooks", context_settings={"help_option_names": ["-h", "--help"]})
def payhooks() -> None:
    """Receive, replay, verify and reconcile the payment service's webhook notifications.

    Exit codes: 0 success, 1 a failure the command reports, 2 bad usage.
    """


for _command in (serve, demo, replay, sign, verify, keygen, expect, reconcile, reprocess):
    payhooks.add_command(_command)


def main() -> None:
    """The ``payhooks`` console script."""
    payhooks(prog_name="payhooks")
