"""The in-app command group: ``flask payhooks ...`` in a merchant's app.

:class:`payhooks.receiver.PayHooks` adds this group to the app's CLI, where the ledger commands
default to the app's ``PAYHOOKS_DATABASE`` (see :mod:`payhooks.receiver.cli.common` for where
every setting comes from). The commands live in small modules by subject; this one only gathers
them. The demo's ``serve`` and ``demo`` are not here: they run the demo app, not the merchant's,
so only the console script (:mod:`payhooks.receiver.script`) offers them.

Exit codes: 0 success, 1 a failure the command reports, 2 bad usage.
"""

from __future__ import annotations

import click

from payhooks.receiver.cli.check import check, signals
from payhooks.receiver.cli.common import terminal_text
from payhooks.receiver.cli.database import (
    backup,
    copy_ledger,
    migrate_command,
    prune,
    restore_pruned,
    rollup,
)
from payhooks.receiver.cli.deliveries import deliveries
from payhooks.receiver.cli.ledger import expect
from payhooks.receiver.cli.replay import replay, reprocess
from payhooks.receiver.cli.reports import reconcile
from payhooks.receiver.cli.show import show
from payhooks.receiver.cli.signing import keygen, sign, verify_command
from payhooks.receiver.cli.sync import sync

__all__ = ["IN_APP_COMMANDS", "EscapingGroup", "payhooks_group"]

#: Every command of the in-app group, in the order ``--help`` lists them; the console script
#: offers these and the demo's.
IN_APP_COMMANDS: tuple[click.Command, ...] = (
    replay,
    sign,
    verify_command,
    keygen,
    expect,
    reconcile,
    rollup,
    show,
    sync,
    reprocess,
    signals,
    deliveries,
    check,
    migrate_command,
    copy_ledger,
    prune,
    restore_pruned,
    backup,
)


class EscapingGroup(click.Group):
    """A group whose commands' error messages reach the terminal with control characters
    escaped (:func:`~payhooks.receiver.cli.common.terminal_text`): they may quote text from
    outside, such as the service's error message or a file's name."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.ClickException as err:
            err.message = terminal_text(err.message)  # type: ignore[misc]
            raise


@click.group(
    "payhooks", cls=EscapingGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
def payhooks_group() -> None:
    """Receive, replay, verify and reconcile the payment service's webhook notifications.

    Exit codes: 0 success, 1 a failure the command reports, 2 bad usage.
    """


for _command in IN_APP_COMMANDS:
    payhooks_group.add_command(_command)
