"""The ``payhooks`` console script: the in-app commands, the demo's and the sandbox's, in one group.

It sits above what it assembles from below: the in-app group (:mod:`payhooks.receiver.cli`),
the demo (:mod:`payhooks.receiver.demo`, which mounts the extension) and the service's sandbox
(:mod:`payhooks.service.sandbox`). The commands of packages above the receiver (``payhooks
console``, from :mod:`payhooks.console.standalone`) are found by name, through the entry-point
group :data:`COMMANDS_GROUP`, as ``flask`` finds ``flask.commands``: importing them here would
point an import up. ``flask payhooks`` in a merchant's app has only the in-app commands.

Exit codes: 0 success, 1 a failure the command reports, 2 bad usage.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Final

import click

from payhooks.receiver.cli import IN_APP_COMMANDS, EscapingGroup
from payhooks.receiver.demo import demo_command, serve_command
from payhooks.service import sandbox_command

__all__ = ["COMMANDS_GROUP", "main", "payhooks"]

#: The entry-point group (pyproject.toml's ``[project.entry-points."payhooks.commands"]``) of
#: the commands that live above the receiver: each entry is a ``click`` command.
COMMANDS_GROUP: Final = "payhooks.commands"


@click.group(
    "payhooks", cls=EscapingGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(package_name="payhooks", message="%(prog)s %(version)s")
def payhooks() -> None:
    """Receive, replay, verify and reconcile the payment service's webhook notifications.

    Exit codes: 0 success, 1 a failure the command reports, 2 bad usage.
    """


for _command in (serve_command, demo_command, sandbox_command, *IN_APP_COMMANDS):
    payhooks.add_command(_command)

for _entry in entry_points(group=COMMANDS_GROUP):
    payhooks.add_command(_entry.load(), _entry.name)


def main() -> None:
    """The ``payhooks`` console script, and ``python -m payhooks.receiver``."""
    payhooks(prog_name="payhooks")
