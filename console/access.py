"""Who may see the console: the roles, and the merchant's ``authorize`` hook asked per request.

The hook is the merchant's own code (their login, their session). Whatever it does wrong
(raises, answers something that is not a role) is a refusal, never a page: a console that
opened when its guard failed would show every payment to anyone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TypeAlias
from zoneinfo import ZoneInfo

from flask import Request, current_app

from payhooks.console.export_files import ExportFolder
from payhooks.receiver.ledgers import LedgerPool
from payhooks.receiver.settings import ReceiverSettings
from payhooks.storage import Ledger

__all__ = [
    "ACCESS_KEY",
    "Authorize",
    "ConsoleAccess",
    "ConsoleGrant",
    "ConsoleRole",
    "check_authorize",
    "console_ledger",
    "current_access",
    "grant_for",
]

#: Where :meth:`~payhooks.console.Console.init_app` keeps the app's
#: :class:`ConsoleAccess`.
ACCESS_KEY = "payhooks.console"

logger = logging.getLogger("payhooks")


class ConsoleRole(StrEnum):
    """What a person may do in the console: both roles read every page; only
    :attr:`OPERATOR` acts (reprocess, send signals, downloads, exception reviews), and only
    an operator reads bodies unless the grant says otherwise (:class:`ConsoleGrant`)."""

    #: Reads every page (finance, support).
    VIEWER = "viewer"
    #: Reads every page, and acts.
    OPERATOR = "operator"


#: The longest ``who`` a grant may carry (the audit log's limit).
MAX_WHO_CHARS = 200


@dataclass(frozen=True, slots=True)
class ConsoleGrant:
    """What the merchant's hook may return instead of a bare role: the role, who the person
    is, as the audit log should name them (a name, an email), and whether they read bodies.

    ::

        def console_grant(request):
            user = session.get("user")
            return ConsoleGrant("operator", user["email"]) if user else None

    :param role: a :class:`ConsoleRole` or its value.
    :param who: one line of 1 to 200 characters.
    :param bodies: whether the pages show this person the bodies (a delivery's, a refused
        request's kept start) and let them download one; None gives the role's default: an
        operator reads them, a viewer does not. A body is a customer's payment: who may read
        it is the merchant's decision, and each read is audited.
    :raises ValueError: a role that is not one, a ``who`` that is empty, too long or holds a
        control character, or a ``bodies`` that is neither a bool nor None; raised inside the
        hook, it refuses the request like any hook error.
    """

    role: ConsoleRole
    who: str
    bodies: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", ConsoleRole(self.role))
        if self.bodies is not None and not isinstance(self.bodies, bool):
            raise ValueError(
                f"ConsoleGrant: bodies must be True, False or None; got {self.bodies!r}"
            )
        who = self.who
        if not isinstance(who, str) or not 1 <= len(who) <= MAX_WHO_CHARS or not who.isprintable():
            raise ValueError(
                f"ConsoleGrant: who must be one printable line of 1 to {MAX_WHO_CHARS} "
                f"characters; got {who!r}"
            )

    @property
    def shows_bodies(self) -> bool:
        """Whether this person reads bodies: ``bodies`` as given, else the role's default."""
        return self.role is ConsoleRole.OPERATOR if self.bodies is None else self.bodies

    @classmethod
    def unnamed(cls, role: ConsoleRole) -> ConsoleGrant:
        """The grant of a hook that returned a bare role: the audit log says ``unnamed
        operator`` (or ``unnamed viewer``), for it cannot know more."""
        return cls(role, f"unnamed {role.value}")


#: The merchant's hook: given the request, the role (or the grant) it gives, or None to refuse.
Authorize: TypeAlias = Callable[[Request], "ConsoleGrant | ConsoleRole | str | None"]


def check_authorize(authorize: object) -> Authorize:
    """:raises ValueError: naming ``authorize``, when it is missing or not callable."""
    if authorize is None or not callable(authorize):
        raise ValueError(
            "Console: authorize is required: a callable that takes the request and returns "
            f"'viewer', 'operator' or None; got {authorize!r}"
        )
    return authorize


def grant_for(authorize: Authorize, request: Request) -> ConsoleGrant | None:
    """The grant ``authorize`` gives for ``request`` (a bare role as an unnamed one); None for a
    refusal, for an answer that is neither, and for a hook that raised (logged, with its
    traceback)."""
    try:
        answer = authorize(request)
    except Exception:
        logger.exception("payhooks console: the authorize hook raised; the request is refused")
        return None
    if answer is None:
        return None
    if isinstance(answer, ConsoleGrant):
        return answer
    try:
        return ConsoleGrant.unnamed(ConsoleRole(answer))
    except (ValueError, TypeError):
        logger.error(
            "payhooks console: the authorize hook returned %r, not a role; refused", answer
        )
        return None


@dataclass(frozen=True, slots=True)
class ConsoleAccess:
    """What one app's console needs at request time: its hook, its prefix, its clock, the
    ledgers its pages read (the receiver's, or the console's own), the settings it checks
    signatures with when they are its own rather than the app's, and its exports' folder."""

    authorize: Authorize
    #: Without a trailing slash (``/console``).
    url_prefix: str
    clock: Callable[[], datetime]
    ledgers: LedgerPool
    #: Where the finance page's exports are written (``Console(exports=...)``).
    exports: ExportFolder
    #: ``Console(settings=...)``: the scheme and keys a delivery's signature evidence is checked
    #: with; None reads the app's config, as it is at each page.
    settings: ReceiverSettings | None = None
    #: ``Console(time_limit_ms=...)``: how long one page's reads may take together.
    time_limit_ms: int = 2000
    #: ``PAYHOOKS_TIMEZONE`` of the console's settings: where finance's days start.
    timezone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))

    def covers(self, path: str) -> bool:
        """Whether ``path`` is under the console's prefix."""
        return path == self.url_prefix or path.startswith(self.url_prefix + "/")


def current_access() -> ConsoleAccess:
    """The current app's :class:`ConsoleAccess`."""
    access: ConsoleAccess = current_app.extensions[ACCESS_KEY]
    return access


def console_ledger() -> Ledger:
    """The calling thread's ledger that the current app's console pages read, its finance
    rollup kept in the merchant's zone (``PAYHOOKS_TIMEZONE``)."""
    return current_access().ledgers.get()
