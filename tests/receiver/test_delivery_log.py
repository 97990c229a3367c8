"""``PAYHOOKS_DELIVERY_LOG``: one JSON line per request on ``payhooks.deliveries``, its fields
pinned, and nothing in it a terminal could obey or a reader could use to forge a delivery: no
secret, no body, no header value but the sender's message id, every webhook-borne string
escaped (hypothesis over hostile identifiers)."""

from __future__ import annotations

import json
import logging
import unicodedata
from typing import Any

import pytest
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.receiver import config_from_env, load_settings
from payhooks.receiver.pipeline.delivery_lines import DELIVERY_LOGGER, MAX_TEXT
from payhooks.storage import Ledger
from tests.support.app import TEST_SECRET, AppFactory, BodyFactory, SignFunction

NOTIFY = "/payhooks/notifications"

FIELDS = {
    "event",
    "time",
    "http_status",
    "status",
    "error",
    "rejected",
    "scheme",
    "delivery_id",
    "dedupe_key",
    "external_identifier",
    "outcome_id",
    "latency_ms",
}

_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == DELIVERY_LOGGER]


@pytest.fixture
def logged(make_app: AppFactory, caplog: pytest.LogCaptureFixture) -> Flask:
    caplog.set_level(logging.INFO, logger=DELIVERY_LOGGER)
    return make_app(PAYHOOKS_DELIVERY_LOG=True)


def test_no_line_is_written_unless_the_key_asks(
    make_app: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=DELIVERY_LOGGER)

    make_app().test_client().post(NOTIFY, data=b"{}", headers={})

    assert lines(caplog) == []


def test_a_processed_delivery_has_one_line_with_every_field(
    logged: Flask,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body()

    response = logged.test_client().post(NOTIFY, data=body, headers=sign(body, msg_id="msg_1"))

    (line,) = lines(caplog)
    fields = json.loads(line)
    assert set(fields) == FIELDS
    assert fields["latency_ms"] > 0
    assert fields["time"].endswith("+00:00")
    del fields["latency_ms"], fields["time"]
    assert fields == {
        "event": "delivery",
        "http_status": 200,
        "status": "processed",
        "error": None,
        "rejected": False,
        "scheme": "standard-webhooks",
        "delivery_id": response.get_json()["delivery_id"],
        "dedupe_key": "msg_1",
        "external_identifier": "order-1",
        "outcome_id": 1,
    }


@pytest.mark.parametrize(
    ("body", "signed", "http_status", "error", "is_rejected"),
    [
        (b"{}", False, 401, "missing_signature", True),
        (b"{", True, 400, "malformed_json", False),
        (b"{}", True, 422, "invalid_payload", False),
    ],
)
def test_a_refusal_has_its_error_code_and_no_status(
    logged: Flask,
    sign: SignFunction,
    caplog: pytest.LogCaptureFixture,
    body: bytes,
    signed: bool,
    http_status: int,
    error: str,
    is_rejected: bool,
) -> None:
    logged.test_client().post(NOTIFY, data=body, headers=sign(body) if signed else {})

    (line,) = lines(caplog)
    fields = json.loads(line)
    assert (fields["http_status"], fields["status"], fields["error"]) == (
        http_status,
        None,
        error,
    )
    assert fields["rejected"] is is_rejected
    assert (fields["delivery_id"] is None) is is_rejected
    assert (fields["scheme"] is None) is is_rejected


def _safe_to_print(line: str) -> bool:
    return "\n" not in line and all(
        unicodedata.category(char) not in ("Cc", "Cs", "Zl", "Zp") and char not in _BIDI
        for char in line
    )


#: Anything a body can carry, control characters, bidirectional controls and line separators
#: first among them.
hostile_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(["\x1b", "[", "\x00", "\n", "\r", "\u202e", "\u2028", "\x9b", "\\", '"']),
        st.characters(codec="utf-8"),
    ),
    min_size=1,
    max_size=64,
)
#: A message id an HTTP header can carry: Latin-1 without line breaks or NUL (C0 and C1
#: controls included: ``\x9b`` is a terminal's CSI).
hostile_header = st.text(
    alphabet=st.characters(codec="latin-1", exclude_characters="\r\n\x00"),
    min_size=1,
    max_size=80,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(identifier=hostile_text, msg_id=hostile_header)
def test_hostile_identifiers_reach_the_line_escaped_and_nothing_secret_does(
    logged: Flask,
    make_body: BodyFactory,
    sign: SignFunction,
    caplog: pytest.LogCaptureFixture,
    identifier: str,
    msg_id: str,
) -> None:
    caplog.clear()
    body = make_body(external_identifier=identifier, transaction_id=f"ll-{msg_id!r}"[:64])
    headers = sign(body, msg_id=msg_id)

    response = logged.test_client().post(NOTIFY, data=body, headers=headers)

    (line,) = lines(caplog)
    assert _safe_to_print(line)
    for secret_or_body in (TEST_SECRET, headers["webhook-signature"], "payment_data", "25.00"):
        assert secret_or_body not in line
    fields: dict[str, Any] = json.loads(line)
    if response.status_code == 200:
        assert fields["external_identifier"] == identifier
    if fields["dedupe_key"] is not None:
        expected = msg_id if len(msg_id) <= MAX_TEXT else msg_id[:MAX_TEXT] + "..."
        assert fields["dedupe_key"] == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", True), ("true", True), ("On", True), ("0", False), ("no", False), ("", False)],
)
def test_the_key_is_read_from_the_environment(text: str, value: bool) -> None:
    config = config_from_env({"PAYHOOKS_DELIVERY_LOG": text})

    assert config["PAYHOOKS_DELIVERY_LOG"] is value


@pytest.mark.parametrize("config", [{"PAYHOOKS_DELIVERY_LOG": "yes"}, {"PAYHOOKS_DELIVERY_LOG": 1}])
def test_a_value_that_is_not_a_boolean_is_refused_naming_the_key(config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="PAYHOOKS_DELIVERY_LOG"):
        load_settings({**config, "PAYHOOKS_SECRETS": [TEST_SECRET]})


def test_an_unreadable_environment_value_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="PAYHOOKS_DELIVERY_LOG"):
        config_from_env({"PAYHOOKS_DELIVERY_LOG": "maybe"})
