"""A local sandbox of the payment service: the interface's endpoints, a hosted payment page,
signed notifications with retries, a log and resend, test cards, and a drop switch.

It stands in for the external service in tests and merchants' CI; it is never a stand-in for
payhooks' own code. Rule of this folder: it may use Flask and payhooks.verify, never
payhooks.receiver (``tests/service/test_layers.py`` enforces it).
"""

from __future__ import annotations

from payhooks.service.sandbox.app import create_app
from payhooks.service.sandbox.cards import TEST_CARDS
from payhooks.service.sandbox.core import Sandbox, Settlement
from payhooks.service.sandbox.notifications import (
    DeliveryTry,
    Notification,
    NotificationState,
)
from payhooks.service.sandbox.records import SandboxError
from payhooks.service.sandbox.resend import SandboxResender, resend_missed
from payhooks.service.sandbox.server import SandboxServer
from payhooks.service.sandbox.settings import (
    DEFAULT_SCOPES,
    DEFAULT_STATUS_CODES,
    OUTCOMES,
    SandboxSettings,
)
from payhooks.service.sandbox.tokens import issue_token

__all__ = [
    "DEFAULT_SCOPES",
    "DEFAULT_STATUS_CODES",
    "OUTCOMES",
    "TEST_CARDS",
    "DeliveryTry",
    "Notification",
    "NotificationState",
    "Sandbox",
    "SandboxError",
    "SandboxResender",
    "SandboxServer",
    "SandboxSettings",
    "Settlement",
    "create_app",
    "issue_token",
    "resend_missed",
]
