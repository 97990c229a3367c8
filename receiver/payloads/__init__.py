"""Notification bodies into outcome records: the three forms of the service's webhook.

``parse_notification`` is the one entry point; ``PayloadError`` (``malformed_json`` or
``invalid_payload``) is the one exception a body can cause.
"""

from __future__ import annotations

from payhooks.receiver.payloads.decoding import MAX_DEPTH
from payhooks.receiver.payloads.errors import InvalidPayloadError, MalformedJSONError, PayloadError
from payhooks.receiver.payloads.parse import parse_notification
from payhooks.receiver.payloads.schemas import (
    MAX_AMOUNT_MINOR,
    MAX_EXTERNAL_IDENTIFIER_LENGTH,
    MAX_TRANSACTION_ID_LENGTH,
)
from payhooks.receiver.payloads.status import AGREEING_PROVIDER_STATUS, load_status_map
from payhooks.receiver.payloads.zones import load_time_zone

__all__ = [
    "AGREEING_PROVIDER_STATUS",
    "MAX_AMOUNT_MINOR",
    "MAX_DEPTH",
    "MAX_EXTERNAL_IDENTIFIER_LENGTH",
    "MAX_TRANSACTION_ID_LENGTH",
    "InvalidPayloadError",
    "MalformedJSONError",
    "PayloadError",
    "load_status_map",
    "load_time_zone",
    "parse_notification",
]
