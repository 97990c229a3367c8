"""The two halves end to end, on each engine and in two currencies: the service's client
creates card payments at the sandbox, the sandbox notifies the receiver over loopback, the
ledger reconciles them, the merchant's code hears ``payment-succeeded`` once per payment, and
the console's finance and payment pages show the same money per currency (its rollup
included) that ``Ledger.reconcile`` streams."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from flask import Flask, Request

from payhooks.console import Console
from payhooks.receiver import payment_succeeded
from payhooks.service.client import Card, CardTransaction, ServiceClient
from payhooks.service.sandbox import SandboxServer, SandboxSettings
from payhooks.storage import Ledger, ReconciliationState
from tests.support.app import TEST_SECRET, AppFactory
from tests.support.live_server import LiveServer, eventually

ROLE = "X-Test-Role"
#: (identifier, minor units, currency, what the finance page shows of it): CNY has two decimals,
#: JPY none, so a mistake in either exponent shows.
PAYMENTS = (("order-cny", 4200, "CNY", "42.00"), ("order-jpy", 1500, "JPY", "1500"))


def _viewer(request: Request) -> str | None:
    return request.headers.get(ROLE)


def test_payments_made_through_the_sandbox_reach_the_ledger_the_signals_and_the_pages(
    make_app: AppFactory,
    database: Any,
    serve: Callable[[Flask], LiveServer],
) -> None:
    app = make_app()
    Console(app, authorize=_viewer, url_prefix="/console")
    heard: list[tuple[str, str, Decimal]] = []

    def fulfil(sender: Flask, outcome: Any, **extra: Any) -> None:
        heard.append((outcome.external_identifier, outcome.currency, outcome.amount))

    merchant = serve(app)
    settings = SandboxSettings(
        signing_key=TEST_SECRET,
        notification_url=f"{merchant.url}/payhooks/notifications",
        notify_backoff=0.05,
    )
    with (
        payment_succeeded.connected_to(fulfil, sender=app),
        SandboxServer.start(settings) as sandbox,
        Ledger(database) as ledger,
    ):
        with ServiceClient(
            sandbox.url,
            access_token=sandbox.issue_token(),
            merchant_account_id="sandbox-merchant",
            ledger=ledger,
        ) as client:
            for identifier, amount, currency, _shown in PAYMENTS:
                ledger.expect_transaction(identifier, amount, currency)
                client.create_transaction(
                    CardTransaction(
                        external_identifier=identifier,
                        amount=amount,
                        currency=currency,
                        method="stripe",
                        card=Card(
                            number="4242424242424242", exp_month=12, exp_year=2030, cvc="123"
                        ),
                    )
                )
        assert sandbox.wait_for_notifications(10)
        assert [n.state for n in sandbox.notifications()] == ["delivered", "delivered"]

        for identifier, amount, currency, _shown in PAYMENTS:
            assert ledger.state(identifier) is ReconciliationState.PAID
            row = ledger.row(identifier)
            assert row is not None
            assert (row.received_currency, row.received_amount_minor) == (currency, amount)
        # the receivers run once the answer is written (call_on_close): after the sandbox saw it
        assert eventually(lambda: len(heard) >= len(PAYMENTS), timeout=10)
        assert sorted(heard) == [
            ("order-cny", "CNY", Decimal("42.00")),
            ("order-jpy", "JPY", Decimal("1500")),
        ]

        pages = app.test_client()
        finance = pages.get("/console/reconciliation?period=today", headers={ROLE: "viewer"})
        assert finance.status_code == 200
        html = finance.get_data(as_text=True)
        assert "data-as-of" not in html  # the rollup was brought up to date before the read
        received = re.search(r'data-tile="received">(.*?)</article>', html, re.S)
        assert received is not None
        for identifier, _amount, currency, shown in PAYMENTS:
            assert re.search(rf"{re.escape(shown)}\s*(<[^>]+>\s*)*{currency}", received.group(1))
            assert identifier in html
            payment = pages.get(f"/console/payments/{identifier}", headers={ROLE: "viewer"})
            assert payment.status_code == 200
            assert f"{shown} {currency}" in payment.get_data(as_text=True)
        assert ledger.finance.rollup.verify(1) == []
