"""The demo: a ready-made app with the receiver mounted, ``payhooks serve`` and ``payhooks demo``.

It sits above the extension (its app mounts :class:`payhooks.receiver.PayHooks`); nothing below
imports it. Serve it with ``gunicorn "payhooks.receiver.demo:create_app()"``.
"""

from __future__ import annotations

from payhooks.receiver.demo.app import DEMO_SIGNING_KEY, create_app
from payhooks.receiver.demo.commands import demo_command, serve_command
from payhooks.receiver.demo.run import DemoResult, run_demo

__all__ = [
    "DEMO_SIGNING_KEY",
    "DemoResult",
    "create_app",
    "demo_command",
    "run_demo",
    "serve_command",
]
