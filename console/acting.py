"""What every console action does first and last: who may act, the CSRF check, the note, the
audit entry, and the one-line result shown after the redirect.

An action is a POST by an operator (an export: by anyone the hook lets in) with this session's
token (:mod:`.csrf`). A refused one (a viewer, a forged or stale form, an app without
``SECRET_KEY``, a bad note) changes nothing and is counted, not written as an entry: one more
in the row of its person, action, code and minute (``Ledger.console.count_refusal``), so a
person sending refused requests in a loop adds a handful of rows, not one per request. When the
ledger cannot take the count (a viewer's read-only ledger), it is logged instead and the
refusal's own page follows. A target is bounded (:func:`recorded_target`): it often comes from
the URL.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from flask import current_app, g, redirect, request, session
from werkzeug.wrappers import Response as BaseResponse

from payhooks.console.access import ConsoleGrant, ConsoleRole, console_ledger
from payhooks.console.csrf import (
    ActionRefused,
    check_action_request,
    refuse_cross_site,
)
from payhooks.receiver.state import STATE_KEY
from payhooks.receiver.visible_text import visible
from payhooks.storage import Ledger, StorageError

__all__ = [
    "MAX_NOTE_CHARS",
    "MAX_REFUSED_TARGET_CHARS",
    "MAX_TARGET_CHARS",
    "RESULT_KEY",
    "RESULT_TONES",
    "Acting",
    "begin_action",
    "can_act",
    "can_read_bodies",
    "can_redrive",
    "current_grant",
    "done",
    "merchant_app",
    "recorded_target",
    "take_result",
]

#: The longest note an action takes (the audit log's limit).
MAX_NOTE_CHARS: Final = 1000
#: The longest target an entry records (the audit log's limit).
MAX_TARGET_CHARS: Final = 400
#: The longest target a refusal's count keeps (the first refused request's).
MAX_REFUSED_TARGET_CHARS: Final = 100
#: Where the session keeps an action's result line until the next console page shows it. Not
#: Flask's ``flash``: reading flashed messages takes the merchant's own too.
RESULT_KEY: Final = "payhooks_console_result"

logger = logging.getLogger("payhooks")


def current_grant() -> ConsoleGrant:
    """Who the merchant's hook let in for this request."""
    grant: ConsoleGrant = g.payhooks_console_grant
    return grant


def can_act() -> bool:
    """Whether this request's person is an operator (the pages show the forms to them only)."""
    grant: ConsoleGrant | None = g.get("payhooks_console_grant")
    return grant is not None and grant.role is ConsoleRole.OPERATOR


def can_read_bodies() -> bool:
    """Whether this request's person reads bodies (the pages offer downloads to them only)."""
    grant: ConsoleGrant | None = g.get("payhooks_console_grant")
    return grant is not None and grant.shows_bodies


def can_redrive() -> bool:
    """Whether this console runs in the merchant's app, beside the receiver: reprocessing
    needs its parsing settings and sending signals its receivers. A console on a ledger of its
    own (``payhooks console``, ``Console(database=...)``) reads, reviews and downloads only."""
    return STATE_KEY in current_app.extensions


def merchant_app() -> object:
    """The app whose signal receivers an action's signals go to."""
    app: object = current_app._get_current_object()  # type: ignore[attr-defined]
    return app


def recorded_target(target: str | None, longest: int = MAX_TARGET_CHARS) -> str | None:
    """``target`` as the audit log keeps it: as it is when the log can take it; else (a URL's
    kilobytes, a NUL) escaped as the pages show it and cut to ``longest`` characters (the
    log's limit), ending in ``…``, so a forged request cannot write its own text at length,
    nor fail the entry's write."""
    if target is None or (1 <= len(target) <= longest and "\x00" not in target):
        return target or None
    shown = visible(target)
    return shown if len(shown) <= longest else shown[: longest - 1] + "…"


class Acting:
    """One action under way: who, on what, with which note; :meth:`record` writes its entry."""

    def __init__(self, grant: ConsoleGrant, action: str, target: str | None, note: str | None):
        self.grant, self.action, self.note = grant, action, note
        self.target = recorded_target(target)

    @property
    def ledger(self) -> Ledger:
        return console_ledger()

    def record(
        self, result: str, detail: Mapping[str, Any] | None = None, *, action: str | None = None
    ) -> None:
        """Append the audit entry (inside the caller's transaction when one is open)."""
        self.ledger.console.audit(
            who=self.grant.who,
            role=self.grant.role.value,
            action=action or self.action,
            target=self.target,
            note=self.note,
            detail=detail,
            result=result[:MAX_NOTE_CHARS],
        )

    def record_or_log(self, result: str, detail: Mapping[str, Any] | None = None) -> None:
        """:meth:`record`, or, when the ledger cannot take the entry (a viewer's read-only
        ledger, a database gone), the same entry logged as a warning: what follows (a
        refusal's page, an export) must not turn into a 503 for want of its entry."""
        try:
            self.record(result, detail)
        except StorageError as err:
            logger.warning(
                "payhooks console: the audit log cannot take this entry (%s), so it is logged: "
                "who=%r role=%s action=%s target=%r result=%r detail=%r",
                err.message,
                self.grant.who,
                self.grant.role.value,
                self.action,
                self.target,
                result,
                dict(detail or {}),
            )


def _note() -> str | None:
    text = request.form.get("note", "").strip()
    if not text:
        return None
    if len(text) > MAX_NOTE_CHARS or not text.replace("\n", " ").replace("\r", " ").isprintable():
        raise ActionRefused(
            400,
            "console_bad_form",
            f"The note must be at most {MAX_NOTE_CHARS} characters of plain text.",
        )
    return text


def _log_cross_site(grant: ConsoleGrant, action: str) -> None:
    """A request another site sent through a person's browser: a warning line for the
    operator, with what the browser said, never an audit entry in that person's name (any site
    could otherwise fill the log, or write what it likes there, as them)."""
    logger.warning(
        "payhooks console: refused a %s request that another site sent (Sec-Fetch-Site=%s, "
        "Origin=%s) through the browser of %r; not audited in their name",
        action,
        visible(request.headers.get("Sec-Fetch-Site", "-"))[:40],
        visible(request.headers.get("Origin", "-"))[:200],
        grant.who,
    )


def _count_refusal(grant: ConsoleGrant, action: str, target: str | None, code: str) -> None:
    """Count a refused action in its minute's row; when the ledger cannot take the count (a
    viewer's read-only ledger, a database gone), a warning line instead: the refusal's page
    must not turn into a 503 for want of its count."""
    kept = recorded_target(target, MAX_REFUSED_TARGET_CHARS)
    try:
        console_ledger().console.count_refusal(
            who=grant.who, role=grant.role.value, action=action, code=code, target=kept
        )
    except StorageError as err:
        logger.warning(
            "payhooks console: the audit log cannot count this refusal (%s), so it is logged: "
            "who=%r role=%s action=%s target=%r result=%r",
            err.message,
            grant.who,
            grant.role.value,
            action,
            kept,
            f"refused: {code}",
        )


def begin_action(
    action: str,
    target: str | None,
    *,
    redrives: bool = False,
    any_role: bool = False,
    reads_body: bool = False,
) -> Acting:
    """Let this action start, or refuse it (and count the refusal: see the module).

    :param redrives: the action reprocesses or sends signals, which only the merchant's app
        can (:func:`can_redrive`).
    :param reads_body: the action hands out a body (a download), which only a grant that
        reads bodies may (:attr:`~.access.ConsoleGrant.shows_bodies`).
    :param any_role: a viewer may take it too (an export: both roles read every row anyway).
        It is still a ``POST`` checked for another site's request and for the session's
        token, so no other site can take it in a person's name.
    :raises ActionRefused: 403 ``console_forbidden_action`` for a viewer (unless
        ``any_role``), or for a body to a grant that does not read bodies; what
        :func:`~.csrf.check_action_request` raises; 400 ``console_bad_form`` for a bad note;
        409 ``console_needs_receiver`` for a re-drive in a console without the receiver.
    """
    grant = current_grant()
    try:
        refuse_cross_site()
        if grant.role is not ConsoleRole.OPERATOR and not any_role:
            raise ActionRefused(
                403,
                "console_forbidden_action",
                "Only an operator may act in the console; a viewer reads every page.",
            )
        if reads_body and not grant.shows_bodies:
            raise ActionRefused(
                403,
                "console_forbidden_action",
                "Your role does not show bodies, so it cannot download one.",
            )
        check_action_request()
        if redrives and not can_redrive():
            raise ActionRefused(
                409,
                "console_needs_receiver",
                "Reprocessing and sending signals run in the merchant's app, beside the "
                "receiver; this console reads a ledger of its own.",
            )
        note = _note()
    except ActionRefused as refused:
        if refused.cross_site:
            _log_cross_site(grant, action)
        else:
            _count_refusal(grant, action, target, refused.code)
        raise
    return Acting(grant, action, target, note)


#: How a result line is shown: ``succeeded`` (green) only when something ran and returned;
#: ``neutral`` when there was nothing to do; ``problem`` when something ran and failed.
RESULT_TONES: Final = ("succeeded", "neutral", "problem")


def done(message: str, location: str, tone: str = "succeeded") -> BaseResponse:
    """The answer to a finished action: its one-line result for the next page, in its tone
    (:data:`RESULT_TONES`), and a 303 to ``location`` (a reload then reads the page instead of
    sending the form again)."""
    if tone not in RESULT_TONES:
        raise ValueError(f"tone must be one of {RESULT_TONES}")
    session[RESULT_KEY] = [tone, message]
    return redirect(location, 303)


def take_result() -> tuple[str, str] | None:
    """The last action's result line and its tone, once; None when there is none."""
    if RESULT_KEY not in session:
        return None
    result = session.pop(RESULT_KEY)
    if (
        isinstance(result, list)
        and len(result) == 2
        and result[0] in RESULT_TONES
        and isinstance(result[1], str)
    ):
        return result[1], result[0]
    return None
