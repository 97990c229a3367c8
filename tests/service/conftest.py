"""Fixtures of the service tests: a sandbox served on loopback, and a client of it whose
ledger is the test's ``ledger`` (the root conftest's, on the same file as ``make_app``'s)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from payhooks.service.client import RetryPolicy, ServiceClient
from payhooks.service.sandbox import SandboxServer, SandboxSettings
from payhooks.storage import Ledger
from tests.support.app import TEST_SECRET
from tests.support.service import MERCHANT


@pytest.fixture
def start_sandbox() -> Iterator[Callable[..., SandboxServer]]:
    """Start sandboxes with settings overrides; every one is stopped after the test, even
    when the test fails. Notifications are signed with the test secret (Standard Webhooks)
    and retried quickly unless told otherwise."""
    started: list[SandboxServer] = []

    def start(clock: Callable[[], datetime] | None = None, **settings: Any) -> SandboxServer:
        values: dict[str, Any] = {
            "signing_key": TEST_SECRET,
            "notify_backoff": 0.05,
            "notify_attempts": 3,
            **settings,
        }
        server = SandboxServer.start(SandboxSettings(**values), clock=clock)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def sandbox(start_sandbox: Callable[..., SandboxServer]) -> SandboxServer:
    return start_sandbox()


@pytest.fixture
def make_client(ledger: Ledger, sandbox: SandboxServer) -> Iterator[Callable[..., ServiceClient]]:
    """Clients of ``sandbox`` (or of ``base_url``) that register in ``ledger``; retries wait
    a millisecond."""
    made: list[ServiceClient] = []

    def make(**options: Any) -> ServiceClient:
        values: dict[str, Any] = {
            "access_token": sandbox.issue_token(),
            "merchant_account_id": MERCHANT,
            "ledger": ledger,
            "retry": RetryPolicy(attempts=3, backoff=0.001),
            **options,
        }
        client = ServiceClient(values.pop("base_url", sandbox.url), **values)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def client(make_client: Callable[..., ServiceClient]) -> ServiceClient:
    return make_client()
