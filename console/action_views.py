"""One delivery's actions, from its page: reprocess it, send its owed signals, download it.

Each is what the command line does for it: reprocessing is ``payhooks reprocess``'s
:func:`~payhooks.receiver.pipeline.process_stored_delivery` then
:func:`~payhooks.receiver.pipeline.send_claimed`; sending is what ``payhooks signals --send
--now --retry-parked`` does: a claim, with the lease, then the receivers still owed (at least
once, never twice at the same time); a
download is the body ``payhooks deliveries export`` writes, byte for byte.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import datetime
from typing import Final

from flask import Response, url_for
from werkzeug.wrappers import Response as BaseResponse

from payhooks.console.acting import Acting, begin_action, done, merchant_app
from payhooks.console.answers import error_page
from payhooks.console.query import MAX_ID
from payhooks.receiver.pipeline import SendReport, process_stored_delivery, send_claimed
from payhooks.receiver.pipeline import send_owed as send_owed_signals
from payhooks.receiver.state import receiver_state
from payhooks.storage import (
    FINISHED_DELIVERY_STATUSES,
    Delivery,
    StorageError,
    StorageUnavailableError,
)

__all__ = [
    "DOWNLOADS",
    "body_pruned",
    "dismiss_signal",
    "download",
    "reprocess",
    "reprocess_one",
    "send_owed",
    "send_payment_signals",
    "send_signals",
    "sending_result",
]

#: The download forms: the action's name in the audit log, the file's name.
DOWNLOADS: Final = {
    "raw": ("download_raw", "delivery-{id}.body"),
    "fixture": ("download_fixture", "delivery-{id}.json"),
}


def _target(delivery_id: int) -> str:
    return f"delivery {delivery_id}"


def _stored(acting: Acting, delivery_id: int) -> Delivery | None:
    """The delivery, or None (and the action audited as ``not_found``)."""
    found = None
    if 1 <= delivery_id <= MAX_ID:
        found = acting.ledger.receiver.delivery(delivery_id)
    if found is None:
        acting.record("not_found")
    return found


def _not_found() -> Response:
    return error_page(404, "console_not_found", "There is no delivery with this id.")


def body_pruned(acting: Acting, delivery: Delivery) -> bool:
    """Whether ``delivery``'s body was pruned into an archive (and, if so, the action audited as
    refused): reprocessing would parse the empty body left behind, a download hand out zero
    bytes as the delivery. ``payhooks reprocess`` skips such deliveries too."""
    if delivery.pruned_at is None:
        return False
    acting.record("refused: console_body_pruned")
    return True


def _pruned() -> Response:
    return error_page(
        409,
        "console_body_pruned",
        "This delivery's body was pruned; payhooks restore-pruned puts it back from its archive.",
    )


def reprocess_one(acting: Acting, delivery: Delivery) -> str:
    """Reprocess ``delivery`` with its audit entry in the same transaction, then send the
    signals it claimed; its status now.

    :raises StorageUnavailableError: the ledger cannot be written; nothing changed, and the
        failure is audited in a commit of its own when the ledger takes it.
    """
    state = receiver_state()
    ledger = acting.ledger
    try:
        with ledger.transaction():
            result = process_stored_delivery(
                ledger,
                delivery,
                time_zone=state.time_zone,
                status_map=state.status_map,
                lease=state.signal_lease,
            )
            acting.record(result.status.value)
    except StorageUnavailableError:
        with suppress(StorageError):  # the ledger may take this entry; the 503 page follows
            acting.record("failed: storage_unavailable")
        raise
    send_claimed(
        merchant_app(),
        ledger,
        result.claimed,
        result.stored_outcomes,
        retries=state.signal_retries,
    )
    return result.status.value


def send_owed(
    acting: Acting, *, delivery_id: int | None = None, identifier: str | None = None
) -> tuple[SendReport, int]:
    """Run exactly the receivers still owed of one delivery's or one payment's signals that no
    other sender holds, waiting and parked ones too (a person asked): what ran, and how many
    signals are still owed after it (held by another sender, held back behind an earlier
    signal of the payment, or raised again). Each signal is run at most once."""
    ledger, state = acting.ledger, receiver_state()
    report = send_owed_signals(
        merchant_app(),
        ledger,
        lease=state.signal_lease,
        retries=state.signal_retries,
        waiting=True,
        parked=True,
        delivery_id=delivery_id,
        identifier=identifier,
        once_since=datetime.now().astimezone(),
    )
    left = len(ledger.signals.owed(delivery_id, identifier=identifier))
    return report, left


def _audited_run(
    acting: Acting, *, delivery_id: int | None = None, identifier: str | None = None
) -> tuple[SendReport, int]:
    """:func:`send_owed`, with an entry in the audit log even when it fails after the
    merchant's code ran (the ledger gone mid-way): who ran what is never lost."""
    try:
        return send_owed(acting, delivery_id=delivery_id, identifier=identifier)
    except Exception:
        acting.record_or_log("failed: the run stopped before its result could be read")
        raise


def sending_result(report: SendReport, left: int) -> tuple[str, str, dict[str, int]]:
    """What a person is told of a sending, its tone, and the audit entry's counts: green only
    when receivers ran, every one returned and nothing is left owed; neutral when nothing ran
    or something is still owed (held by another sender, or behind an earlier signal)."""
    counts = {
        "receivers_run": report.receivers_run,
        "returned": report.returned,
        "raised": report.raised,
        "parked": report.signals_parked,
        "still_owed": left,
    }
    said = report.describe()
    if left:
        said += f"; {left} signal(s) still owed"
    if report.raised:
        return said, "problem", counts
    if not report.ran or left:
        return said, "neutral", counts
    return said, "succeeded", counts


def reprocess(delivery_id: int) -> BaseResponse:
    """``POST /deliveries/<id>/reprocess``: parse the stored body again and record its
    outcome, as ``payhooks reprocess`` does."""
    acting = begin_action("reprocess", _target(delivery_id), redrives=True)
    delivery = _stored(acting, delivery_id)
    if delivery is None:
        return _not_found()
    if body_pruned(acting, delivery):
        return _pruned()
    status = reprocess_one(acting, delivery)
    finished = status in FINISHED_DELIVERY_STATUSES
    return done(
        f"Delivery #{delivery_id} reprocessed: {status}"
        + ("." if finished else "; it still has no outcome."),
        url_for(".delivery", delivery_id=delivery_id),
        "succeeded" if finished else "problem",
    )


def send_signals(delivery_id: int) -> BaseResponse:
    """``POST /deliveries/<id>/send-signals``: run the receivers still owed of the signals its
    outcomes owe, as ``payhooks signals --send --now --retry-parked`` does for them.

    The receivers are the merchant's code and run outside any transaction, so the entry is
    written after them, with their result.
    """
    acting = begin_action("send_signals", _target(delivery_id), redrives=True)
    if _stored(acting, delivery_id) is None:
        return _not_found()
    back = url_for(".delivery", delivery_id=delivery_id)
    if not acting.ledger.signals.owed(delivery_id):
        acting.record("nothing owed", {"receivers_run": 0})
        return done(f"Delivery #{delivery_id} owes no signal: nothing was run.", back, "neutral")
    report, left = _audited_run(acting, delivery_id=delivery_id)
    said, tone, counts = sending_result(report, left)
    acting.record(said, counts)
    return done(f"Delivery #{delivery_id}: {said}.", back, tone)


def send_payment_signals(external_identifier: str) -> BaseResponse:
    """``POST /payments/<identifier>/send-signals``: the same for every signal one payment's
    outcomes still owe, in the payment's order."""
    acting = begin_action("send_signals", f"payment {external_identifier}", redrives=True)
    back = url_for(".payment", external_identifier=external_identifier)
    if not acting.ledger.signals.owed(identifier=external_identifier):
        acting.record("nothing owed", {"receivers_run": 0})
        return done("This payment owes no signal: nothing was run.", back, "neutral")
    report, left = _audited_run(acting, identifier=external_identifier)
    said, tone, counts = sending_result(report, left)
    acting.record(said, counts)
    return done(f"{said[:1].upper()}{said[1:]}.", back, tone)


def dismiss_signal(signal_id: int) -> BaseResponse:
    """``POST /signals/<id>/dismiss``: mark one owed signal handled without running its
    receivers (a person shipped the order by hand, or the receiver can never handle it), so
    the payment's later signals follow. Audited with the person's note; refused (409) when it
    is not owed or a sender holds it now."""
    acting = begin_action("dismiss_signal", f"signal {signal_id}")
    found = None
    if 1 <= signal_id <= MAX_ID:
        found = acting.ledger.signals.dismiss(signal_id)
    if found is None:
        acting.record("refused: console_signal_not_owed")
        return error_page(
            409,
            "console_signal_not_owed",
            "This signal is not owed, or a sender is running it now; nothing was changed.",
        )
    acting.record(
        "marked handled without running",
        {"signal": found.signal, "outcome_id": found.outcome_id, "delivery_id": found.delivery_id},
    )
    return done(
        f"Signal #{signal_id} ({found.signal}) marked handled without running its receivers.",
        url_for(".delivery", delivery_id=found.delivery_id),
        "neutral",
    )


def download(delivery_id: int, form: str) -> Response:
    """``POST /deliveries/<id>/download/<form>``: the stored body byte for byte, as an
    attachment: ``raw``, or ``fixture`` (named as ``payhooks deliveries export`` names it, the
    file ``payhooks replay`` sends). Operator-only, for a grant that reads bodies, and
    audited: a body is a customer's payment."""
    if form not in DOWNLOADS:
        return error_page(404, "console_not_found", "There is no such download.")
    action, name = DOWNLOADS[form]
    acting = begin_action(action, _target(delivery_id), reads_body=True)
    delivery = _stored(acting, delivery_id)
    if delivery is None:
        return _not_found()
    if body_pruned(acting, delivery):
        return _pruned()
    acting.record(f"{delivery.body_size} bytes")
    answer = Response(delivery.body, mimetype="application/octet-stream")
    answer.headers["Content-Disposition"] = f'attachment; filename="{name.format(id=delivery_id)}"'
    return answer
