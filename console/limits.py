"""Every page's reads under one time limit (datasette's way), and the counts that may stop.

A console page is a person's question; the receiver's workers (and, on PostgreSQL, the
connections) are the notifications'. So each ``GET`` of a page runs its reads under
:meth:`payhooks.storage.Ledger.read_time_limit`, with the console's ``time_limit_ms`` (2000 by
default) for all of its reads together, begun when the guard lets the request in and ended
when it is torn down. A read that runs past it is stopped on the database:

- a page's own rows (one page of them: every list is capped) stop the page, answered by the
  blueprint as a 503 ``console_time_limit`` page that says so;
- a count or a total (the log's count, the finance page's tiles, chart and totals, the
  exceptions queue's counts) is read last, through :func:`counted`: when it stops, the page
  shows its rows and says "stopped counting after 2 s" where the figure would be.

The CSV export is not a page: it is written outside the request, from a cursor of its own. ``POST``
actions write, and writes are never limited.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Final, TypeVar

from flask import g, request

from payhooks.console.access import console_ledger, current_access
from payhooks.storage import ReadTimeLimitError

__all__ = [
    "DEFAULT_TIME_LIMIT_MS",
    "MAX_TIME_LIMIT_MS",
    "begin_time_limit",
    "counted",
    "end_time_limit",
    "limit_text",
    "stopped_counting",
]

#: How long a page's reads may take together, unless ``Console(time_limit_ms=...)`` says.
DEFAULT_TIME_LIMIT_MS: Final = 2000
#: The longest limit a console accepts: an hour (the ledger's own bound).
MAX_TIME_LIMIT_MS: Final = 3_600_000
#: Endpoints that are not pages: an export's download sends a file and reads no row.
_UNLIMITED: Final = frozenset({"payhooks_console.export_download"})

_T = TypeVar("_T")


def limit_text(limit_ms: int) -> str:
    """The limit as a page says it: ``2 s``, ``1.5 s``, ``250 ms``."""
    return f"{limit_ms} ms" if limit_ms < 1000 else f"{limit_ms / 1000:g} s"


def begin_time_limit() -> None:
    """Start the request's limit: for a ``GET`` (or ``HEAD``) of a page, on the ledger its
    reads use, until :func:`end_time_limit`."""
    if request.method not in ("GET", "HEAD") or request.endpoint in _UNLIMITED:
        return
    stack = ExitStack()
    stack.enter_context(console_ledger().read_time_limit(current_access().time_limit_ms))
    g.payhooks_console_limit = stack


def end_time_limit(_error: BaseException | None = None) -> None:
    """Lift the request's limit (the teardown: after the answer, whatever it was)."""
    stack: ExitStack | None = g.pop("payhooks_console_limit", None)
    if stack is not None:
        stack.close()


def counted(read: Callable[[], _T]) -> _T | None:
    """``read()``, or None when the request's limit stopped it (the page then says so)."""
    try:
        return read()
    except ReadTimeLimitError:
        g.payhooks_console_stopped = True
        return None


def stopped_counting() -> str | None:
    """``stopped counting after 2 s`` when a count of this request stopped; else None."""
    if not g.get("payhooks_console_stopped"):
        return None
    return f"stopped counting after {limit_text(current_access().time_limit_ms)}"
