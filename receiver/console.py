"""The ``payhooks`` console script: the in-app commands and the demo's, in one group.

It sits above everything it assembles: the in-app group (:mod:`payhooks.receiver.cli`) and the
demo (:mod:`payhooks.receiver.demo`, which mounts the extension). ``flask payhooks`` in a
merchant's app has only the in-app commands.

Exit codes: 0 success, 1 a failure the command reports, 2 bad usage.
"""

from __future__ import annotations

import click
from payhooks.receiver.cli import IN_APP_COMMANDS
from payhooks.receiver.demo import demo_command, serve_command

__all__ = ["main", "payhooks"]


@click.group("payhooks", context_settings={"help_option_names": ["-h", "--help"]})
def payhooks() -> None:
    """Receive, replay, verify and reconcile the payment service's webhook notifications.

    Exit codes: 0 success, 1 a failure the command reports, 2 bad usage.
    """


for _command in (serve_command, demo_command, *IN_APP_COMMANDS):
    payhooks.add_command(_command)


def main() -> None:
    """The ``payhooks`` console script, and ``python -m payhooks.receiver``."""
    payhooks(prog_name="payhooks")
