"""The console: pages on the ledger for a merchant's developers, support and finance, and an
operator's few actions (reprocess, send owed signals, download, review an exception).

Never open by default: :class:`~payhooks.receiver.PayHooks` does not mount it. The merchant
mounts :class:`Console` under a prefix of their choice with an ``authorize`` hook that their own
login decides the :class:`ConsoleRole` (or a :class:`ConsoleGrant`, naming the person for the
audit log) with; no role, no page.

Rule: server-rendered pages with no script, every value escaped by Jinja, nothing from another
host, and the security headers on every answer under the prefix. The pages read the app's
ledger (the receiver's, or one named to the console) through
:func:`~payhooks.console.access.console_ledger`; only an operator's ``POST``,
CSRF-checked, writes, and always its entry in the append-only audit log.
"""

from __future__ import annotations

from payhooks.console.access import ConsoleGrant, ConsoleRole
from payhooks.console.mount import Console

__all__ = ["Console", "ConsoleGrant", "ConsoleRole"]
