"""The sync's status map: checked before anything is asked, unknown strings kept as unknown."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from payhooks.service.sync import DEFAULT_SYNC_STATUS_MAP, check_status_map
from payhooks.service.sync.status_map import state_for
from payhooks.storage import PaymentState


@pytest.mark.parametrize(
    ("status_map", "message"),
    [
        ({}, "non-empty mapping"),
        ({"": "succeeded"}, "non-empty string"),
        ({"paid": "settled"}, "'paid' must map"),
        ({"paid": "unknown"}, "'paid' must map"),
    ],
)
def test_a_bad_status_map_is_refused_before_anything_is_asked(
    status_map: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        check_status_map(status_map)


@given(st.text(min_size=1).filter(lambda s: s not in DEFAULT_SYNC_STATUS_MAP))
def test_any_string_the_map_lacks_is_unknown_never_a_guess(status: str) -> None:
    assert state_for(DEFAULT_SYNC_STATUS_MAP, status) is PaymentState.UNKNOWN


def test_the_default_map_knows_every_string_the_sandbox_lists() -> None:
    assert {"processing", "succeeded", "failed", "cancelled"} <= set(DEFAULT_SYNC_STATUS_MAP)
    assert PaymentState.UNKNOWN not in DEFAULT_SYNC_STATUS_MAP.values()
