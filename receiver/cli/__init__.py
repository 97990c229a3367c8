"""The in-app commands: ``flask payhooks ...`` (and, with the demo's, the ``payhooks`` script).

Rule: nothing here imports :mod:`payhooks.receiver.demo` or the extension: the extension mounts
this group, and the console script (:mod:`payhooks.receiver.script`) sits above both.
"""

from __future__ import annotations

from payhooks.receiver.cli.group import IN_APP_COMMANDS, EscapingGroup, payhooks_group

__all__ = ["IN_APP_COMMANDS", "EscapingGroup", "payhooks_group"]
