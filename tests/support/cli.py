"""Helpers shared by the ``test_cli_*``, ``test_replay*`` and ``test_readme`` modules (no tests
here): running a command, an environment without the developer's ``PAYHOOKS_*`` variables,
notification bodies, and recording one in a ledger the way the receiver does."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from payhooks.receiver.payloads import parse_notification
from payhooks.receiver.script import payhooks
from payhooks.storage import Ledger
from payhooks.storage.rows import RecordedOutcome


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ``PAYHOOKS_*`` variable from the developer's shell, and ``tmp_path`` as the working
    directory (so the default ``./payhooks.db`` lands there)."""
    for name in list(os.environ):
        if name.startswith("PAYHOOKS_") or name in ("SECRET_KEY", "FLASK_APP"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(args: list[str], env: Mapping[str, str] | None = None, input: str | None = None) -> Result:
    """Run ``payhooks ARGS`` in-process, stdout and stderr kept apart."""
    return CliRunner().invoke(payhooks, args, env=dict(env or {}), input=input)


def notification(
    order: str = "order-1",
    transaction: str = "ll-1",
    amount: str = "25.00",
    *,
    status: str = "PS",
    currency: str = "CNY",
) -> bytes:
    """A wallet notification body (the four base members)."""
    return json.dumps(
        {
            "ll_transaction_id": transaction,
            "merchant_transaction_id": order,
            "payment_data": {
                "payment_status": status,
                "payment_amount": amount,
                "payment_currency_code": currency,
                "payment_time": "20261121120000",
            },
        }
    ).encode()


def record_notification(
    ledger: Ledger, body: bytes, dedupe_key: str | None = None
) -> RecordedOutcome:
    """Store and record a delivery as the receiver would after verifying it."""
    delivery = ledger.receiver.record_delivery(
        dedupe_key=dedupe_key or f"key-{hash(body)}", body=body, headers={}
    )
    return ledger.receiver.record_outcome(parse_notification(body), delivery_id=delivery.id)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
