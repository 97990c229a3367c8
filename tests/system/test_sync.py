"""Issue 16's "done": a sandbox run where a known set of notifications was dropped; then
``payhooks sync`` and ``payhooks reconcile --fail-on-mismatch``, run as a user runs them (in
subprocesses), name exactly that set and exit 1; after the sandbox resends them, both are clean.
And the sync stays within bounded memory over 10**5 transactions."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from flask import Flask

from payhooks.service.client import ServiceClient
from payhooks.service.sandbox import SandboxServer, SandboxSettings
from payhooks.service.sync import sync_transactions
from payhooks.storage import Ledger
from tests.support.app import TEST_SECRET, AppFactory
from tests.support.live_server import LiveServer
from tests.support.service import MERCHANT, card_transaction, wire

_SCRIPT = "from payhooks.receiver.script import main; main()"


@pytest.fixture
def sandbox(make_app: AppFactory, serve: Callable[[Flask], LiveServer]) -> Iterator[SandboxServer]:
    receiver = serve(make_app())
    server = SandboxServer.start(
        SandboxSettings(
            signing_key=TEST_SECRET,
            notification_url=f"{receiver.url}/payhooks/notifications",
            notify_backoff=0.05,
        )
    )
    try:
        yield server
    finally:
        server.stop()


def payhooks(
    database: Path, sandbox: SandboxServer, *arguments: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}
    env |= {
        "PAYHOOKS_DATABASE": str(database),
        "PAYHOOKS_SERVICE_URL": sandbox.url,
        "PAYHOOKS_SERVICE_TOKEN": sandbox.issue_token(),
        "PAYHOOKS_MERCHANT_ACCOUNT_ID": MERCHANT,
    }
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT, *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def flagged(reconcile_csv: str) -> set[str]:
    rows = csv.DictReader(io.StringIO(reconcile_csv))
    return {row["external_identifier"] for row in rows if row["state"] != "paid"}


def test_sync_then_reconcile_name_exactly_the_dropped_set_until_the_sandbox_resends_it(
    sandbox: SandboxServer, ledger: Ledger, database: Path
) -> None:
    references = [f"order-{n:02}" for n in range(10)]
    dropped = {"order-02", "order-03", "order-07"}
    with ServiceClient(
        sandbox.url, access_token=sandbox.issue_token(), merchant_account_id=MERCHANT, ledger=ledger
    ) as client:
        for reference in references:
            sandbox.drop_notifications(reference in dropped)
            client.create_transaction(card_transaction(reference))
    sandbox.drop_notifications(False)
    assert sandbox.wait_for_notifications(10)

    synced = payhooks(database, sandbox, "sync", "--limit", "4")
    assert synced.returncode == 0, synced.stderr
    missed = {
        line.split()[1]
        for line in synced.stdout.splitlines()
        if line.startswith("missed_notification")
    }
    assert missed == dropped
    assert "Read 3 page(s), 10 transaction(s)." in synced.stdout
    reconciled = payhooks(database, sandbox, "reconcile", "--format", "csv", "--fail-on-mismatch")
    assert reconciled.returncode == 1
    assert flagged(reconciled.stdout) == dropped
    assert "3 payment(s) need attention (drift missed_notification 3)" in reconciled.stderr

    for notification in sandbox.notifications():
        if notification.external_identifier in dropped:
            sandbox.resend(notification.id)
    assert sandbox.wait_for_notifications(10)

    synced = payhooks(database, sandbox, "sync", "--limit", "4", "--fail-on-drift")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "No drift" in synced.stdout
    reconciled = payhooks(database, sandbox, "reconcile", "--format", "csv", "--fail-on-mismatch")
    assert reconciled.returncode == 0, reconciled.stderr
    assert flagged(reconciled.stdout) == set()


def _peak_sync_bytes(count: int, tmp_path: Path) -> int:
    """Peak Python memory of one sync over ``count`` paid transactions (seeded before)."""
    with (
        SandboxServer.start() as sandbox,
        Ledger(tmp_path / f"{count}.db", synchronous="NORMAL") as ledger,
    ):
        body = wire(card_transaction("seed"))
        for n in range(count):
            body["external_identifier"] = f"order-{n}"
            sandbox.sandbox.create_transaction(MERCHANT, body)
        with ServiceClient(
            sandbox.url, access_token=sandbox.issue_token(), merchant_account_id=MERCHANT
        ) as client:
            tracemalloc.start()
            try:
                report = sync_transactions(client, ledger, limit=100)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    assert report.items == count
    assert report.drift == {"unexpected": count}
    return peak


def test_a_sync_of_20_000_transactions_stays_within_the_memory_of_a_small_one(
    tmp_path: Path,
) -> None:
    small = _peak_sync_bytes(1_000, tmp_path)
    large = _peak_sync_bytes(20_000, tmp_path)
    # 20 times the items, not 20 times the memory (keeping every item would take tens of MB):
    # what grows is the client's cursor set.
    assert large < small + 4 * 1024 * 1024, (small, large)
