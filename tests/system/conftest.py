"""System tests: real servers in subprocesses, load, the benches and the walks through the docs.

Every test in this folder carries the ``system`` marker, so ``pytest -m "not system"`` is the
quick inner loop; CI runs everything.

CI runs the suite in parallel (``pytest -n auto``, ``--dist loadgroup``). Every server here
takes a port from its worker's own slice (:func:`tests.support.processes.free_port`) and works
in the test's own ``tmp_path``, so most tests run side by side with anything. The modules in
:data:`GROUPS` do not: each group's tests run one after another on one worker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent

#: Test modules whose tests must not run at the same time as each other, by xdist group.
GROUPS = {
    # Load and latency: gunicorn's 4 workers, 8 senders, killed workers; slow clients that
    # must not stall notifications for LATE seconds. Two of them at once on a small machine
    # would measure each other.
    "test_load.py": "heavy",
    "test_load_postgresql.py": "heavy",
    "test_deployment.py": "heavy",
    # The benches' smoke runs: gunicorn, nginx and slow clients again, timed.
    "test_bench_smoke.py": "heavy",
    # `python -m build` of this checkout writes its egg-info and build/ in the source tree; the
    # module-scoped wheel and sdist are built once, on one worker.
    "test_packaging.py": "packaging",
    # One Chromium for the module (a module-scoped fixture), not one per worker.
    "test_browser.py": "browser",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path).resolve()
        if _HERE in path.parents:
            item.add_marker(pytest.mark.system)
            group = GROUPS.get(path.name)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))
