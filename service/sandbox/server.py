"""Serve the sandbox on a real socket in a background thread: for tests and merchants' CI.

::

    with SandboxServer.start(SandboxSettings(notification_url=...)) as sandbox:
        client = ServiceClient(sandbox.url, access_token=sandbox.issue_token(), ...)

werkzeug's threaded server is enough for a stand-in; ``payhooks sandbox`` uses the same class
in the foreground.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from types import TracebackType

from werkzeug.serving import (
    BaseWSGIServer,
    WSGIRequestHandler,
    get_sockaddr,
    make_server,
    select_address_family,
)

from payhooks.service.sandbox.app import create_app
from payhooks.service.sandbox.core import Sandbox, Settlement
from payhooks.service.sandbox.notifications import Notification
from payhooks.service.sandbox.settings import SandboxSettings

__all__ = ["SandboxServer"]

#: How often a sandbox serving in the background checks whether it was told to stop.
_STOP_POLL_SECONDS = 0.05


def _is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on this machine only: ``localhost`` or a loopback
    address. Any other name may resolve to a public address, so it counts as not loopback."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _QuietHandler(WSGIRequestHandler):
    """Serves without a log line per request: tests and CI read the sandbox's own log."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return


class SandboxServer:
    """A :class:`Sandbox` served over HTTP. Build with :meth:`start`; stop with :meth:`stop`
    (or a ``with`` block), which also stops its notifier."""

    def __init__(self, sandbox: Sandbox, server: BaseWSGIServer) -> None:
        #: The sandbox itself: state, settlement, the notifier.
        self.sandbox = sandbox
        self._server = server
        self._thread: threading.Thread | None = None
        #: Where the sandbox answers: its ``{base_url}`` and ``{payment_page_url}``.
        host, port = server.server_address[:2]
        self.url = f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"

    @classmethod
    def start(
        cls,
        settings: SandboxSettings | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        background: bool = True,
        quiet: bool | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> SandboxServer:
        """Bind ``host:port`` (0: a free port) and serve in a daemon thread.

        ``background=False`` binds only; call :meth:`serve_forever` yourself (the command does).
        ``quiet`` (default: when in the background) drops werkzeug's line per request.
        ``clock`` is the sandbox's time (creation times, periods, ``payment_time``); the
        notifications' signatures always use the wall clock.
        Whatever was started is stopped again if start-up fails.

        :raises ValueError: ``host`` is not a loopback address and the settings have no
            ``control_token``: anyone who reaches the address could settle payments and
            read the notification log.
        """
        if not _is_loopback(host) and (settings is None or settings.control_token is None):
            raise ValueError(
                f"control_token: the sandbox binds {host}, which is not a loopback address; "
                "give it a control token, or bind 127.0.0.1"
            )
        sandbox = Sandbox(settings, clock=clock)
        handler = _QuietHandler if (background if quiet is None else quiet) else None
        try:
            # Bound here, not by werkzeug: on a busy port werkzeug prints two lines of its own
            # and exits the process; an OSError lets the command say it in one sentence.
            with _listening_socket(host, port) as listening:
                server = make_server(
                    host,
                    port,
                    create_app(sandbox),
                    threaded=True,
                    request_handler=handler,
                    fd=listening.fileno(),
                )
        except BaseException:
            sandbox.close()
            raise
        served = cls(sandbox, server)
        sandbox.public_url = served.url
        if background:
            # stop() waits for the serving loop to notice: a short poll keeps that short.
            served._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": _STOP_POLL_SECONDS},
                name="payhooks-sandbox",
                daemon=True,
            )
            served._thread.start()
        return served

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted, then stop."""
        try:
            self._server.serve_forever()
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop serving and sending. Safe to call twice."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._server.server_close()
        self.sandbox.close()

    def __enter__(self) -> SandboxServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- shortcuts to the sandbox -----------------------------------------------------------

    @property
    def settings(self) -> SandboxSettings:
        return self.sandbox.settings

    def issue_token(
        self, scopes: Iterable[str] | None = None, *, subject: str | None = None
    ) -> str:
        """An access token (every endpoint's scope when ``scopes`` is None)."""
        return self.sandbox.issue_token(scopes, subject=subject)

    def settle(self, transaction_id: str, outcome: str) -> Settlement:
        """Pay, fail or cancel a payment as the hosted page would."""
        return self.sandbox.settle(transaction_id, outcome)

    def bill_period(self, subscription_id: str, outcome: str = "pay") -> Settlement:
        """Bill a subscription's next period now (see :meth:`Sandbox.bill_period`)."""
        return self.sandbox.bill_period(subscription_id, outcome)

    def notifications(self) -> list[Notification]:
        """The notification log, oldest first."""
        return self.sandbox.notifier.log()

    def wait_for_notifications(self, timeout: float = 10.0) -> bool:
        """Wait until none is pending; False on timeout."""
        return self.sandbox.notifier.wait(timeout)

    def resend(self, notification_id: int) -> Notification:
        return self.sandbox.notifier.resend(notification_id)

    def drop_notifications(self, on: bool = True) -> None:
        """Switch dropping on (notifications are logged ``dropped``, never sent) or off."""
        self.sandbox.notifier.dropping = on


def _listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host`` and ``port`` (werkzeug's server takes a duplicate of
    it; the caller closes this one).

    :raises OSError: the address cannot be used (a busy port, a host that is not here).
    """
    family = select_address_family(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug does
        sock.bind(get_sockaddr(host, port, family))
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock
