"""``Ledger.console.count_refusal``: refused console actions counted per person, role, action,
code and minute, one row each, on each engine."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from payhooks.storage import Ledger
from tests.support.factories import FixedClock


def _refuse(ledger: Ledger, **changes: Any) -> None:
    values: dict[str, Any] = {
        "who": "vic@example.com",
        "role": "viewer",
        "action": "reprocess",
        "code": "console_forbidden_action",
        "target": "delivery 1",
    }
    ledger.console.count_refusal(**(values | changes))


def test_refusals_in_one_minute_are_one_row_with_their_count(
    ledger: Ledger, clock: FixedClock
) -> None:
    clock.now = datetime(2026, 11, 21, 10, 41, 0, tzinfo=UTC)
    for number in range(200):
        clock.advance(0.25)
        _refuse(ledger, target=f"delivery {number}")

    (refusal,) = ledger.console.refusals()

    assert refusal.times == 200
    assert refusal.minute == datetime(2026, 11, 21, 10, 41, tzinfo=UTC)
    assert refusal.last_at == datetime(2026, 11, 21, 10, 41, 50, tzinfo=UTC)
    assert refusal.first_target == "delivery 0"
    assert ledger.console.audit_log().rows == ()


def test_each_minute_person_action_and_code_has_its_own_row_newest_first(
    ledger: Ledger, clock: FixedClock
) -> None:
    clock.now = datetime(2026, 11, 21, 10, 41, 59, tzinfo=UTC)
    _refuse(ledger)
    _refuse(ledger, code="console_csrf_failed")
    _refuse(ledger, action="send_signals")
    _refuse(ledger, who="eve@example.com")
    clock.advance(1)  # the next minute
    _refuse(ledger)
    _refuse(ledger)

    rows = ledger.console.refusals()

    assert [(r.minute.minute, r.who, r.action, r.code, r.times) for r in rows] == [
        (42, "vic@example.com", "reprocess", "console_forbidden_action", 2),
        (41, "eve@example.com", "reprocess", "console_forbidden_action", 1),
        (41, "vic@example.com", "send_signals", "console_forbidden_action", 1),
        (41, "vic@example.com", "reprocess", "console_csrf_failed", 1),
        (41, "vic@example.com", "reprocess", "console_forbidden_action", 1),
    ]
    assert len(ledger.console.refusals(limit=2)) == 2


@pytest.mark.parametrize(
    ("changes", "argument"),
    [
        ({"who": ""}, "who"),
        ({"code": "c" * 101}, "code"),
        ({"action": "a\x00b"}, "action"),
        ({"target": "t" * 101}, "target"),
        ({"target": ""}, "target"),
    ],
)
def test_a_bad_refusal_is_refused_naming_its_argument(
    ledger: Ledger, changes: dict[str, Any], argument: str
) -> None:
    with pytest.raises(ValueError, match=argument):
        _refuse(ledger, **changes)
    assert ledger.console.refusals() == ()
