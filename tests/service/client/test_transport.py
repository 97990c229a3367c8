"""Retries and errors: what is tried again, how long it waits, and what is raised."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from payhooks.service import (
    AuthenticationError,
    NotFoundError,
    RateLimitedError,
    RequestValidationError,
    ServiceResponseError,
    ServiceUnavailableError,
    TransportError,
)
from payhooks.service.client import RetryPolicy, ServiceClient
from payhooks.service.errors import error_for_status
from payhooks.service.sandbox import SandboxServer


def test_the_backoff_doubles_up_to_its_ceiling() -> None:
    policy = RetryPolicy(attempts=6, backoff=1.0, max_backoff=5.0)
    delays = [policy.delay(n) for n in range(1, 6)]
    for delay, base in zip(delays, [1, 2, 4, 5, 5], strict=True):
        assert base <= delay <= base * 1.25


def test_retry_after_seconds_replace_the_backoff_within_the_ceiling() -> None:
    policy = RetryPolicy(backoff=1.0, max_backoff=5.0)
    assert policy.delay(1, "3") == 3
    assert policy.delay(1, "60") == 5


@pytest.mark.parametrize("attempts", [0, -1])
def test_a_policy_without_a_try_is_refused(attempts: int) -> None:
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=attempts)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, AuthenticationError),
        (404, NotFoundError),
        (429, RateLimitedError),
        (502, ServiceUnavailableError),
        (418, ServiceResponseError),
    ],
)
def test_an_error_status_is_its_typed_error_with_status_and_body(
    status: int, kind: type[ServiceResponseError]
) -> None:
    body = b'{"error": {"code": "nope", "message": "No.", "field": "amount"}}'
    error = error_for_status(status, body, method="GET", path="/buyers")
    assert type(error) is kind
    assert error.status == status
    assert error.body == body
    assert (error.service_code, error.field) == ("nope", "amount")
    assert str(error) == f"GET /buyers answered {status} (nope): No."


def test_an_error_body_that_is_not_json_is_kept_as_is() -> None:
    error = error_for_status(500, b"<html>", method="POST", path="/v4/transactions")
    assert error.body == b"<html>"
    assert error.service_code is None
    assert error.json() == {}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.system
def test_a_connection_refused_is_tried_again_then_a_transport_error(
    make_client: Callable[..., ServiceClient],
) -> None:
    waits: list[float] = []
    client = make_client(
        base_url=f"http://127.0.0.1:{_closed_port()}",
        retry=RetryPolicy(attempts=3, backoff=0.5),
        sleep=waits.append,
    )
    with pytest.raises(TransportError):
        list(client.buyers())
    assert len(waits) == 2
    assert 0.5 <= waits[0] <= 0.625
    assert 1.0 <= waits[1] <= 1.25


@pytest.mark.system
def test_a_list_is_retried_after_a_lost_answer(
    make_client: Callable[..., ServiceClient], sandbox: SandboxServer
) -> None:
    waits: list[float] = []
    client = make_client(sleep=waits.append)
    sandbox.sandbox.add_buyer("Ann")
    sandbox.sandbox.lose_next_answers(2)
    assert [b.display_name for b in client.buyers()] == ["Ann"]
    assert len(waits) == 2


@pytest.mark.system
def test_a_list_gives_up_after_its_tries(
    make_client: Callable[..., ServiceClient], sandbox: SandboxServer
) -> None:
    client = make_client(sleep=lambda _: None)
    sandbox.sandbox.lose_next_answers(3)
    with pytest.raises(ServiceUnavailableError):
        list(client.buyers())


#: Base URLs the client takes: https anywhere, http on loopback only.
SAFE_BASE_URLS = [
    "https://service.example",
    "http://127.0.0.1:8000",
    "http://127.9.9.9",
    "http://[::1]:8000",
    "HTTP://LocalHost:8000",
]
#: And those that would send the token in clear (or nowhere).
CLEAR_BASE_URLS = [
    "http://service.example",
    "http://10.0.0.5:8080",
    "http://[2001:db8::1]",
    "http://localhost.service.example",
    "ftp://service.example",
    "service.example",
    "https://",
    "http://[::1",
]


@pytest.mark.parametrize("url", CLEAR_BASE_URLS)
def test_a_base_url_that_would_send_the_token_in_clear_is_refused(url: str) -> None:
    with pytest.raises(RequestValidationError) as exc_info:
        ServiceClient(url, access_token="secret-token", merchant_account_id="m")

    assert (exc_info.value.code, exc_info.value.field) == ("invalid_request", "base_url")
    assert "secret-token" not in exc_info.value.message


@pytest.mark.parametrize("url", SAFE_BASE_URLS)
def test_https_or_http_on_loopback_is_taken(url: str) -> None:
    ServiceClient(url, access_token="secret-token", merchant_account_id="m").close()
