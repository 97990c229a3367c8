"""``payhooks console``: the console on its own, on loopback, for one person, with a login link.

For finance on a laptop, or anyone reading a ledger through a read-only role: no receiver is
mounted (nothing can be posted, no signing key is needed), the server listens on 127.0.0.1
only, and the one way in is a link carrying a one-time token, printed when it starts
(:mod:`.login_token`), exchanged for a session cookie that only this run's pages are sent,
under a random path prefix of the run's own (:mod:`.app`).
"""

from __future__ import annotations

from payhooks.console.standalone.app import ConsoleRun, create_console_app
from payhooks.console.standalone.command import console_command
from payhooks.console.standalone.login_token import LoginToken

__all__ = ["ConsoleRun", "LoginToken", "console_command", "create_console_app"]
