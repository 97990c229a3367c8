"""``Ledger.story``: everything the ledger knows about one payment, as the rows of the tables
that name it, in time order by ``timeline()``.

The whole story is lived through the real paths (:mod:`tests.support.stories`): signed
notifications posted to the app, the signed return URL, the service's records through the
ledger. The ordering rules are checked with the storage tests' fixed clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.storage import (
    CreationState,
    DeliveryStatus,
    DriftKind,
    Ledger,
    ListedTransaction,
    PaymentKind,
    PaymentState,
    ReconciliationState,
)
from payhooks.storage.reads import Entry, EntryKind, PaymentStory
from payhooks.storage.rows import ReturnKind
from tests.support.app import BodyFactory, SignFunction
from tests.support.factories import T0, FixedClock, make_outcome, record
from tests.support.stories import RECEIVER_ERROR, STORY, live_the_story


@pytest.fixture
def shop_ledger(database: Path | str) -> Iterator[Ledger]:
    """A ledger on the app's database with the system clock, as the app's own."""
    with Ledger(database) as opened:
        yield opened


@pytest.fixture
def story(
    app: Flask,
    client: FlaskClient,
    shop_ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
) -> PaymentStory:
    live_the_story(app, client, shop_ledger, make_body, sign)
    told = shop_ledger.story("order-1")
    assert told is not None
    return told


def _of(story: PaymentStory, kind: EntryKind) -> list[Any]:
    return story.of(kind)


def _entries(story: PaymentStory, kind: EntryKind) -> list[Entry]:
    return [entry for entry in story.timeline() if entry.kind is kind]


def test_the_events_come_oldest_first_kind_by_kind(story: PaymentStory) -> None:
    assert [str(event.kind) for event in story.timeline()] == list(STORY)
    times = [event.at for event in story.timeline()]
    assert times == sorted(times)
    assert all(moment.utcoffset() == timedelta(0) for moment in times)


def test_the_registration_tells_what_was_expected(story: PaymentStory) -> None:
    (registration,) = _of(story, EntryKind.REGISTRATION)

    assert registration["payment_kind"] is PaymentKind.TRANSACTION
    assert (registration["amount_minor"], registration["currency"]) == (2500, "CNY")
    assert registration["amount"] == Decimal("25.00")
    assert registration["plan_amount"] is None
    assert registration["description"] == "Two teas"
    assert registration["metadata"] == {"table": 7}


def test_creation_attempts_tell_their_state_status_error_and_service_id(
    story: PaymentStory,
) -> None:
    attempts = _of(story, EntryKind.CREATION_ATTEMPT)

    told = [
        (a["state"], a["http_status"], a["error_code"], a["error"], a["service_id"])
        for a in attempts
    ]
    assert told == [
        (CreationState.UNCERTAIN, 503, "service_unavailable", "try later", None),
        (CreationState.CREATED, 201, None, None, "ll-1"),
    ]
    begun = _entries(story, EntryKind.CREATION_ATTEMPT)
    assert [entry.row for entry in begun] == attempts
    assert all(e.row["finished_at"] is not None and e.row["finished_at"] >= e.at for e in begun)


@pytest.mark.parametrize(
    ("position", "status", "dedupe_key", "attempts", "error_contains", "has_outcome"),
    [
        (0, DeliveryStatus.PROCESSED, "msg-paid", 2, None, True),
        (1, DeliveryStatus.DUPLICATE, "msg-again", 1, None, True),
        (2, DeliveryStatus.CONFLICTING_OUTCOME, "msg-more", 1, "amount", True),
        (3, DeliveryStatus.INVALID_PAYLOAD, "msg-bad", 1, "payment_amount", False),
    ],
    ids=["processed", "duplicate", "conflicting", "refused"],
)
def test_every_delivery_naming_the_payment_tells_its_status_attempts_and_error(
    story: PaymentStory,
    position: int,
    status: DeliveryStatus,
    dedupe_key: str,
    attempts: int,
    error_contains: str | None,
    has_outcome: bool,
) -> None:
    delivery = _of(story, EntryKind.DELIVERY)[position]
    (outcome,) = _of(story, EntryKind.OUTCOME)

    assert (delivery["status"], delivery["dedupe_key"], delivery["attempts"]) == (
        status,
        dedupe_key,
        attempts,
    )
    if error_contains is None:
        assert delivery["error"] is None
    else:
        assert error_contains in (delivery["error"] or "")
    assert delivery["outcome_id"] == (outcome["outcome_id"] if has_outcome else None)


def test_the_outcome_tells_its_transaction_status_amount_and_times(story: PaymentStory) -> None:
    (outcome,) = _of(story, EntryKind.OUTCOME)
    first_delivery = _of(story, EntryKind.DELIVERY)[0]

    assert outcome["delivery_id"] == first_delivery["delivery_id"]
    assert (outcome["transaction_id"], outcome["payment_status"], outcome["state"]) == (
        "ll-1",
        "PS",
        PaymentState.SUCCEEDED,
    )
    assert (outcome["amount"], outcome["amount_minor"], outcome["currency"]) == (
        Decimal("25.00"),
        2500,
        "CNY",
    )
    assert outcome["paid_at"] == T0  # the body's payment_time, 2026-11-21 12:00 (UTC)


def test_signals_tell_when_they_were_sent_and_what_a_receiver_raised(
    story: PaymentStory,
) -> None:
    sent = {signal["signal"]: signal for signal in _of(story, EntryKind.SIGNAL)}
    (outcome,) = _of(story, EntryKind.OUTCOME)

    assert set(sent) == {"notification-received", "payment-succeeded"}
    assert all(s["outcome_id"] == outcome["outcome_id"] for s in sent.values())
    assert all(s["claimed_until"] is None and s["attempts"] == 1 for s in sent.values())
    assert sent["notification-received"]["sent_at"] is not None
    assert sent["notification-received"]["error"] is None
    # The receiver raised: still owed, with its next round due.
    assert sent["payment-succeeded"]["sent_at"] is None
    assert sent["payment-succeeded"]["next_attempt_at"] is not None
    assert RECEIVER_ERROR in (sent["payment-succeeded"]["error"] or "")
    assert sent["payment-succeeded"]["reconciliation"] == "paid"
    assert RECEIVER_ERROR in (_of(story, EntryKind.DELIVERY)[0]["signal_error"] or "")


def test_a_return_tells_its_kind_and_the_browsers_result_code(story: PaymentStory) -> None:
    (visit,) = _of(story, EntryKind.RETURN)

    assert (visit["return_kind"], visit["result_code"]) == (ReturnKind.RETURN, "Authorised")


def test_a_sync_sighting_tells_the_listed_status_and_its_drift(story: PaymentStory) -> None:
    (sighting,) = _of(story, EntryKind.SYNC_SIGHTING)

    assert (sighting["transaction_id"], sighting["status"], sighting["state"]) == (
        "ll-1",
        "RS",
        PaymentState.REFUNDED,
    )
    assert sighting["amount"] == Decimal("25.00")
    assert sighting["drift"] is DriftKind.MISSED_NOTIFICATION
    (seen,) = _entries(story, EntryKind.SYNC_SIGHTING)
    assert sighting["last_seen_at"] >= seen.at


def test_the_story_carries_the_payments_reconciliation_row(
    story: PaymentStory, shop_ledger: Ledger
) -> None:
    assert story.row == shop_ledger.row("order-1")
    assert story.row is not None
    assert story.row.state is ReconciliationState.PAID
    assert (story.row.refused_deliveries, story.row.conflicting_deliveries) == (1, 1)
    assert story.row.drift is DriftKind.MISSED_NOTIFICATION


def test_a_story_and_its_entries_are_frozen(story: PaymentStory) -> None:
    with pytest.raises(AttributeError):
        story.timeline()[0].at = T0  # type: ignore[misc]
    with pytest.raises(TypeError):
        story.entries[0].row["amount_minor"] = 1  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        story.row = None  # type: ignore[misc]


# -- with the fixed clock ------------------------------------------------------------------------


def test_an_identifier_nothing_names_has_no_story(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, make_outcome())
    ledger.receiver.record_return("order-1", "return", None)

    assert ledger.story("order-2") is None
    assert ledger.story("order-") is None


def _events_at_one_moment(ledger: Ledger) -> tuple[Entry, ...]:
    ledger.expect_transaction("order-1", 2500, "CNY")
    record(ledger, make_outcome())
    ledger.receiver.record_return("order-1", "cancel", None)
    told = ledger.story("order-1")
    assert told is not None
    return told.timeline()


def test_events_at_one_moment_come_in_kind_order(ledger: Ledger) -> None:
    events = _events_at_one_moment(ledger)

    assert {event.at for event in events} == {T0}
    assert [event.kind for event in events] == [
        EntryKind.REGISTRATION,
        EntryKind.DELIVERY,
        EntryKind.OUTCOME,
        EntryKind.SIGNAL,
        EntryKind.SIGNAL,
        EntryKind.RETURN,
    ]
    signals = [event.row for event in events if event.kind is EntryKind.SIGNAL]
    assert [s["signal"] for s in signals] == ["notification-received", "payment-succeeded"]


def test_an_earlier_event_comes_first_whatever_its_kind(ledger: Ledger, clock: FixedClock) -> None:
    ledger.receiver.record_return("order-1", "return", "Authorised")
    clock.advance(60)
    ledger.expect_transaction("order-1", 2500, "CNY")

    told = ledger.story("order-1")

    assert told is not None
    assert [event.kind for event in told.timeline()] == [EntryKind.RETURN, EntryKind.REGISTRATION]


@pytest.mark.parametrize(
    ("named_by", "kind", "row_state"),
    [
        ("return", EntryKind.RETURN, None),
        ("refused delivery", EntryKind.DELIVERY, None),
        ("sync", EntryKind.SYNC_SIGHTING, ReconciliationState.UNEXPECTED),
    ],
)
def test_an_identifier_only_one_record_names_has_a_story_of_that_record(
    ledger: Ledger, named_by: str, kind: EntryKind, row_state: ReconciliationState | None
) -> None:
    if named_by == "return":
        ledger.receiver.record_return("stray", "return", None)
    elif named_by == "refused delivery":
        delivery = ledger.receiver.record_delivery(dedupe_key="k", body=b"{}", headers={})
        ledger.receiver.mark_delivery(
            delivery.id, "invalid_payload", "no amount", external_identifier="stray"
        )
    else:
        run = ledger.service.begin_sync(max_age=timedelta(hours=1))
        listed = ListedTransaction("ll-9", "stray", "PS", PaymentState.SUCCEEDED, "CNY", 100)
        ledger.service.record_service_page(run.id, [listed], None)

    told = ledger.story("stray")

    assert told is not None
    assert [event.kind for event in told.timeline()] == [kind]
    assert (None if told.row is None else told.row.state) == row_state


@pytest.mark.parametrize(
    ("currency", "amount_minor", "amount"),
    [
        ("CNY", 2500, Decimal("25.00")),
        ("JPY", 2500, Decimal(2500)),
        ("KWD", 2500, Decimal("2.500")),
    ],
)
def test_amounts_are_exact_in_the_currencys_minor_units(
    ledger: Ledger, currency: str, amount_minor: int, amount: Decimal
) -> None:
    ledger.expect_subscription("sub-1", amount_minor, currency, amount_minor * 2)
    record(
        ledger,
        make_outcome(
            external_identifier="sub-1",
            amount=amount,
            amount_minor=amount_minor,
            currency=currency,
        ),
    )

    told = ledger.story("sub-1")

    assert told is not None
    first, _, recorded, *_ = told.timeline()
    assert (first.kind, recorded.kind) == (EntryKind.REGISTRATION, EntryKind.OUTCOME)
    registration, outcome = first.row, recorded.row
    assert (registration["amount"], registration["plan_amount"]) == (amount, amount * 2)
    assert str(registration["amount"]) == str(amount)
    assert outcome["amount"] == amount
    assert isinstance(outcome["amount"], Decimal)


def test_a_signal_held_by_a_sender_tells_its_lease(ledger: Ledger) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    recorded = record(ledger, make_outcome())
    ledger.signals.claim([recorded.outcome_id], lease=timedelta(minutes=5))

    told = ledger.story("order-1")

    assert told is not None
    held = told.of(EntryKind.SIGNAL)
    assert held
    assert all(s["sent_at"] is None for s in held)
    assert all(s["claimed_until"] == T0 + timedelta(minutes=5) for s in held)
