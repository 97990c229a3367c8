"""Which tests must not run side by side when the suite runs in parallel (``pytest -n auto``),
and the pytest-xdist scheduler that keeps each such group on one worker.

Every server the tests start takes a port from its worker's own slice
(:func:`tests.support.processes.free_port`) and works in the test's own ``tmp_path``; each
worker has its own PostgreSQL server. So most tests run side by side with anything. The
modules in :data:`GROUPS` do not: a group's tests run one after another, on one worker, while
the other workers run everything else.

The groups are given here by module, and read from the test ids by :class:`GroupedScheduling`
in the controller (``tests/conftest.py`` makes it the scheduler of ``--dist loadgroup``),
rather than by ``xdist_group`` markers: pytest-xdist 3.8 reads those by renaming each item's
node id, which pytest 9.2 no longer lets it do, so with pytest 9.2 the markers are ignored.
Markers still work where they do: :meth:`GroupedScheduling._split_scope` asks xdist first.
"""

from __future__ import annotations

from typing import Any

#: Test modules (their path, as in a test id) whose tests must not run at the same time as
#: each other's, by group.
GROUPS = {
    # Load and latency: gunicorn's 4 workers, 8 senders, killed workers; slow clients that must
    # not stall notifications for LATE seconds; the benches' own gunicorn, nginx and slow
    # clients. Two of them at once on a small machine would measure each other.
    "tests/system/test_load.py": "heavy",
    "tests/system/test_load_postgresql.py": "heavy",
    "tests/system/test_deployment.py": "heavy",
    "tests/system/test_bench_smoke.py": "heavy",
    "tests/system/test_signals_owed.py": "heavy",
    # `python -m build` of this checkout writes its egg-info in the source tree; the
    # module-scoped wheel and sdist are built once, on one worker.
    "tests/system/test_packaging.py": "packaging",
    # One Chromium for the module (a module-scoped fixture), not one per worker.
    "tests/system/test_browser.py": "browser",
}


def group_of(nodeid: str) -> str | None:
    """The group of the test ``nodeid`` (``tests/system/test_load.py::test_x[...]``), if any."""
    return GROUPS.get(nodeid.split("::", 1)[0])


def make_scheduler(config: Any, log: Any) -> Any:
    """pytest-xdist's ``loadgroup`` scheduler, with :data:`GROUPS` as groups too."""
    from xdist.scheduler import LoadGroupScheduling

    class GroupedScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """``--dist loadgroup``: each test is a unit of its own, but a group's tests are one
        unit, sent to one worker (the biggest units first, so a long group starts early)."""

        def _split_scope(self, nodeid: str) -> str:
            group = group_of(nodeid)
            if group is not None:
                return f"group:{group}"
            scope: str = super()._split_scope(nodeid)
            return scope

    return GroupedScheduling(config, log)
