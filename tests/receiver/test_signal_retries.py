"""The backoff of a signal whose receiver raised, and the timer that picks up due retries."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from flask import Flask
from hypothesis import given
from hypothesis import strategies as st

from payhooks.receiver import PayHooks
from payhooks.receiver.pipeline import RetryTimer, process_stored_delivery
from payhooks.receiver.settings import load_settings
from payhooks.receiver.signal_retries import JITTER, SignalRetries
from payhooks.receiver.web import RETRY_TIMER_KEY
from payhooks.receiver.web.signal_sending import send_due
from payhooks.storage import Ledger
from tests.support.app import TEST_SECRET, notification_body

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def test_the_default_backoff_doubles_from_a_minute_to_four_hours_over_about_a_day() -> None:
    retries = SignalRetries()

    delays = [retries.delay(done) for done in range(1, retries.attempts)]

    assert delays[:4] == [timedelta(minutes=m) for m in (1, 2, 4, 8)]
    assert max(delays) == timedelta(hours=4)
    assert timedelta(hours=20) <= retries.total <= timedelta(hours=28)


@given(
    first=st.integers(1, 3600),
    longest_factor=st.integers(1, 100),
    attempts=st.integers(1, 30),
    done=st.integers(1, 40),
)
def test_each_retry_is_due_within_its_jitter_and_the_last_round_parks(
    first: int, longest_factor: int, attempts: int, done: int
) -> None:
    retries = SignalRetries(
        first=timedelta(seconds=first),
        longest=timedelta(seconds=first * longest_factor),
        attempts=attempts,
    )

    due = retries.retry_at(done, NOW)

    if done >= attempts:
        assert due is None
    else:
        assert due is not None
        delay = retries.delay(done)
        assert delay * (1 - JITTER) <= due - NOW <= delay * (1 + JITTER)
        assert delay <= retries.longest


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS": 0}, "PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS"),
        (
            {"PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS": 600, "PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS": 60},
            "PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS",
        ),
        ({"PAYHOOKS_SIGNALS_MAX_ATTEMPTS": 0}, "PAYHOOKS_SIGNALS_MAX_ATTEMPTS"),
        ({"PAYHOOKS_SIGNALS_MAX_ATTEMPTS": True}, "PAYHOOKS_SIGNALS_MAX_ATTEMPTS"),
        ({"PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS": -1}, "PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS"),
    ],
)
def test_a_retry_setting_that_cannot_work_is_refused_naming_its_key(
    config: dict[str, object], key: str
) -> None:
    with pytest.raises(ValueError, match=key):
        load_settings(config, require_keys=False)


def test_the_retry_settings_are_loaded_into_the_backoff() -> None:
    settings = load_settings(
        {
            "PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS": 5,
            "PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS": 50,
            "PAYHOOKS_SIGNALS_MAX_ATTEMPTS": 3,
            "PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS": 0,
        },
        require_keys=False,
    )

    assert settings.signal_retries == SignalRetries(timedelta(seconds=5), timedelta(seconds=50), 3)
    assert settings.signals_retry_poll_seconds == 0


def test_the_timer_looks_every_interval_once_started_and_stops() -> None:
    looked = threading.Event()
    looks: list[int] = []

    def tick() -> None:
        looks.append(1)
        if len(looks) >= 2:
            looked.set()

    timer = RetryTimer(0.05, tick)
    before = timer.running
    timer.ensure_started()
    timer.ensure_started()  # once per process
    try:
        assert looked.wait(10)
        during = timer.running
    finally:
        timer.stop()

    assert (before, during, timer.running) == (False, True, False)


def test_a_look_that_raises_does_not_stop_the_timer() -> None:
    looked = threading.Event()
    calls: list[int] = []

    def tick() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the ledger is locked")
        looked.set()

    timer = RetryTimer(0.05, tick)
    timer.ensure_started()
    try:
        assert looked.wait(10)
    finally:
        timer.stop()


def test_a_timer_with_no_interval_never_starts() -> None:
    timer = RetryTimer(0, lambda: None)

    timer.ensure_started()

    assert not timer.running


def test_a_tick_that_says_its_app_is_gone_ends_the_thread() -> None:
    ticks: list[int] = []

    def app_gone() -> bool:
        ticks.append(1)
        return False

    timer = RetryTimer(0.02, app_gone)

    timer.ensure_started()
    deadline = time.monotonic() + 10
    while timer.running and time.monotonic() < deadline:
        time.sleep(0.01)

    assert ticks == [1]
    assert not timer.running


def test_the_timer_holds_no_strong_reference_to_its_app(tmp_path: Path) -> None:
    app = Flask("dropped", instance_path=str(tmp_path))
    app.config.update(PAYHOOKS_SECRETS=[TEST_SECRET], PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS=1)
    PayHooks(app)
    timer = app.extensions[RETRY_TIMER_KEY]
    gone = weakref.ref(app)
    timer.ensure_started()  # as a first request would outside test mode
    try:
        del app
        gc.collect()
        assert gone() is None
    finally:
        timer.stop()


def test_an_app_without_receivers_takes_no_owed_signal(tmp_path: Path) -> None:
    """A checkout app sharing the ledger must not record the shipping app's signals as sent
    with nothing run."""
    database = tmp_path / "ledger.db"
    checkout = Flask("checkout", instance_path=str(tmp_path))
    checkout.config.update(PAYHOOKS_SECRETS=[TEST_SECRET], PAYHOOKS_DATABASE=str(database))
    PayHooks(checkout)
    with Ledger(database) as ledger:
        ledger.receiver.record_delivery(dedupe_key="k", body=notification_body(), headers={})
        stored = ledger.receiver.delivery(1)
        assert stored is not None
        process_stored_delivery(ledger, stored, time_zone=UTC, status_map=None, lease=None)
        owed = len(ledger.signals.owed())

        send_due(checkout)

        assert owed == 2  # notification-received and payment-mismatch (unexpected)
        assert len(ledger.signals.owed()) == owed
