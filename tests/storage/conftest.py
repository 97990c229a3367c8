"""The storage tests' ledger: on each engine, with a clock the test moves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from payhooks.storage import Ledger
from tests.support.factories import FixedClock


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def ledger(database: Path | str, clock: FixedClock) -> Iterator[Ledger]:
    with Ledger(database, clock=clock) as opened:
        yield opened
