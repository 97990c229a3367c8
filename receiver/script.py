"""The ``payhooks`` console script: the in-app commands, the demo's and the sandbox's, in one group.

It sits above everything it assembles: the in-app group (:mod:`payhooks.receiver.cli`), the
demo (:mod:`payhooks.receiver.demo`, which mounts the extension), the standalone console
(:mod:`payhooks.console.standalone`) and the service's sandbox
(:mod:`payhooks.service.sandbox`). ``flask payhooks`` in a
merchant's app has only the in-app commands.

Exit codes: 0 success, 1 a failure the command reports, 2 bad usage.
"""

from __future__ import annotations

import click

from payhooks.console.standalone import console_command
from payhooks.receiver.cli import IN_APP_COMMANDS, EscapingGroup
from payhooks.receiver.demo import demo_command, serve_command
from payhooks.service import sandbox_command

__all__ = ["main", "payhooks"]


@click.group(
    "payhooks", cls=EscapingGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(package_name="payhooks", message="%(prog)s %(version)s")
def payhooks() -> None:
    """Receive, replay, verify and reconcile the payment service's webhook notifications.

    Exit codes: 0 success, 1 a failure the command reports, 2 bad usage.
    """


for _command in (serve_command, demo_command, console_command, sandbox_command, *IN_APP_COMMANDS):
    payhooks.add_command(_command)


def main() -> None:
    """The ``payhooks`` console script, and ``python -m payhooks.receiver``."""
    payhooks(prog_name="payhooks")
