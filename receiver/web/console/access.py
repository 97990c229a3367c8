"""Who may see the console: the roles, and the merchant's ``authorize`` hook asked per request.

The hook is the merchant's own code (their login, their session). Whatever it does wrong
(raises, answers something that is not a role) is a refusal, never a page: a console that
opened when its guard failed would show every payment to anyone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TypeAlias

from flask import Request, current_app

from payhooks.receiver.ledgers import LedgerPool
from payhooks.storage import Ledger

__all__ = [
    "ACCESS_KEY",
    "Authorize",
    "ConsoleAccess",
    "ConsoleRole",
    "check_authorize",
    "console_ledger",
    "current_access",
    "role_for",
]

#: Where :meth:`~payhooks.receiver.web.console.Console.init_app` keeps the app's
#: :class:`ConsoleAccess`.
ACCESS_KEY = "payhooks.console"

logger = logging.getLogger("payhooks")


class ConsoleRole(StrEnum):
    """What a person may do in the console. This release only reads, so both roles see every
    page; actions (reprocess, resend) will need :attr:`OPERATOR`."""

    #: Reads every page (finance, support).
    VIEWER = "viewer"
    #: Reads every page, and will be the role that acts.
    OPERATOR = "operator"


#: The merchant's hook: given the request, the role it grants, or None to refuse.
Authorize: TypeAlias = Callable[[Request], "ConsoleRole | str | None"]


def check_authorize(authorize: object) -> Authorize:
    """:raises ValueError: naming ``authorize``, when it is missing or not callable."""
    if authorize is None or not callable(authorize):
        raise ValueError(
            "Console: authorize is required: a callable that takes the request and returns "
            f"'viewer', 'operator' or None; got {authorize!r}"
        )
    return authorize


def role_for(authorize: Authorize, request: Request) -> ConsoleRole | None:
    """The role ``authorize`` grants for ``request``; None for a refusal, for an answer that is
    not a role, and for a hook that raised (logged, with its traceback)."""
    try:
        answer = authorize(request)
    except Exception:
        logger.exception("payhooks console: the authorize hook raised; the request is refused")
        return None
    if answer is None:
        return None
    try:
        return ConsoleRole(answer)
    except (ValueError, TypeError):
        logger.error(
            "payhooks console: the authorize hook returned %r, not a role; refused", answer
        )
        return None


@dataclass(frozen=True, slots=True)
class ConsoleAccess:
    """What one app's console needs at request time: its hook, its prefix, its clock, and the
    ledgers its pages read (the receiver's, or the console's own)."""

    authorize: Authorize
    #: Without a trailing slash (``/console``).
    url_prefix: str
    clock: Callable[[], datetime]
    ledgers: LedgerPool

    def covers(self, path: str) -> bool:
        """Whether ``path`` is under the console's prefix."""
        return path == self.url_prefix or path.startswith(self.url_prefix + "/")


def current_access() -> ConsoleAccess:
    """The current app's :class:`ConsoleAccess`."""
    access: ConsoleAccess = current_app.extensions[ACCESS_KEY]
    return access


def console_ledger() -> Ledger:
    """The calling thread's ledger that the current app's console pages read."""
    return current_access().ledgers.get()
