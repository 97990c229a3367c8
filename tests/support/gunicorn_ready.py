"""A gunicorn configuration file that logs when a worker has loaded the app.

gunicorn logs "Booting worker" before the worker imports the app, so a request sent then waits
for the import (a second or more on a loaded machine) and a test's timeout measures the machine,
not payhooks. :class:`tests.support.gunicorn_server.GunicornServer` passes this file with ``-c``
and waits for one :data:`READY` line per worker before it hands the server to a test.
"""

from __future__ import annotations

from typing import Any

#: The line each worker logs once its app is loaded.
READY = "payhooks-test: worker loaded the app"


def post_worker_init(worker: Any) -> None:
    """gunicorn's hook, called in the worker just after it loaded the app."""
    worker.log.info("%s (pid %s)", READY, worker.pid)
