"""The delivery log and the refused requests: newest first, filtered by the URL, in pages.

Each page reads one page of rows and then the count for the same filter (which stops at the
console's time limit: :mod:`.limits`); the "Older" link carries
the cursor (``before``), so rows that arrive meanwhile never shift a page.
The delivery log (the console's home) also reads the ledger's vitals once, at the console's
clock, for the health strip on top (``_health.html``); a stored time the ledger cannot read
(:class:`~payhooks.storage.UnreadableRowError`, a row changed outside payhooks) shows the
strip as unreadable, naming the column, and the log below it as usual.
"""

from __future__ import annotations

from flask import render_template, request

from payhooks.console.access import console_ledger, current_access
from payhooks.console.limits import counted, limit_text
from payhooks.console.query import WINDOWS, parse_log_query
from payhooks.storage import DeliveryStatus, ReadTimeLimitError, UnreadableRowError
from payhooks.storage.reads import DeliveryErrorCode, Vitals

__all__ = ["deliveries", "refused"]


def deliveries() -> str:
    """``GET /deliveries``: the delivery log."""
    query = parse_log_query(request.args)
    now = current_access().clock()
    wanted = query.delivery_filter(now)
    records = console_ledger().receiver
    page = records.delivery_log(wanted, before_id=query.before, limit=query.limit)
    vitals: Vitals | None = None
    unreadable = None
    try:
        vitals = console_ledger().vitals(now)
    except UnreadableRowError as err:
        unreadable = err.message
    except ReadTimeLimitError as err:
        unreadable = f"They stopped after {limit_text(err.limit_ms)}, the console's time limit."
    return render_template(
        "payhooks_console/deliveries.html",
        query=query,
        page=page,
        count=counted(lambda: records.count_deliveries(wanted)),
        statuses=list(DeliveryStatus),
        errors=list(DeliveryErrorCode),
        windows=WINDOWS,
        now=now,
        vitals=vitals,
        unreadable=unreadable,
    )


def refused() -> str:
    """``GET /deliveries/refused``: requests refused before they were stored (a signature that
    did not hold), with their reason."""
    query = parse_log_query(request.args, deliveries=False)
    now = current_access().clock()
    since = query.since(now)
    records = console_ledger().receiver
    page = records.rejected_log(since=since, before_id=query.before, limit=query.limit)
    return render_template(
        "payhooks_console/refused.html",
        query=query,
        page=page,
        count=counted(lambda: records.count_rejected(since=since)),
        windows=WINDOWS,
        now=now,
    )
