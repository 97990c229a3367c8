"""The demo's last act: payments made through the local sandbox of the service.

The merchant's client (:mod:`payhooks.service.client`) creates a card payment and a wallet
payment at the sandbox (:mod:`payhooks.service.sandbox`), registering each expected payment in
the ledger first; the sandbox settles the card by its test number, a customer pays the wallet
on the sandbox's hosted page and is sent back to the merchant's return URL, and the sandbox
signs and sends each notification to the demo's receiver. Nothing here is scripted: the
notifications are the sandbox's own.

The service's side is an optional extra (``payhooks[service]``, for httpx): without it, this
act says how to add it and the rest of the demo runs as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from flask import Flask

from payhooks.receiver.web import return_url
from payhooks.storage import Ledger

__all__ = ["SandboxAct", "run_sandbox_act"]

#: What the act reports: each line to print, and what did not go as it should.
SandboxAct = tuple[list[str], list[str]]

_MERCHANT = "sandbox-merchant"
_PAYING_CARD = "4242424242424242"


def run_sandbox_act(
    app: Flask,
    port: int,
    ledger: Ledger,
    notification_url: str,
    signing_key: str,
    get_json: Callable[[int, str], tuple[int, dict[str, Any]]],
) -> SandboxAct:
    """Make two payments through a sandbox started here, and stop it; the lines to print and
    the problems found (empty when every step answered as it should)."""
    try:
        import httpx

        from payhooks.service.client import (
            Card,
            CardTransaction,
            OrchestratorWalletTransaction,
            ServiceClient,
        )
        from payhooks.service.sandbox import SandboxServer, SandboxSettings
    except ImportError:
        return ["  (pip install 'payhooks[service]' to see payments made through the sandbox)"], []

    lines: list[str] = []
    problems: list[str] = []
    base = f"http://127.0.0.1:{port}"
    with app.test_request_context(base_url=base):
        back_to = return_url("order-3002")
    settings = SandboxSettings(
        signing_key=signing_key, notification_url=notification_url, notify_backoff=0.05
    )
    with SandboxServer.start(settings) as sandbox:
        client = ServiceClient(
            sandbox.url,
            access_token=sandbox.issue_token(),
            merchant_account_id=_MERCHANT,
            ledger=ledger,
        )
        try:
            card = client.create_transaction(
                CardTransaction(
                    external_identifier="order-3001",
                    amount=4200,
                    currency="CNY",
                    method="stripe",
                    card=Card(number=_PAYING_CARD, exp_month=12, exp_year=2030, cvc="123"),
                    description="A tea tray",
                )
            )
            lines.append(f"  order-3001 card, created {card.id}: settled by the test card")
            wallet = client.create_transaction(
                OrchestratorWalletTransaction(
                    external_identifier="order-3002",
                    amount=19900,
                    currency="CNY",
                    method="adyen",
                    wallet_type="alipay_hk",
                    return_url=back_to,
                )
            )
        finally:
            client.close()
        lines.append(f"  order-3002 wallet, created {wallet.id}: the customer pays on its page")
        with httpx.Client() as customer:
            chosen = customer.post(str(wallet.payment_url), data={"outcome": "pay"})
        location = urlsplit(chosen.headers.get("location", ""))
        if not sandbox.wait_for_notifications(10):
            problems.append("the sandbox's notifications were not all delivered")
        for notification in sandbox.notifications():
            answers = ", ".join(str(attempt.status) for attempt in notification.tries)
            lines.append(
                f"  sandbox -> receiver: {notification.external_identifier} "
                f"({notification.webhook_id}) answered {answers}: {notification.state}"
            )
        status, document = _settled_page(get_json, port, f"{location.path}?{location.query}")
        state, confirmed = document.get("state"), document.get("confirmed")
        lines.append(
            f"  order-3002 customer back at {location.path} -> {status} {state} "
            f"({'confirmed by a notification' if confirmed else 'not confirmed'})"
        )
    for order in ("order-3001", "order-3002"):
        if ledger.state(order) is None or str(ledger.state(order)) != "paid":
            problems.append(f"{order} through the sandbox is {ledger.state(order)}, not paid")
    return lines, problems


def _settled_page(
    get_json: Callable[[int, str], tuple[int, dict[str, Any]]], port: int, path: str
) -> tuple[int, dict[str, Any]]:
    """The return page, read again for a moment until its state is confirmed (the
    notification may still be on its way)."""
    deadline = time.monotonic() + 10
    while True:
        status, document = get_json(port, path)
        if document.get("confirmed") or time.monotonic() > deadline:
            return status, document
        time.sleep(0.05)
