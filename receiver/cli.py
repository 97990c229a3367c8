"""The ``payhooks`` command group: ``payhooks ...`` on its own, ``flask payhooks ...`` in an app.

:class:`receiver.PayHooks` adds this group to the app's CLI. The commands are added here.
"""

from __future__ import annotations

import click

__all__ = ["main", "payhooks"]


@click.group("payhooks")
def payhooks() -> None:
    """Receive, replay, verify and reconcile the payment service's webhook notifications."""


def main() -> None:
    """The ``payhooks`` console script."""
    payhooks()
