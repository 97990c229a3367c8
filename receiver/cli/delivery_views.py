"""How ``payhooks deliveries`` shows what the ledger holds: table rows, records, a body.

Everything a delivery carries came from outside (identifiers, errors, headers, the body), so
text for the terminal goes through :func:`~payhooks.receiver.cli.escaping.terminal_text` and
JSON through :func:`~payhooks.receiver.cli.escaping.terminal_json`: a tool decoding the JSON
gets the exact values back, and a terminal shows no escape sequence and no bidirectional
control. Amounts are decimal strings, never floats.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Final

from payhooks.receiver.cli.escaping import terminal_text
from payhooks.receiver.visible_text import body_as_text, json_lines_of
from payhooks.storage.reads import DeliveryDetails, LoggedDelivery, RejectedDelivery

__all__ = [
    "DELIVERY_HEADER",
    "REJECTED_HEADER",
    "body_lines",
    "delivery_record",
    "delivery_row",
    "details_lines",
    "details_record",
    "rejected_record",
    "rejected_row",
]

#: How much of an error a table row shows; ``deliveries show`` shows all of it.
_ERROR_SHOWN: Final = 60

DELIVERY_HEADER: Final = (
    f"{'ID':>8}  {'RECEIVED':<25}  {'STATUS':<19}  {'TRIES':>5}  {'IDENTIFIER':<20}  "
    f"{'OUTCOME':<24}  {'BYTES':>7}  ERROR"
)
REJECTED_HEADER: Final = f"{'ID':>8}  {'RECEIVED':<25}  {'REMOTE ADDR':<39}  {'BYTES':>7}  REASON"


def _amount(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _outcome(row: LoggedDelivery) -> str:
    if row.outcome_id is None:
        return "-"
    amount = f" {row.amount} {terminal_text(row.currency or '')}" if row.amount is not None else ""
    return f"{row.outcome_id} {terminal_text(row.payment_status or '')}{amount}"


def _shortened(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def delivery_row(row: LoggedDelivery) -> str:
    """One table line: every text from outside escaped, the error shortened."""
    problem = row.error or (f"signal: {row.signal_error}" if row.signal_error else "")
    return (
        f"{row.id:>8}  {row.received_at.isoformat(timespec='seconds'):<25}  "
        f"{row.status.value:<19}  {row.attempts:>5}  "
        f"{terminal_text(row.external_identifier or '-'):<20}  {_outcome(row):<24}  "
        f"{row.body_size:>7}  {_shortened(terminal_text(problem), _ERROR_SHOWN)}"
    ).rstrip()


def rejected_row(row: RejectedDelivery) -> str:
    return (
        f"{row.id:>8}  {row.received_at.isoformat(timespec='seconds'):<25}  "
        f"{terminal_text(row.remote_addr or '-'):<39}  {row.body_size:>7}  "
        f"{terminal_text(row.reason)}"
    )


def delivery_record(row: LoggedDelivery) -> dict[str, Any]:
    """One delivery's log entry as a JSON object: the stored values, the amount a string."""
    return {
        "id": row.id,
        "received_at": row.received_at.isoformat(),
        "status": row.status.value,
        "attempts": row.attempts,
        "error": row.error,
        "signal_error": row.signal_error,
        "external_identifier": row.external_identifier,
        "outcome_id": row.outcome_id,
        "payment_status": row.payment_status,
        "amount": _amount(row.amount),
        "currency": row.currency,
        "body_size": row.body_size,
        "dedupe_key": row.dedupe_key,
    }


def rejected_record(row: RejectedDelivery) -> dict[str, Any]:
    return {
        "id": row.id,
        "received_at": row.received_at.isoformat(),
        "remote_addr": row.remote_addr,
        "reason": row.reason,
        "body_size": row.body_size,
    }


def details_record(details: DeliveryDetails) -> dict[str, Any]:
    """One delivery whole as a JSON object: ``body`` is its text when it is UTF-8 (else null),
    ``body_base64`` its exact bytes."""
    try:
        text: str | None = details.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return delivery_record(details) | {
        "headers": dict(details.headers),
        "body": text,
        "body_base64": base64.b64encode(details.body).decode("ascii"),
        "pruned_at": None if details.pruned_at is None else details.pruned_at.isoformat(),
        "pruned_into": details.pruned_into,
    }


def details_lines(details: DeliveryDetails) -> Iterator[str]:
    """``deliveries show``'s text: the entry, the headers, then the body."""
    fields = {
        "received at": details.received_at.isoformat(),
        "status": details.status.value,
        "attempts": str(details.attempts),
        "dedupe key": details.dedupe_key,
        "identifier": details.external_identifier or "-",
        "outcome": _outcome(details),
        "error": details.error or "-",
        "signal error": details.signal_error or "-",
        "body size": f"{details.body_size} bytes",
    }
    yield f"Delivery {details.id}"
    for name, value in fields.items():
        # The outcome is escaped already; escaping twice would double its backslashes.
        shown = value if name == "outcome" else terminal_text(value)
        yield f"  {name + ':':<14}{shown}"
    yield ""
    yield "Headers:"
    if not details.headers:
        yield "  (none stored)"
    for name, value in sorted(details.headers.items()):
        yield f"  {terminal_text(name)}: {terminal_text(value)}"
    yield ""
    yield "Body:"
    if details.pruned_at is not None:
        yield (
            f"  (pruned {details.pruned_at.isoformat()} into "
            f"{terminal_text(details.pruned_into or '?')}; payhooks prune's archive holds it)"
        )
        return
    yield from body_lines(details.body)


# -- the body ------------------------------------------------------------------------------


def body_lines(body: bytes) -> list[str]:
    """The body for the terminal, indented by two spaces: laid out when it is JSON (members
    in the order sent, repeated names kept, numbers as written), else on one line, escaped."""
    if not body:
        return ["  (empty)"]
    lines = json_lines_of(body)
    if lines is None:
        return ["  (not JSON; shown escaped)", f"  {body_as_text(body)}"]
    return [f"  {line}" for line in lines]
