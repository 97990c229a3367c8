"""``Ledger.console``: the append-only audit log and the exceptions' reviews, on each engine."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from payhooks.storage import Ledger
from payhooks.storage.reads import ReviewStatus
from payhooks.storage.reads.exception_reviews import ExceptionReview
from tests.support.factories import FixedClock


def _entry(ledger: Ledger, **changes: Any) -> int:
    values: dict[str, Any] = {
        "who": "ana@example.com",
        "role": "operator",
        "action": "reprocess",
        "result": "processed",
        "target": "delivery 1",
    }
    return ledger.console.audit(**(values | changes))


def test_an_entry_reads_back_whole(ledger: Ledger, clock: FixedClock) -> None:
    entry_id = _entry(ledger, note="the map was fixed", detail={"count": 3, "status": ["x"]})

    (entry,) = ledger.console.audit_log().rows

    assert entry.id == entry_id
    assert entry.at == clock()
    assert (entry.who, entry.role, entry.action, entry.target) == (
        "ana@example.com",
        "operator",
        "reprocess",
        "delivery 1",
    )
    assert (entry.note, entry.result) == ("the map was fixed", "processed")
    assert entry.detail == {"count": 3, "status": ["x"]}


def test_the_log_pages_newest_first_by_cursor(ledger: Ledger, clock: FixedClock) -> None:
    ids = []
    for number in range(5):
        clock.advance(1)
        ids.append(_entry(ledger, target=f"delivery {number}"))

    first = ledger.console.audit_log(limit=2)
    second = ledger.console.audit_log(before_id=first.next_before_id, limit=2)
    last = ledger.console.audit_log(before_id=second.next_before_id, limit=2)

    assert [row.id for row in first.rows] == ids[:-3:-1]
    assert [row.id for row in second.rows] == ids[2:0:-1]
    assert [row.id for row in last.rows] == ids[:1]
    assert last.next_before_id is None


def _execute(database: Path | str, statement: str) -> None:
    if isinstance(database, Path):
        with closing(sqlite3.connect(database)) as lite, lite:
            lite.execute(statement)
        return
    with psycopg.connect(database) as server:
        server.execute(statement)


@pytest.mark.parametrize(
    "statement",
    ["UPDATE audit_log SET note = 'rewritten'", "DELETE FROM audit_log"],
    ids=["update", "delete"],
)
def test_the_audit_log_refuses_updates_and_deletes(
    ledger: Ledger, database: Path | str, statement: str
) -> None:
    """Straight through the driver, as a person with the database's password would."""
    _entry(ledger, note="as it was")

    with pytest.raises(Exception, match="append-only") as refused:
        _execute(database, statement)

    assert isinstance(refused.value, sqlite3.IntegrityError | psycopg.errors.RaiseException)

    (entry,) = ledger.console.audit_log().rows
    assert entry.note == "as it was"


@pytest.mark.postgresql
def test_postgresql_refuses_to_truncate_the_audit_log(postgres_url: str) -> None:
    with Ledger(postgres_url) as ledger:
        _entry(ledger)
    with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
        _execute(postgres_url, "TRUNCATE audit_log")
    with Ledger(postgres_url) as ledger:
        assert len(ledger.console.audit_log().rows) == 1


@pytest.mark.parametrize(
    ("changes", "argument"),
    [
        ({"who": ""}, "who"),
        ({"who": "x" * 201}, "who"),
        ({"action": "a\x00b"}, "action"),
        ({"note": "n" * 1001}, "note"),
        ({"target": "t" * 401}, "target"),
        ({"target": "a\x00b"}, "target"),
        ({"target": ""}, "target"),
    ],
)
def test_a_bad_entry_is_refused_naming_its_argument(
    ledger: Ledger, changes: dict[str, Any], argument: str
) -> None:
    with pytest.raises(ValueError, match=argument):
        _entry(ledger, **changes)
    assert ledger.console.audit_log().rows == ()


def test_an_entry_written_in_a_transaction_that_fails_is_not_kept(ledger: Ledger) -> None:
    def fail_after_the_entry() -> None:
        with ledger.transaction():
            _entry(ledger)
            raise RuntimeError("the action failed after its entry")

    with pytest.raises(RuntimeError):
        fail_after_the_entry()

    assert ledger.console.audit_log().rows == ()


def test_a_review_is_kept_with_its_audit_entry(ledger: Ledger, clock: FixedClock) -> None:
    ledger.console.review(
        "order-1",
        "acknowledged",
        reviewed_state="amount_mismatch",
        who="ana@example.com",
        role="operator",
        note="asked the customer",
    )

    assert ledger.console.reviews() == {
        "order-1": ExceptionReview(
            "order-1",
            ReviewStatus.ACKNOWLEDGED,
            "amount_mismatch",
            "asked the customer",
            "ana@example.com",
            clock(),
        )
    }
    (entry,) = ledger.console.audit_log().rows
    assert (entry.action, entry.target, entry.result, entry.note) == (
        "review_exception",
        "order-1",
        "acknowledged",
        "asked the customer",
    )


def test_a_second_review_replaces_the_first(ledger: Ledger) -> None:
    for status in ("acknowledged", "resolved"):
        ledger.console.review(
            "order-1", status, reviewed_state="unexpected", who="bo", role="operator"
        )

    assert ledger.console.reviews()["order-1"].status is ReviewStatus.RESOLVED
    assert len(ledger.console.audit_log().rows) == 2


def test_an_unknown_review_status_is_refused(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="status"):
        ledger.console.review(
            "order-1", "forgotten", reviewed_state="unexpected", who="bo", role="operator"
        )
    assert ledger.console.reviews() == {}


@pytest.mark.parametrize(
    ("reviewed_state", "state_now", "shown"),
    [
        ("amount_mismatch", "amount_mismatch", ReviewStatus.RESOLVED),
        ("amount_mismatch", "currency_mismatch", ReviewStatus.OPEN),
    ],
)
def test_a_review_holds_only_while_the_state_it_was_made_in_does(
    reviewed_state: str, state_now: str, shown: ReviewStatus, clock: FixedClock
) -> None:
    review = ExceptionReview("o", ReviewStatus.RESOLVED, reviewed_state, None, "bo", clock())
    assert review.status_for(state_now) is shown


def test_a_targets_entries_read_back_newest_first_and_only_its_own(
    ledger: Ledger, clock: FixedClock
) -> None:
    mine = []
    for target in ("order-1", "order-10", "delivery 1", "order-1", None, "order-1"):
        clock.advance(1)
        entry_id = _entry(ledger, target=target)
        if target == "order-1":
            mine.append(entry_id)

    assert [entry.id for entry in ledger.console.audit_for("order-1")] == mine[::-1]
    assert [entry.id for entry in ledger.console.audit_for("order-1", limit=2)] == mine[:0:-1]
    assert ledger.console.audit_for("order-2") == ()


@pytest.mark.parametrize("limit", [0, 1001])
def test_a_targets_entries_refuse_a_limit_out_of_range(ledger: Ledger, limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        ledger.console.audit_for("order-1", limit=limit)


def test_one_payments_review_reads_back_or_none(ledger: Ledger, clock: FixedClock) -> None:
    ledger.console.review(
        "order-1", "resolved", reviewed_state="unexpected", who="bo", role="operator", note="ok"
    )

    assert ledger.console.review_of("order-1") == ExceptionReview(
        "order-1", ReviewStatus.RESOLVED, "unexpected", "ok", "bo", clock()
    )
    assert ledger.console.review_of("order-10") is None


def _view(ledger: Ledger, at: datetime, **changes: Any) -> int | None:
    values: dict[str, Any] = {
        "who": "ana@example.com",
        "role": "viewer",
        "action": "view_body",
        "result": "shown",
        "target": "delivery 1",
        "at": at,
    }
    return ledger.console.audit_once_an_hour(**(values | changes))


def test_a_view_is_recorded_once_per_person_record_and_hour(ledger: Ledger) -> None:
    hour = datetime(2026, 11, 21, 10, tzinfo=UTC)
    first = _view(ledger, hour + timedelta(minutes=5))

    again = [
        _view(ledger, hour + timedelta(minutes=59, seconds=59, microseconds=999_999)),
        _view(ledger, hour),
    ]
    others = [
        _view(ledger, hour + timedelta(minutes=6), who="bo@example.com"),
        _view(ledger, hour + timedelta(minutes=6), target="delivery 2"),
        _view(ledger, hour + timedelta(minutes=6), action="download_raw"),
        _view(ledger, hour + timedelta(hours=1)),
        _view(ledger, hour - timedelta(microseconds=1)),
    ]

    assert first is not None
    assert again == [None, None]
    assert None not in others
    entries = ledger.console.audit_log().rows
    assert len(entries) == 6
    assert entries[-1].at == hour + timedelta(minutes=5)  # the view's time, not the ledger's


def test_a_view_at_a_naive_time_is_refused(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="at must be timezone-aware"):
        _view(ledger, datetime(2026, 11, 21, 10))
    assert ledger.console.audit_log().rows == ()
