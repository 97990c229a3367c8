"""``sync_transactions`` against the sandbox over HTTP on loopback, with a real receiver where
notifications matter: the drift it finds is exactly what was made to happen."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta

import httpx
import pytest
from flask import Flask

from payhooks.service.client import RetryPolicy, ServiceClient
from payhooks.service.sandbox import SandboxResender, SandboxServer, resend_missed
from payhooks.service.sync import (
    DEFAULT_SYNC_STATUS_MAP,
    SyncInterruptedError,
    SyncProgress,
    sync_transactions,
)
from payhooks.storage import DriftKind, Ledger, ReconciliationState
from payhooks.storage.sync_rows import SyncStatus
from tests.support.app import AppFactory
from tests.support.live_server import LiveServer
from tests.support.service import MERCHANT, card_transaction, wire

R = ReconciliationState


class CursorLog(httpx.HTTPTransport):
    """What went over the wire: the cursor each list request sent, the next_cursor each page
    answered. A transport under the client's own connection: it reads each list page whole,
    notes its cursor, and hands the client an answer with the same bytes (the client streams
    answers, so an event hook that read the body would leave it nothing to read)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str | None] = []
        self.answered: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.url.path != "/v4/transactions":
            return response
        self.sent.append(request.url.params.get("cursor"))
        body = response.read()
        response.close()
        if response.status_code == 200:
            self.answered.append(json.loads(body)["next_cursor"])
        # As a stream (``content=`` would be read at once, and leave nothing to stream).
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=httpx.ByteStream(body),
            request=request,
        )


@pytest.fixture
def cursors() -> CursorLog:
    return CursorLog()


@pytest.fixture
def lister(sandbox_with_receiver: SandboxServer, cursors: CursorLog) -> Iterator[ServiceClient]:
    http = httpx.Client(transport=cursors)
    with ServiceClient(
        sandbox_with_receiver.url,
        access_token=sandbox_with_receiver.issue_token(),
        merchant_account_id=MERCHANT,
        retry=RetryPolicy(attempts=2, backoff=0.001),
        http=http,
    ) as client:
        yield client
    http.close()


@pytest.fixture
def sandbox_with_receiver(
    make_app: AppFactory,
    serve: Callable[[Flask], LiveServer],
    start_sandbox: Callable[..., SandboxServer],
) -> SandboxServer:
    receiver = serve(make_app())
    return start_sandbox(notification_url=f"{receiver.url}/payhooks/notifications")


@pytest.fixture
def creator(
    make_client: Callable[..., ServiceClient], sandbox_with_receiver: SandboxServer
) -> ServiceClient:
    """A client that creates payments at the receiver's sandbox, registering them first."""
    return make_client(
        access_token=sandbox_with_receiver.issue_token(), base_url=sandbox_with_receiver.url
    )


def pay_cards(
    client: ServiceClient, sandbox: SandboxServer, references: list[str], dropped: set[str]
) -> None:
    """Card payments that pay at once; the notifications of ``dropped`` are lost on purpose."""
    for reference in references:
        sandbox.drop_notifications(reference in dropped)
        client.create_transaction(card_transaction(reference))
    sandbox.drop_notifications(False)
    assert sandbox.wait_for_notifications(10)


def missed(ledger: Ledger) -> set[str]:
    return {
        d.external_identifier
        for d in ledger.service.sync_drift()
        if d.kind is DriftKind.MISSED_NOTIFICATION
    }


@pytest.mark.parametrize("page_size", [1, 3, 100])
def test_sync_finds_exactly_the_dropped_notifications_passing_cursors_back_unchanged(
    sandbox_with_receiver: SandboxServer,
    creator: ServiceClient,
    lister: ServiceClient,
    ledger: Ledger,
    cursors: CursorLog,
    page_size: int,
) -> None:
    references = [f"order-{n}" for n in range(7)]
    dropped = {"order-1", "order-4", "order-5"}
    pay_cards(creator, sandbox_with_receiver, references, dropped)

    report = sync_transactions(lister, ledger, limit=page_size)

    assert missed(ledger) == dropped
    assert report.drift == {DriftKind.MISSED_NOTIFICATION: len(dropped)}
    assert (report.pages, report.items) == (-(-7 // page_size), 7)
    rows = {r: ledger.row(r) for r in references}
    assert {r: (row.state, row.drift) for r, row in rows.items() if row is not None} == {
        r: (R.PENDING, DriftKind.MISSED_NOTIFICATION) if r in dropped else (R.PAID, None)
        for r in references
    }
    # Each page asked for with exactly the cursor the page before answered.
    assert cursors.sent == [None, *cursors.answered[:-1]]
    assert cursors.answered[-1] is None


def test_a_resent_notification_resolves_the_drift_it_explains(
    sandbox_with_receiver: SandboxServer,
    creator: ServiceClient,
    lister: ServiceClient,
    ledger: Ledger,
) -> None:
    pay_cards(creator, sandbox_with_receiver, ["order-1", "order-2"], {"order-2"})
    sync_transactions(lister, ledger)
    with SandboxResender(sandbox_with_receiver.url) as resender:
        resent = resend_missed(ledger, resender)
    assert resent == (sandbox_with_receiver.notifications()[1].transaction_id,)
    assert sandbox_with_receiver.wait_for_notifications(10)
    assert missed(ledger) == set()
    assert ledger.state("order-2") is R.PAID


def test_a_sync_interrupted_half_way_keeps_its_pages_and_the_next_one_resumes(
    sandbox_with_receiver: SandboxServer,
    creator: ServiceClient,
    lister: ServiceClient,
    ledger: Ledger,
    cursors: CursorLog,
) -> None:
    references = [f"order-{n}" for n in range(6)]
    pay_cards(creator, sandbox_with_receiver, references, set(references))

    def fail_after_two_pages(progress: SyncProgress) -> None:
        if progress.pages == 2:  # every try of the third page loses its answer
            sandbox_with_receiver.sandbox.lose_next_answers(2)  # the lister tries twice

    with pytest.raises(SyncInterruptedError) as exc_info:
        sync_transactions(lister, ledger, limit=2, progress=fail_after_two_pages)
    assert exc_info.value.code == "sync_interrupted"
    stopped = exc_info.value.report.run
    assert (stopped.status, stopped.pages, stopped.items) == (SyncStatus.INTERRUPTED, 2, 4)
    assert len(missed(ledger)) == 4  # what it recorded is kept
    resume_from = stopped.next_cursor

    cursors.sent.clear()
    again = sync_transactions(lister, ledger, limit=2)
    assert again.resumed
    assert cursors.sent[0] == resume_from
    assert (again.pages, again.items, again.run.pages, again.run.status) == (
        1,
        2,
        3,
        SyncStatus.COMPLETE,
    )
    assert missed(ledger) == set(references)
    # Run again once complete: from the first page, and nothing new.
    third = sync_transactions(lister, ledger, limit=2)
    assert (third.resumed, third.pages, third.drift) == (False, 3, again.drift)


def test_status_strings_the_map_lacks_are_reported_never_dropped(
    sandbox_with_receiver: SandboxServer,
    creator: ServiceClient,
    lister: ServiceClient,
    ledger: Ledger,
) -> None:
    pay_cards(creator, sandbox_with_receiver, ["order-1"], set())
    status_map = {k: v for k, v in DEFAULT_SYNC_STATUS_MAP.items() if k != "succeeded"}
    report = sync_transactions(lister, ledger, status_map=status_map)
    assert report.unknown_statuses == {"succeeded": 1}
    assert report.drift == {DriftKind.UNKNOWN_STATUS: 1}
    row = ledger.row("order-1")
    assert row is not None
    assert (row.state, row.drift) == (R.PAID, DriftKind.UNKNOWN_STATUS)


def test_what_only_one_side_knows_is_unexpected_or_missing_at_service(
    sandbox_with_receiver: SandboxServer, lister: ServiceClient, ledger: Ledger
) -> None:
    ledger.expect_transaction("never-sent", 2500, "CNY")
    stray = wire(card_transaction("nobody-expected-this"))
    sandbox_with_receiver.sandbox.create_transaction(MERCHANT, stray)
    report = sync_transactions(lister, ledger, max_age=timedelta(0))
    assert report.drift == {DriftKind.UNEXPECTED: 1, DriftKind.MISSING_AT_SERVICE: 1}
    never_sent = ledger.row("never-sent")
    assert never_sent is not None
    assert (never_sent.state, never_sent.drift) == (R.PENDING, DriftKind.MISSING_AT_SERVICE)
    assert ledger.state("nobody-expected-this") is R.UNEXPECTED


def test_the_resender_needs_no_secret_and_says_when_it_has_nothing(
    sandbox_with_receiver: SandboxServer, ledger: Ledger, lister: ServiceClient
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    stray = wire(card_transaction("order-1"))
    stray["payment_method"]["payment_method_data"]["card"]["number"] = "4000000000003220"
    created = sandbox_with_receiver.sandbox.create_transaction(MERCHANT, stray)
    assert created["status"] == "processing"
    report = sync_transactions(lister, ledger)
    with SandboxResender(sandbox_with_receiver.url) as resender:
        resent = resend_missed(ledger, resender)
    assert report.drift == {}
    assert resent == ()
