"""How stored times are read back: only what ``to_text`` writes, anything else an
``UnreadableRowError`` rather than a ``ValueError`` or a naive time far from its row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from payhooks.storage import UnreadableRowError
from payhooks.storage.times import from_text, to_text


@pytest.mark.parametrize(
    "moment",
    [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(2026, 11, 20, 10, 0, 0, 500, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 11, 20, 18, 0, tzinfo=timezone(timedelta(hours=8))),
    ],
)
def test_every_time_to_text_writes_reads_back_as_the_same_aware_time(moment: datetime) -> None:
    assert from_text(to_text(moment)) == moment


@pytest.mark.parametrize(
    "text", ["yesterday", "", "2026-11-20", "2026-11-20T10:00:00", "2026-13-01T00:00:00+00:00"]
)
def test_a_time_to_text_never_writes_is_an_unreadable_row_error(text: str) -> None:
    with pytest.raises(UnreadableRowError) as exc_info:
        from_text(text, column="deliveries.received_at")

    assert exc_info.value.code == "unreadable_row"
    assert exc_info.value.column == "deliveries.received_at"
    assert exc_info.value.message.startswith(
        "The ledger holds a value in deliveries.received_at that is not a time"
    )
