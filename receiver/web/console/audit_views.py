"""The audit log's page: who did what from the console, newest first, in pages.

Every role reads it: support can see what an operator did and why, and nobody can change it
(the table refuses updates and deletes).
"""

from __future__ import annotations

from flask import render_template, request

from payhooks.receiver.web.console.access import console_ledger
from payhooks.receiver.web.console.query import parse_log_query

__all__ = ["audit"]


def audit() -> str:
    """``GET /audit``: a page of the audit log; ``before`` and ``limit`` as the logs take them."""
    query = parse_log_query(request.args, deliveries=False)
    page = console_ledger().console.audit_log(before_id=query.before, limit=query.limit)
    return render_template("payhooks_console/audit.html", query=query, page=page)
