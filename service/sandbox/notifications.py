"""Signed notifications sent to the merchant, retried with backoff, logged, and resent on demand.

One worker thread sends them, so a slow or dead receiver never holds up the API or the page.
Each notification is one body signed with the configured scheme; every try signs it again
(a fresh timestamp) under the same ``webhook-id``, so the receiver sees one message delivered
at least once. A 2xx answer is delivered; anything else is tried again after
``backoff * 2 ** n`` seconds until the tries run out. The service's retry behaviour is not
shown by the interface; this is the sandbox's assumption.

The log keeps every notification and every try, for tests and for a person at the console.
"""

from __future__ import annotations

import heapq
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum

import httpx

from payhooks.service.sandbox.settings import SandboxSettings
from payhooks.verify import get_signer

__all__ = ["DeliveryTry", "Notification", "NotificationState", "Notifier"]


class NotificationState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    #: Every try failed.
    FAILED = "failed"
    #: Not sent: the drop switch was on.
    DROPPED = "dropped"


@dataclass(frozen=True, slots=True)
class DeliveryTry:
    """One try: the answer's status, or why there was none."""

    at: datetime
    status: int | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Notification:
    """One notification in the log (a snapshot)."""

    id: int
    transaction_id: str
    external_identifier: str
    url: str
    body: bytes
    webhook_id: str
    state: NotificationState
    tries: tuple[DeliveryTry, ...] = ()
    #: The notification this one resends, if it is a resend.
    resend_of: int | None = None


@dataclass(order=True)
class _Due:
    at: float
    notification_id: int = field(compare=False)


class Notifier:
    """Sends, retries and logs notifications in a background thread. ``close()`` stops it."""

    def __init__(
        self,
        settings: SandboxSettings,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._settings = settings
        self._signer = get_signer(
            settings.scheme, settings.signing_key, **settings.signature_options
        )
        self._clock = clock or (lambda: datetime.now(UTC))
        self._log: dict[int, Notification] = {}
        self._queue: list[_Due] = []
        self._changed = threading.Condition()
        self._closed = False
        #: The drop switch: notifications made while it is on are logged ``dropped``, not sent.
        self.dropping = settings.drop_notifications
        self._http = httpx.Client(timeout=settings.notify_timeout)
        self._worker = threading.Thread(target=self._run, name="sandbox-notifier", daemon=True)
        self._worker.start()

    def close(self) -> None:
        """Stop the worker (pending notifications stay pending) and close connections."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._worker.join(timeout=10)
        self._http.close()

    def send(
        self,
        transaction_id: str,
        external_identifier: str,
        url: str,
        body: bytes,
        *,
        webhook_id: str | None = None,
        resend_of: int | None = None,
    ) -> Notification:
        """Log a notification and queue it (or log it dropped while the switch is on)."""
        drop = self.dropping and resend_of is None
        with self._changed:
            notification = Notification(
                id=len(self._log) + 1,
                transaction_id=transaction_id,
                external_identifier=external_identifier,
                url=url,
                body=body,
                webhook_id=webhook_id or f"msg_{uuid.uuid4().hex}",
                state=NotificationState.DROPPED if drop else NotificationState.PENDING,
                resend_of=resend_of,
            )
            self._log[notification.id] = notification
            if not drop:
                heapq.heappush(self._queue, _Due(time.monotonic(), notification.id))
                self._changed.notify_all()
        return notification

    def resend(self, notification_id: int) -> Notification:
        """Send a logged notification again, whatever became of it, under its ``webhook-id``
        (the receiver's dedupe then applies), even while the drop switch is on.

        :raises KeyError: no such notification.
        """
        with self._changed:
            original = self._log[notification_id]
        return self.send(
            original.transaction_id,
            original.external_identifier,
            original.url,
            original.body,
            webhook_id=original.webhook_id,
            resend_of=original.id,
        )

    def log(self) -> list[Notification]:
        """Every notification, oldest first."""
        with self._changed:
            return list(self._log.values())

    def get(self, notification_id: int) -> Notification | None:
        with self._changed:
            return self._log.get(notification_id)

    def wait(self, timeout: float = 10.0) -> bool:
        """Wait until no notification is pending; False when ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while any(n.state is NotificationState.PENDING for n in self._log.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    # -- the worker ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._closed and (
                    not self._queue or self._queue[0].at > time.monotonic()
                ):
                    wait = None if not self._queue else self._queue[0].at - time.monotonic()
                    self._changed.wait(wait)
                if self._closed:
                    return
                due = heapq.heappop(self._queue)
                notification = self._log[due.notification_id]
            attempt = self._try(notification)
            with self._changed:
                tries = (*notification.tries, attempt)
                delivered = attempt.status is not None and 200 <= attempt.status < 300
                if delivered:
                    state = NotificationState.DELIVERED
                elif len(tries) >= self._settings.notify_attempts:
                    state = NotificationState.FAILED
                else:
                    state = NotificationState.PENDING
                    delay = min(
                        self._settings.notify_backoff * 2 ** (len(tries) - 1),
                        self._settings.notify_max_backoff,
                    )
                    heapq.heappush(self._queue, _Due(time.monotonic() + delay, notification.id))
                self._log[notification.id] = replace(notification, tries=tries, state=state)
                self._changed.notify_all()

    def _try(self, notification: Notification) -> DeliveryTry:
        now = self._clock()
        headers = self._signer.sign(
            notification.body, webhook_id=notification.webhook_id, timestamp=now
        )
        headers["Content-Type"] = "application/json"
        try:
            response = self._http.post(notification.url, content=notification.body, headers=headers)
        except Exception as err:  # the worker outlives any one delivery, whatever went wrong
            return DeliveryTry(now, None, f"{type(err).__name__}: {err}")
        return DeliveryTry(now, response.status_code)
