"""The one error a notification body can cause, with a stable code and per-field details.

The receiver answers ``malformed_json`` with 400 and ``invalid_payload`` with 422, and keeps
the error on the delivery row; so every message here is one plain sentence, and ``details``
mirrors the body's shape the way marshmallow reports it (``{"payment_data":
{"payment_amount": ["..."]}}``). Problems with the body as a whole, rather than one member,
sit under marshmallow's ``"_schema"`` key. Messages describe what was expected and never echo
the value sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

__all__ = ["SCHEMA_KEY", "InvalidPayloadError", "MalformedJSONError", "PayloadError"]

#: The key marshmallow uses for an error that belongs to an object rather than one member.
SCHEMA_KEY = "_schema"

#: How many field paths a message names before it says "and N more", and how long each may be.
_NAMED_IN_MESSAGE = 3
_PATH_IN_MESSAGE = 80


class PayloadError(Exception):
    """A notification body that cannot become an :class:`~payhooks.storage.records.Outcome`.

    :param message: one human sentence.
    :param details: per-field messages, nested like the body; lists of strings at the leaves.
    """

    #: Stable machine code; the receiver puts it in the response and on the delivery row.
    code: ClassVar[str] = "invalid_payload"

    def __init__(self, message: str, details: Mapping[str, Any] | None = None) -> None:
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        #: The ``merchant_transaction_id`` a JSON object body names, when it names one that
        #: could be a payment's (1 to 64 characters): the ledger counts the refusal on that
        #: payment's row. A hint, never acted on: the body is not a notification.
        self.external_identifier: str | None = None
        super().__init__(message)

    @property
    def fields(self) -> tuple[str, ...]:
        """The dotted paths named in :attr:`details`, sorted (``payment_data.payment_amount``)."""
        return tuple(sorted(_paths(self.details, "")))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, fields={list(self.fields)!r})"


class MalformedJSONError(PayloadError):
    """The body is not one JSON text we can read unambiguously.

    Not UTF-8, not JSON, a ``NaN``/``Infinity`` constant, or an object that repeats a member
    name (a verifier and the parser could otherwise each read a different value).
    """

    code: ClassVar[str] = "malformed_json"

    @classmethod
    def whole_body(cls, message: str, detail: str) -> MalformedJSONError:
        """An error about the body as a whole: ``detail`` goes under ``"_schema"``."""
        return cls(message, {SCHEMA_KEY: [detail]})


class InvalidPayloadError(PayloadError):
    """The body is JSON but not a notification: a member missing, of the wrong type or value."""

    code: ClassVar[str] = "invalid_payload"

    @classmethod
    def from_messages(cls, messages: Mapping[str, Any]) -> InvalidPayloadError:
        """Wrap marshmallow's ``ValidationError.messages``, naming the fields in the message."""
        paths = sorted(_paths(messages, ""))
        whole = messages.get(SCHEMA_KEY)
        if paths == [SCHEMA_KEY] and isinstance(whole, list) and whole:
            detail = str(whole[0])
            return cls(f"The notification is not valid: {detail[:1].lower()}{detail[1:]}", messages)
        named = ", ".join(_shorten(path) for path in paths[:_NAMED_IN_MESSAGE])
        if len(paths) > _NAMED_IN_MESSAGE:
            named += f" and {len(paths) - _NAMED_IN_MESSAGE} more"
        return cls(f"The notification is not valid: check {named}.", messages)

    @classmethod
    def at(cls, path: tuple[str, ...], detail: str) -> InvalidPayloadError:
        """An error about one member, ``path`` from the top (``("payment_data", "x")``)."""
        details: dict[str, Any] = {(path[-1] if path else SCHEMA_KEY): [detail]}
        for key in reversed(path[:-1]):
            details = {key: details}
        return cls.from_messages(details)


def _paths(details: Mapping[Any, Any], prefix: str) -> Iterator[str]:
    for key, value in details.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _paths(value, f"{path}.")
        else:
            yield path


def _shorten(path: str) -> str:
    return path if len(path) <= _PATH_IN_MESSAGE else f"{path[: _PATH_IN_MESSAGE - 3]}..."
