"""The apps ``bench.console_load`` serves under gunicorn, chosen by ``BENCH_PART``.

``receiver``: the receiver with the console mounted beside it, as a merchant mounts both in one
app (the "shared" layout); ``console``: the console alone on the same ledger, as
docs/deployment.md recommends serving it in processes of its own. The console's ``authorize``
hook grants a viewer named by the ``X-Bench-Viewer`` header (a bench has no login), and its
clock is the bench ledger's end (:data:`bench.console_ledger.END`), so its "last 7 days" are
the ledger's.
"""

from __future__ import annotations

import os

from flask import Flask, Request

from bench.console_ledger import END
from payhooks.console import Console, ConsoleGrant, ConsoleRole
from payhooks.receiver import PayHooks
from payhooks.receiver.config import config_from_env


def _viewer(request: Request) -> ConsoleGrant | None:
    who = request.headers.get("X-Bench-Viewer")
    return ConsoleGrant(ConsoleRole.VIEWER, who) if who else None


def create_app() -> Flask:
    """The app ``BENCH_PART`` names, on ``PAYHOOKS_DATABASE``."""
    part = os.environ["BENCH_PART"]
    app = Flask(f"bench_console_load_{part}", instance_path=os.environ["BENCH_FOLDER"])
    app.config.update(config_from_env(os.environ), SECRET_KEY="bench")
    if part == "receiver":
        PayHooks(app)
        Console(app, authorize=_viewer, url_prefix="/console", clock=lambda: END)
    else:
        Console(
            app,
            authorize=_viewer,
            url_prefix="/console",
            clock=lambda: END,
            database=os.environ["PAYHOOKS_DATABASE"],
        )
    return app
