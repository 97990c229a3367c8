"""What every console action does first and last: who may act, the CSRF check, the note, the
audit entry, and the one-line result shown after the redirect.

An action is a POST by an operator with this session's token (:mod:`.csrf`). A refused one
(a viewer, a forged or stale form, an app without ``SECRET_KEY``) is written to the audit log
too, with ``refused: <code>`` as its result, and changes nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from flask import current_app, g, redirect, request, session
from werkzeug.wrappers import Response as BaseResponse

from payhooks.receiver.state import STATE_KEY
from payhooks.receiver.web.console.access import ConsoleGrant, ConsoleRole, console_ledger
from payhooks.receiver.web.console.csrf import ActionRefused, check_action_request
from payhooks.storage import Ledger

__all__ = [
    "MAX_NOTE_CHARS",
    "RESULT_KEY",
    "Acting",
    "begin_action",
    "can_act",
    "can_redrive",
    "current_grant",
    "done",
    "merchant_app",
    "take_result",
]

#: The longest note an action takes (the audit log's limit).
MAX_NOTE_CHARS: Final = 1000
#: Where the session keeps an action's result line until the next console page shows it. Not
#: Flask's ``flash``: reading flashed messages takes the merchant's own too.
RESULT_KEY: Final = "payhooks_console_result"


def current_grant() -> ConsoleGrant:
    """Who the merchant's hook let in for this request."""
    grant: ConsoleGrant = g.payhooks_console_grant
    return grant


def can_act() -> bool:
    """Whether this request's person is an operator (the pages show the forms to them only)."""
    grant: ConsoleGrant | None = g.get("payhooks_console_grant")
    return grant is not None and grant.role is ConsoleRole.OPERATOR


def can_redrive() -> bool:
    """Whether this console runs in the merchant's app, beside the receiver: reprocessing
    needs its parsing settings and sending signals its receivers. A console on a ledger of its
    own (``payhooks console``, ``Console(database=...)``) reads, reviews and downloads only."""
    return STATE_KEY in current_app.extensions


def merchant_app() -> object:
    """The app whose signal receivers an action's signals go to."""
    app: object = current_app._get_current_object()  # type: ignore[attr-defined]
    return app


class Acting:
    """One action under way: who, on what, with which note; :meth:`record` writes its entry."""

    def __init__(self, grant: ConsoleGrant, action: str, target: str | None, note: str | None):
        self.grant, self.action, self.target, self.note = grant, action, target, note

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


def begin_action(action: str, target: str | None, *, redrives: bool = False) -> Acting:
    """Let this action start, or refuse it (and audit the refusal).

    :param redrives: the action reprocesses or sends signals, which only the merchant's app
        can (:func:`can_redrive`).
    :raises ActionRefused: 403 ``console_forbidden_action`` for a viewer; what
        :func:`~.csrf.check_action_request` raises; 400 ``console_bad_form`` for a bad note;
        409 ``console_needs_receiver`` for a re-drive in a console without the receiver.
    """
    grant = current_grant()
    try:
        if grant.role is not ConsoleRole.OPERATOR:
            raise ActionRefused(
                403,
                "console_forbidden_action",
                "Only an operator may act in the console; a viewer reads every page.",
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
        Acting(grant, action, target, None).record(f"refused: {refused.code}")
        raise
    return Acting(grant, action, target, note)


def done(message: str, location: str) -> BaseResponse:
    """The answer to a finished action: its one-line result for the next page, and a 303 to
    ``location`` (a reload then reads the page instead of sending the form again)."""
    session[RESULT_KEY] = message
    return redirect(location, 303)


def take_result() -> str | None:
    """The last action's result line, once; None when there is none."""
    if RESULT_KEY not in session:
        return None
    result = session.pop(RESULT_KEY)
    return result if isinstance(result, str) else None
