"""A sender claims one outcome at a time, just before running it: a sweep that takes longer
than the lease never leaves the rest of its outcomes to a second sender that runs them at the
same time (found by bench.owed's targeted kills; a batch claimed at once did)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from payhooks.receiver import signals
from payhooks.receiver.pipeline import sweep_unclaimed
from payhooks.storage import Ledger
from tests.support.app import AppFactory, BodyFactory, SignFunction

#: Leases under concurrent senders, on each engine (tests/conftest.py: engines are opt-in here).
pytestmark = pytest.mark.both_engines


def test_a_sweep_whose_claim_outlives_its_lease_never_runs_an_outcome_twice_at_once(
    make_app: AppFactory, make_body: BodyFactory, sign: SignFunction, database: Path | str
) -> None:
    app: Flask = make_app(PAYHOOKS_SIGNALS_LEASE_SECONDS=1)
    runs: list[tuple[int, float, float]] = []

    def ship(sender: Flask, *, outcome_id: int, **extra: Any) -> None:
        start = time.monotonic()
        time.sleep(0.4)  # each receiver far shorter than the 1 s lease
        runs.append((outcome_id, start, time.monotonic()))

    signals.payment_succeeded.connect(ship, sender=app)
    client = app.test_client()
    for n in range(6):  # paid before being registered: unexpected, nothing to ship yet
        body = make_body("wallet", external_identifier=f"order-{n}", transaction_id=f"ll-{n}")
        answer = client.post("/payhooks/notifications", data=body, headers=sign(body))
        assert answer.status_code == 200
    with Ledger(database) as ledger:
        for n in range(6):  # the registrations owe payment_succeeded, claimed by nobody
            ledger.expect_transaction(f"order-{n}", 2500, "CNY")

    def first_sender() -> None:
        with Ledger(database) as own:
            sweep_unclaimed(app, own, lease=timedelta(seconds=1))  # claims all 6 at once

    first = threading.Thread(target=first_sender)
    first.start()
    time.sleep(1.3)  # the first sender is on its 4th outcome; its lease on all 6 has passed
    with Ledger(database) as ledger:
        sweep_unclaimed(app, ledger, lease=timedelta(seconds=1))  # another worker's timer
    first.join()

    by_outcome: dict[int, list[tuple[float, float]]] = {}
    for outcome_id, start, end in runs:
        by_outcome.setdefault(outcome_id, []).append((start, end))
    assert {outcome: len(spans) for outcome, spans in by_outcome.items() if len(spans) > 1} == {}
