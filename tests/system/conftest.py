"""System tests: real servers in subprocesses, load, the benches and the walks through the docs.

Every test in this folder carries the ``system`` marker, so ``pytest -m "not system"`` is the
quick inner loop; CI runs everything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.system)
