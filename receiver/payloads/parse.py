"""``parse_notification``: one notification body in, one :class:`~payhooks.storage.records.Outcome`
out.

The steps, each with its own module: decode the bytes strictly (:mod:`.decoding`), check the
members and tell the form (:mod:`.schemas`, :mod:`.forms`), read the time in its zone
(:mod:`.zones`), map the status code to a state (:mod:`.status`). Whatever the body, the only
exception that leaves is :class:`~payhooks.receiver.payloads.errors.PayloadError`; a bad *argument*
(a zone or status map from configuration) is a ``ValueError``, as configuration errors are.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import tzinfo
from typing import Any

from marshmallow import ValidationError

from payhooks.receiver.payloads.decoding import decode_body, plain_json
from payhooks.receiver.payloads.errors import SCHEMA_KEY, InvalidPayloadError
from payhooks.receiver.payloads.schemas import (
    MAX_EXTERNAL_IDENTIFIER_LENGTH,
    Notification,
    NotificationSchema,
)
from payhooks.receiver.payloads.status import load_status_map, resolve_state
from payhooks.receiver.payloads.zones import delivery_zone, load_time_zone, to_utc
from payhooks.storage import DEFAULT_STATUS_MAP, Outcome

__all__ = ["parse_notification"]

_SCHEMA = NotificationSchema()


def parse_notification(
    body: bytes | str | Mapping[str, Any],
    *,
    time_zone: str | tzinfo = "UTC",
    delivery_time_zone: str | None = None,
    status_map: Mapping[str, Any] | None = None,
) -> Outcome:
    """Parse a notification body (the raw bytes, their text, or an already decoded object).

    :param time_zone: the zone ``payment_time`` is read in when the delivery names none
        (``PAYHOOKS_PAYMENT_TIME_ZONE``): an IANA name, an offset such as ``+08:00``, or a
        tzinfo.
    :param delivery_time_zone: the delivery's ``timezone`` header, if any; used when it names a
        zone, ignored otherwise.
    :param status_map: ``payment_status`` codes to states, replacing
        :data:`~payhooks.storage.records.DEFAULT_STATUS_MAP`; see :func:`load_status_map`.
    :returns: the outcome, with ``paid_at`` in UTC.
    :raises PayloadError: ``malformed_json`` or ``invalid_payload``, with per-field details.
    :raises ValueError: for a ``time_zone`` or ``status_map`` that is not valid configuration.
    """
    zone = load_time_zone(time_zone)
    states = DEFAULT_STATUS_MAP if status_map is None else load_status_map(status_map)
    if isinstance(body, bytes | bytearray | memoryview | str):
        document = decode_body(body)
    else:
        document = plain_json(body)
    if not isinstance(document, dict):  # plain_json makes every mapping a dict
        raise InvalidPayloadError(
            "The notification is not valid: the body is JSON but not an object.",
            {SCHEMA_KEY: ["Invalid input type."]},
        )
    try:
        notification: Notification = _SCHEMA.load(document)
    except ValidationError as err:
        invalid = InvalidPayloadError.from_messages(_as_mapping(err.messages))
        invalid.external_identifier = _named_identifier(document)
        raise invalid from err
    paid_at = to_utc(notification.local_time, delivery_zone(delivery_time_zone) or zone)
    if paid_at is None:
        invalid = InvalidPayloadError.at(
            ("payment_data", "payment_time"), "Outside the range of representable times."
        )
        invalid.external_identifier = notification.external_identifier
        raise invalid
    form = notification.form
    return Outcome(
        transaction_id=notification.transaction_id,
        external_identifier=notification.external_identifier,
        flow=form.flow,
        provider=form.provider,
        provider_reference=form.reference,
        provider_status=notification.provider_status,
        payment_status=notification.payment_status,
        state=resolve_state(
            notification.payment_status, form.flow, notification.provider_status, states
        ),
        amount=notification.amount,
        currency=notification.currency,
        amount_minor=notification.amount_minor,
        paid_at=paid_at,
        extra=notification.extra,
    )


def _named_identifier(document: Mapping[str, Any]) -> str | None:
    """The identifier an invalid body names, when it could be stored as one (no NUL, no lone
    surrogate)."""
    named = document.get("merchant_transaction_id")
    if not isinstance(named, str) or not 1 <= len(named) <= MAX_EXTERNAL_IDENTIFIER_LENGTH:
        return None
    if "\x00" in named or (not named.isascii() and not _encodable(named)):
        return None
    return named


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _as_mapping(messages: Any) -> Mapping[str, Any]:
    return messages if isinstance(messages, Mapping) else {SCHEMA_KEY: list(messages)}
