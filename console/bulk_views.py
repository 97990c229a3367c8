"""Reprocess, or send the owed signals of, every delivery the log's current filter shows.

Two steps, so nobody re-drives a thousand payments by one click: ``GET /deliveries/bulk``
shows how many deliveries the filter matches now, and a form (operators only) when they are
at most :data:`BULK_CAP`; its ``POST`` counts again, refuses above the cap, and does the
action one delivery at a time, each with its own audit entry (a reprocess's in the same
transaction as its change), then one entry for the whole with its filter and counts.
"""

from __future__ import annotations

from typing import Final

from flask import render_template, request, url_for
from werkzeug.datastructures import MultiDict
from werkzeug.wrappers import Response as BaseResponse

from payhooks.console.access import console_ledger, current_access
from payhooks.console.acting import Acting, begin_action, can_act, done
from payhooks.console.action_views import (
    body_pruned,
    reprocess_one,
    send_owed,
    sending_result,
)
from payhooks.console.csrf import ActionRefused
from payhooks.console.query import BadQuery, LogQuery, parse_log_query
from payhooks.receiver.pipeline import SendReport
from payhooks.storage import FINISHED_DELIVERY_STATUSES

__all__ = ["BULK_ACTIONS", "BULK_CAP", "bulk_confirm", "bulk_run"]

#: The most deliveries one bulk action takes.
BULK_CAP: Final = 500
#: The bulk actions: the URL's value, the label, the audit log's action name.
BULK_ACTIONS: Final = {
    "reprocess": ("Reprocess", "bulk_reprocess"),
    "send-signals": ("Send the owed signals of", "bulk_send_signals"),
}


def _action(args: MultiDict[str, str]) -> str:
    action = args.get("action", "")
    if action not in BULK_ACTIONS:
        raise BadQuery(f"action must be one of: {', '.join(BULK_ACTIONS)}.")
    return action


def _matching(query: LogQuery) -> tuple[int, list[int]]:
    """How many deliveries the filter matches now, and (at most the cap) their ids in
    arrival order."""
    records = console_ledger().receiver
    wanted = query.delivery_filter(current_access().clock())
    count = records.count_deliveries(wanted)
    if count > BULK_CAP:
        return count, []
    page = records.delivery_log(wanted, limit=BULK_CAP)
    return count, sorted(row.id for row in page.rows)


def bulk_confirm() -> str:
    """``GET /deliveries/bulk?action=...&<the log's filter>``: the count first, and the form
    when the cap allows it."""
    action = _action(request.args)
    query = parse_log_query(request.args)
    count, ids = _matching(query)
    owing = None
    if action == "send-signals":  # offered only for deliveries that owe a signal
        signals = console_ledger().signals
        owing = sum(1 for delivery_id in ids if signals.owed(delivery_id))
    return render_template(
        "payhooks_console/bulk.html",
        action=action,
        label=BULK_ACTIONS[action][0],
        query=query,
        count=count,
        owing=owing,
        cap=BULK_CAP,
        can_act=can_act(),
        now=current_access().clock(),
    )


def _send_all(acting: Acting, ids: list[int]) -> tuple[str, str, dict[str, int]]:
    """Run the receivers still owed of each delivery's signals, each delivery with its own
    audit entry; the sentence, its tone and the counts for the whole."""
    report, left = SendReport(), 0
    for delivery_id in ids:
        one = Acting(acting.grant, "send_signals", f"delivery {delivery_id}", acting.note)
        if not acting.ledger.signals.owed(delivery_id):
            continue
        ran, still = send_owed(one, delivery_id=delivery_id)
        said, _, counts = sending_result(ran, still)
        one.record(said, counts)
        report.add(ran)
        left += still
    return sending_result(report, left)


def _run(acting: Acting, action: str, ids: list[int]) -> tuple[int, int, int]:
    """Reprocess each delivery: (succeeded, failed, skipped). A pruned delivery is skipped
    (its entry says ``refused: console_body_pruned``), as ``payhooks reprocess`` skips it: its
    body is in an archive, not in the ledger."""
    succeeded = failed = skipped = 0
    for delivery_id in ids:
        one = Acting(acting.grant, action.replace("-", "_"), f"delivery {delivery_id}", acting.note)
        delivery = acting.ledger.receiver.delivery(delivery_id)
        if delivery is not None and body_pruned(one, delivery):
            skipped += 1
            continue
        ok = delivery is not None and reprocess_one(one, delivery) in FINISHED_DELIVERY_STATUSES
        succeeded, failed = succeeded + ok, failed + (not ok)
    return succeeded, failed, skipped


def bulk_run() -> BaseResponse:
    """``POST /deliveries/bulk``: the action on every delivery the filter matches now."""
    form = request.form
    named = BULK_ACTIONS.get(form.get("action", ""), ("", "bulk"))[1]
    acting = begin_action(named, "the delivery log's filter", redrives=True)  # who, first
    try:
        action = _action(form)
        query = parse_log_query(form)
    except BadQuery as err:
        acting.record("refused: console_bad_form")
        raise ActionRefused(400, "console_bad_form", err.message) from err
    count, ids = _matching(query)
    detail = {"filter": query.args(before=None), "count": count}
    back = url_for(".deliveries", **query.args(before=None))
    if count > BULK_CAP:
        acting.record("refused: over the cap", detail)
        raise ActionRefused(
            400,
            "console_bulk_over_cap",
            f"The filter matches {count} deliveries, more than the {BULK_CAP} one action "
            "takes; narrow it first.",
        )
    label = BULK_ACTIONS[action][0]
    if action == "send-signals":
        said, tone, sent = _send_all(acting, ids)
        acting.record(said, detail | sent)
        return done(f"{label} {count} deliveries: {said}.", back, tone)
    succeeded, failed, skipped = _run(acting, action, ids)
    counts = f"{succeeded} succeeded, {failed} failed"
    if skipped:
        counts += f", {skipped} skipped (pruned)"
    acting.record(counts, detail | {"succeeded": succeeded, "failed": failed, "skipped": skipped})
    tone = "problem" if failed else ("succeeded" if succeeded else "neutral")
    return done(f"{label} {count} deliveries: {counts}.", back, tone)
