"""Every body in sample_payloads/ parses to exactly what its NAME.expected.json says."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from payhooks.receiver.payloads import PayloadError, parse_notification
from payhooks.storage import Outcome

SAMPLES = Path(__file__).resolve().parents[2] / "sample_payloads"
EXPECTED_SUFFIX = ".expected.json"


def bodies() -> list[Path]:
    return sorted(p for p in SAMPLES.glob("*.json") if not p.name.endswith(EXPECTED_SUFFIX))


def expected_path(body: Path) -> Path:
    return body.with_name(body.name.removesuffix(".json") + EXPECTED_SUFFIX)


def serialise(outcome: Outcome) -> dict[str, Any]:
    return {
        "transaction_id": outcome.transaction_id,
        "external_identifier": outcome.external_identifier,
        "flow": outcome.flow.value,
        "provider": outcome.provider,
        "provider_reference": outcome.provider_reference,
        "provider_status": outcome.provider_status,
        "payment_status": outcome.payment_status,
        "state": outcome.state.value,
        "amount": str(outcome.amount),
        "currency": outcome.currency,
        "amount_minor": outcome.amount_minor,
        "paid_at": outcome.paid_at.isoformat(),
        "extra": outcome.extra,
    }


def test_the_folder_has_every_required_case() -> None:
    names = {p.name.removesuffix(".json") for p in bodies()}
    for required in (
        "card_succeeded_stripe",
        "orchestrator_authorised_adyen",
        "wallet_succeeded",
        "wallet_zero_decimal_jpy",
        "card_three_decimal_kwd",
        "wallet_unmapped_status_code",
        "card_provider_status_disagrees",
        "wallet_refund_success",
    ):
        assert required in names
    assert any(n.startswith("malformed_") for n in names)
    assert any(n.startswith("invalid_") for n in names)


def test_every_expected_file_has_its_body() -> None:
    orphans = [
        p.name
        for p in SAMPLES.glob(f"*{EXPECTED_SUFFIX}")
        if not p.with_name(p.name.removesuffix(EXPECTED_SUFFIX) + ".json").exists()
    ]
    assert orphans == []


@pytest.mark.parametrize("body_path", bodies(), ids=lambda p: p.name.removesuffix(".json"))
def test_sample_parses_as_expected(body_path: Path) -> None:
    expected_file = expected_path(body_path)
    assert expected_file.exists(), f"{body_path.name} has no {expected_file.name}"
    expected = json.loads(expected_file.read_text(encoding="utf-8"), parse_float=Decimal)
    assert set(expected) - {"parse_options"} in ({"outcome"}, {"error"})
    options = expected.get("parse_options", {})
    body = body_path.read_bytes()
    if "error" in expected:
        with pytest.raises(PayloadError) as exc_info:
            parse_notification(body, **options)
        assert exc_info.value.code == expected["error"]["code"]
        assert list(exc_info.value.fields) == expected["error"]["fields"]
    else:
        assert serialise(parse_notification(body, **options)) == expected["outcome"]


@pytest.mark.parametrize("body_path", bodies(), ids=lambda p: p.name.removesuffix(".json"))
def test_sample_name_says_whether_it_is_refused(body_path: Path) -> None:
    expected = json.loads(expected_path(body_path).read_text(encoding="utf-8"))
    name = body_path.name
    if name.startswith("malformed_"):
        assert expected["error"]["code"] == "malformed_json"
    elif name.startswith("invalid_"):
        assert expected["error"]["code"] == "invalid_payload"
    else:
        assert name.startswith(("card_", "orchestrator_", "wallet_"))
        assert expected["outcome"]["flow"] == name.split("_", 1)[0]
