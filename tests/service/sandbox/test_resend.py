"""The sandbox resender: a control API that cannot be reached is a ``TransportError``."""

from __future__ import annotations

import socket

import pytest

from payhooks.service import TransportError
from payhooks.service.sandbox import SandboxResender, SandboxServer, SandboxSettings
from payhooks.storage import DriftKind, DriftRow


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_sandbox_is_a_transport_error_with_its_code() -> None:
    row = DriftRow(DriftKind.MISSED_NOTIFICATION, "order-1", "ll-1", "succeeded", None, None, None)
    url = f"http://127.0.0.1:{_closed_port()}"
    with (
        SandboxResender(url, access_token="t") as resend,
        pytest.raises(TransportError) as exc_info,
    ):
        resend(row)
    assert exc_info.value.code == "transport_error"
    assert "/sandbox/notifications" in exc_info.value.message


def test_the_resender_sends_the_control_token_when_the_sandbox_has_one() -> None:
    row = DriftRow(DriftKind.MISSED_NOTIFICATION, "order-1", "ll-1", "succeeded", None, None, None)
    settings = SandboxSettings(control_token="control-secret-1234567890")
    with SandboxServer.start(settings) as sandbox:
        with SandboxResender(sandbox.url, access_token=sandbox.issue_token()) as refused:
            with pytest.raises(TransportError) as exc_info:
                refused(row)
            assert "401" in exc_info.value.message
        with SandboxResender(
            sandbox.url,
            access_token=sandbox.issue_token(),
            control_token="control-secret-1234567890",
        ) as resend:
            assert resend(row) is False  # the log is read: nothing for that transaction
