"""The audit log's page: who did what from the console, newest first, in pages; above it, the
refused actions, counted per person, action, code and minute.

Every role reads it: support can see what an operator did and why, and nobody can change it
(the table refuses updates, and deletes but for what ``payhooks prune`` archived).
"""

from __future__ import annotations

from typing import Final

from flask import render_template, request

from payhooks.console.access import console_ledger
from payhooks.console.query import parse_log_query

__all__ = ["REFUSALS_SHOWN", "audit"]

#: How many refusal counts (rows of a minute) the page shows: the newest.
REFUSALS_SHOWN: Final = 50


def audit() -> str:
    """``GET /audit``: a page of the audit log; ``before`` and ``limit`` as the logs take them.
    The first page shows the newest refusal counts above the entries (later pages only the
    entries: the counts are not paged with them)."""
    query = parse_log_query(request.args, deliveries=False)
    book = console_ledger().console
    page = book.audit_log(before_id=query.before, limit=query.limit)
    refusals = book.refusals(limit=REFUSALS_SHOWN) if query.before is None else ()
    return render_template("payhooks_console/audit.html", query=query, page=page, refusals=refusals)
