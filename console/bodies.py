"""Bodies are evidence: who reads one on a page, and the audit entry each reading leaves.

A body (a delivery's, the kept start of a refused request's) is a customer's payment, read on a
page as much as in a download. A page shows one only when the person's grant reads bodies
(:attr:`~.access.ConsoleGrant.shows_bodies`: an operator by default, a viewer when the
merchant's hook says so), and only on a page they opened themselves: a link on another site
(which ``SameSite=Lax`` cookies follow) would otherwise write entries in their name, so such a
page holds the body back and offers a link that opens it from the console. Everything that is
not the body (its size and SHA-256, the status, the outcome, the signature evidence, the
headers) shows either way.

Each showing is an audit entry, ``view_body`` on ``delivery ID`` (or ``refused request ID``),
at most one per person, record and hour of the console's clock, written before the page is
sent. A ledger that cannot take it (opened read-only: a person who can read the file can read
the body without payhooks) gets it as a warning on the ``payhooks`` logger instead, and the
page still shows.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Final

from flask import request

from payhooks.console.access import ConsoleGrant, console_ledger, current_access
from payhooks.console.acting import current_grant
from payhooks.console.csrf import from_another_site
from payhooks.receiver.visible_text import visible
from payhooks.storage import StorageError

__all__ = [
    "HIDDEN_BY_GRANT",
    "HIDDEN_CROSS_SITE",
    "VIEW_ACTION",
    "BodyHidden",
    "body_hidden",
    "sha256_of",
]

#: The audit log's action for a body shown on a page.
VIEW_ACTION: Final = "view_body"

logger = logging.getLogger("payhooks")


@dataclass(frozen=True, slots=True)
class BodyHidden:
    """Why a page holds a body back: a stable code (its ``data-body-hidden``) and one
    sentence; ``reopen`` when opening the page from the console would show it."""

    code: str
    message: str
    reopen: bool = False


#: The grant does not read bodies (a viewer's, by default).
HIDDEN_BY_GRANT: Final = BodyHidden(
    "grant",
    "The body is hidden: your role does not show bodies; ask an operator, or see "
    "docs/console.md#bodies.",
)
#: The page was opened from another site.
HIDDEN_CROSS_SITE: Final = BodyHidden(
    "cross_site",
    "The body is not shown on a page that another site opened, for reading it is recorded in "
    "your name; open it from the console itself.",
    reopen=True,
)


def sha256_of(body: bytes) -> str:
    """The body's SHA-256, in hex: what identifies the bytes without showing them."""
    return hashlib.sha256(body).hexdigest()


def body_hidden(target: str) -> BodyHidden | None:
    """Whether this request's page may show the body of ``target`` (``delivery 12``): None
    when it may, after its audit entry is written (or logged); else why not.

    A ``HEAD`` request shows it without an entry: its answer carries no page.
    """
    grant = current_grant()
    if not grant.shows_bodies:
        return HIDDEN_BY_GRANT
    if from_another_site():
        logger.warning(
            "payhooks console: held back the body of %s on a page that another site opened "
            "(Sec-Fetch-Site=%s) in the browser of %r; not audited in their name",
            target,
            visible(request.headers.get("Sec-Fetch-Site", "-"))[:40],
            grant.who,
        )
        return HIDDEN_CROSS_SITE
    if request.method != "HEAD":
        _record_view(grant, target)
    return None


def _record_view(grant: ConsoleGrant, target: str) -> None:
    """The view's entry, once per person, target and hour; logged when the ledger cannot
    take it (a read-only ledger), for the page must not fail for want of it."""
    try:
        console_ledger().console.audit_once_an_hour(
            who=grant.who,
            role=grant.role.value,
            action=VIEW_ACTION,
            result="shown",
            target=target,
            at=current_access().clock(),
        )
    except StorageError as err:
        logger.warning(
            "payhooks console: the audit log cannot take this entry (%s), so it is logged: "
            "who=%r role=%s action=%s target=%r result='shown'",
            err.message,
            grant.who,
            grant.role.value,
            VIEW_ACTION,
            target,
        )
