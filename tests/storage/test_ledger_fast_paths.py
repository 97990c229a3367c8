"""What the ledger hands back without reading it again must be what it stored."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.storage import Ledger
from payhooks.storage.errors import UnknownDeliveryError
from tests.support.factories import make_outcome

_UNIQUE = itertools.count()

header_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=20)
header_values = st.text(max_size=40)
aware_times = st.datetimes(
    min_value=datetime(2000, 1, 2), max_value=datetime(2099, 12, 30)
).flatmap(
    lambda moment: st.integers(min_value=-14 * 60, max_value=14 * 60).map(
        lambda minutes: moment.replace(tzinfo=timezone(timedelta(minutes=minutes)))
    )
)


@pytest.fixture
def ledger(database: Path | str) -> Iterator[Ledger]:
    with Ledger(database, synchronous="NORMAL") as opened:
        yield opened


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    headers=st.dictionaries(header_names, header_values, max_size=5),
    body=st.binary(max_size=300),
    received_at=st.none() | aware_times,
    key=st.text(
        st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), min_size=1, max_size=30
    ),
)
def test_a_new_delivery_handed_back_is_the_one_stored(
    ledger: Ledger,
    headers: dict[str, str],
    body: bytes,
    received_at: datetime | None,
    key: str,
) -> None:
    # The ledger lives across examples: each example's key is made unique.
    new = ledger.receiver.record_delivery(
        dedupe_key=f"{key}-{next(_UNIQUE)}", body=body, headers=headers, received_at=received_at
    )

    assert new.is_new
    assert dataclasses.replace(new, is_new=False) == ledger.receiver.delivery(new.id)
    assert new.received_at.utcoffset() == timedelta(0)


def test_a_delivery_under_a_reused_key_handed_back_is_the_one_stored(ledger: Ledger) -> None:
    first = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"first", headers={})

    reused = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"other", headers={"a": "b"})

    assert reused.is_new
    assert reused.reused_key_of == first.id
    assert dataclasses.replace(reused, is_new=False) == ledger.receiver.delivery(reused.id)


def test_a_known_delivery_is_handed_back_as_stored_not_as_sent(ledger: Ledger) -> None:
    first = ledger.receiver.record_delivery(
        dedupe_key="msg_1",
        body=b"{}",
        headers={"timezone": "+08:00"},
        received_at=datetime(2026, 1, 1, tzinfo=UTC),
    )

    again = ledger.receiver.record_delivery(
        dedupe_key="msg_1", body=b"{}", headers={"timezone": "UTC"}
    )

    assert not again.is_new
    assert (again.id, again.attempts, again.headers) == (first.id, 2, {"timezone": "+08:00"})
    assert again.received_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert again == ledger.receiver.delivery(first.id)


def test_a_stored_outcome_recorded_for_an_unknown_delivery_changes_nothing(
    ledger: Ledger,
) -> None:
    delivery = ledger.receiver.record_delivery(dedupe_key="msg_1", body=b"{}", headers={})
    ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id)
    before = ledger.receiver.delivery(delivery.id)

    with pytest.raises(UnknownDeliveryError) as exc_info:
        ledger.receiver.record_outcome(make_outcome(), delivery_id=delivery.id + 100)

    assert exc_info.value.delivery_id == delivery.id + 100
    assert ledger.receiver.delivery(delivery.id) == before
    assert ledger.receiver.delivery(delivery.id + 100) is None
