"""The console's pages as the browser tests visit them, and a ledger worth looking at.

:data:`CONSOLE_PAGES` is the one list the accessibility test and the screenshots walk: a new
page is one line here. :func:`fill_console_ledger` fills the app's ledger through the real
receiver (signed notifications, a forged one refused) and an operator's review of one
exception, so every page has rows to show. The console must be mounted at :data:`PREFIX`
with a hook that returns the role :data:`ROLE_HEADER` names.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from typing import Final

from flask.testing import FlaskClient

from tests.support.app import BodyFactory, SignFunction

__all__ = ["CONSOLE_PAGES", "NOTIFY", "PREFIX", "ROLE_HEADER", "fill_console_ledger", "page_path"]

NOTIFY: Final = "/payhooks/notifications"
#: Where the browser tests mount the console.
PREFIX: Final = "/console"
#: The header the tests' authorize hook reads the role from.
ROLE_HEADER: Final = "X-Test-Console-Role"

#: Each page's name and its path under the console's prefix; ``{delivery}`` is a processed
#: delivery's id. A page added to the console is one line here. ``bulk`` is a bulk action's
#: confirmation for the two deliveries that failed; ``refused-request`` the forged request, the
#: first refused on the fresh ledger :func:`fill_console_ledger` fills (it checks so).
CONSOLE_PAGES: Final[dict[str, str]] = {
    "deliveries": "/deliveries",
    "refused": "/deliveries/refused",
    "refused-request": "/deliveries/refused/1",
    "delivery": "/deliveries/{delivery}",
    "payment": "/payments/order-1001",
    "bulk": (
        "/deliveries/bulk?action=reprocess&window=all&status=malformed_json&status=invalid_payload"
    ),
    "reconciliation": "/reconciliation",
    "reconciliation-table": "/reconciliation?view=table",
    "exceptions": "/exceptions",
    "audit": "/audit",
    "not-found": "/no-such-page",
}


def page_path(name: str, prefix: str, delivery_id: int) -> str:
    """The path of page ``name`` under ``prefix``."""
    return prefix + CONSOLE_PAGES[name].format(delivery=delivery_id)


def fill_console_ledger(client: FlaskClient, make_body: BodyFactory, sign: SignFunction) -> int:
    """Deliver a day's mix through the receiver (payments, a failure, a repeat, a body that is
    not JSON, one that is not a notification, a forged request) and return the id of the
    first processed delivery."""
    sent: list[tuple[bytes, int]] = [
        (make_body(external_identifier="order-1001", transaction_id="ll-9001"), 200),
        (
            make_body(
                "card", external_identifier="order-1002", transaction_id="ll-9002", amount="120.50"
            ),
            200,
        ),
        (
            make_body(external_identifier="order-1003", transaction_id="ll-9003", status="PF"),
            200,
        ),
        (make_body(external_identifier="order-1001", transaction_id="ll-9001"), 200),
        (b'{"merchant_transaction_id": "order-1004", ', 400),
        (b'{"merchant_transaction_id": "order-1005"}', 422),
        (
            make_body(
                "orchestrator",
                external_identifier="order-1006",
                transaction_id="ll-9006",
                amount="8.00",
                currency="EUR",
            ),
            200,
        ),
    ]
    first: int | None = None
    for body, status in sent:
        answer = client.post(NOTIFY, data=body, headers=sign(body))
        assert answer.status_code == status, answer.get_data(as_text=True)
        if first is None:
            first = answer.get_json()["delivery_id"]
    forged = client.post(
        NOTIFY,
        data=b'{"forged": true}',
        headers={
            "webhook-id": "msg_forged",
            "webhook-timestamp": str(int(datetime.now(UTC).timestamp())),
            "webhook-signature": "v1," + base64.b64encode(b"\0" * 32).decode(),
        },
    )
    assert forged.status_code == 401
    opened = client.get(PREFIX + CONSOLE_PAGES["refused-request"], headers={ROLE_HEADER: "viewer"})
    assert opened.status_code == 200, "the forged request is not the refused request #1"
    _review(
        client, "order-1001", "acknowledged", "Asked the shop why order-1001 was not registered."
    )
    assert first is not None
    return first


def _review(client: FlaskClient, identifier: str, status: str, note: str) -> None:
    """Set an exception's status as an operator does from the queue (so the payment's page
    and the audit log have notes to show)."""
    operator = {ROLE_HEADER: "operator"}
    queue = client.get(f"{PREFIX}/exceptions", headers=operator).get_data(as_text=True)
    found = re.search(r'name="csrf_token" value="([^"]*)"', queue)
    assert found is not None, "the exceptions queue shows an operator no form"
    answer = client.post(
        f"{PREFIX}/exceptions/{identifier}/review",
        data={"csrf_token": found.group(1), "status": status, "note": note},
        headers=operator,
    )
    assert answer.status_code == 303, answer.get_data(as_text=True)
