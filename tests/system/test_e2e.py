"""End to end: bodies signed by the ``standardwebhooks`` package, POSTed over real loopback
sockets to werkzeug's server, with the outcome read back from the SQLite file itself."""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask

from payhooks.receiver import payment_succeeded, return_url
from payhooks.storage import Ledger
from payhooks.verify import generate_keypair, get_signer, zone_from_header
from tests.support.app import AppFactory, BodyFactory, SignFunction
from tests.support.live_server import LiveServer, eventually

NOTIFY = "/payhooks/notifications"

Rows = Callable[..., list[dict[str, Any]]]


@pytest.mark.parametrize("form", ["card", "orchestrator", "wallet"])
def test_each_form_signed_by_the_reference_package_reconciles_as_paid(
    form: str,
    live_server: LiveServer,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body(form)

    reply = live_server.post(NOTIFY, body, sign(body))

    assert reply.status == 200
    assert reply.json() == {
        "code": "200",
        "msg": "success",
        "status": "processed",
        "delivery_id": reply.json()["delivery_id"],
        "reconciliation": "paid",
    }
    (delivery,) = db_rows("SELECT id, status, body FROM deliveries")
    assert delivery["status"] == "processed"
    assert bytes(delivery["body"]) == body
    (outcome,) = db_rows("SELECT flow, amount, amount_minor, delivery_id FROM outcomes")
    assert outcome == {
        "flow": form,
        "amount": "25.00",
        "amount_minor": 2500,
        "delivery_id": delivery["id"],
    }
    assert ledger.state("order-1") == "paid"


@pytest.mark.parametrize(
    ("amount", "currency", "expected"),
    [
        ("30.00", "CNY", "amount_mismatch"),
        ("25.00", "USD", "currency_mismatch"),
    ],
)
def test_a_payment_that_differs_from_the_expected_one_is_reported_as_a_mismatch(
    amount: str,
    currency: str,
    expected: str,
    live_server: LiveServer,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("card", amount=amount, currency=currency)

    reply = live_server.post(NOTIFY, body, sign(body))

    assert reply.status == 200
    assert reply.json()["reconciliation"] == expected
    assert db_rows("SELECT state FROM reconciliation WHERE external_identifier = 'order-1'") == [
        {"state": expected}
    ]


def test_an_outcome_for_an_unknown_identifier_is_stored_as_unexpected(
    live_server: LiveServer,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    body = make_body("wallet", external_identifier="never-expected")

    reply = live_server.post(NOTIFY, body, sign(body))

    assert reply.status == 200
    assert reply.json()["reconciliation"] == "unexpected"
    assert len(db_rows("SELECT * FROM outcomes")) == 1


def test_a_redelivery_with_the_same_webhook_id_is_a_duplicate_with_one_outcome(
    live_server: LiveServer,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("orchestrator")
    headers = sign(body, msg_id="msg_same")

    first = live_server.post(NOTIFY, body, headers)
    second = live_server.post(NOTIFY, body, headers)

    assert (first.status, first.json()["status"]) == (200, "processed")
    assert (second.status, second.json()["status"]) == (200, "duplicate")
    assert second.json()["delivery_id"] == first.json()["delivery_id"]
    assert second.json()["reconciliation"] == "paid"
    assert len(db_rows("SELECT * FROM deliveries")) == 1
    assert len(db_rows("SELECT * FROM outcomes")) == 1


def test_the_same_outcome_under_a_new_webhook_id_is_a_duplicate_too(
    live_server: LiveServer,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("wallet")

    first = live_server.post(NOTIFY, body, sign(body, msg_id="msg_a"))
    second = live_server.post(NOTIFY, body, sign(body, msg_id="msg_b"))

    assert first.json()["status"] == "processed"
    assert second.json()["status"] == "duplicate"
    assert len(db_rows("SELECT * FROM deliveries")) == 2
    assert len(db_rows("SELECT * FROM outcomes")) == 1


def _tampered(headers: dict[str, str]) -> dict[str, str]:
    """The same headers with a well-formed signature that matches nothing: 32 zero bytes."""
    return {**headers, "webhook-signature": "v1," + "A" * 43 + "="}


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("tampered_signature", "invalid_signature"),
        ("old_timestamp", "timestamp_out_of_tolerance"),
        ("future_timestamp", "timestamp_out_of_tolerance"),
        ("no_signature_headers", "missing_signature"),
        ("garbled_signature", "malformed_signature"),
        ("other_body", "invalid_signature"),
    ],
)
def test_an_unauthenticated_delivery_is_refused_with_its_code_and_only_logged_as_rejected(
    case: str,
    code: str,
    live_server: LiveServer,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    body = make_body("wallet")
    now = datetime.now(UTC)
    headers = {
        "tampered_signature": lambda: _tampered(sign(body)),
        "old_timestamp": lambda: sign(body, timestamp=now - timedelta(minutes=6)),
        "future_timestamp": lambda: sign(body, timestamp=now + timedelta(minutes=6)),
        "no_signature_headers": lambda: {"content-type": "application/json"},
        "garbled_signature": lambda: {**sign(body), "webhook-signature": "garbage"},
        "other_body": lambda: sign(make_body("wallet", amount="1.00")),
    }[case]()

    reply = live_server.post(NOTIFY, body, headers)

    assert reply.status == 401
    assert reply.json()["error"]["code"] == code
    assert db_rows("SELECT * FROM deliveries") == []
    (rejected,) = db_rows("SELECT reason, remote_addr, body FROM rejected_deliveries")
    assert rejected["reason"] == code
    assert rejected["remote_addr"] == "127.0.0.1"
    assert bytes(rejected["body"]) == body


def test_only_the_first_4_kib_of_a_rejected_body_are_kept(
    live_server: LiveServer, ledger: Ledger, db_rows: Rows
) -> None:
    body = json.dumps({"padding": "x" * 10_000}).encode()

    reply = live_server.post(NOTIFY, body, {"content-type": "application/json"})

    assert reply.status == 401
    (rejected,) = db_rows("SELECT body, body_size FROM rejected_deliveries")
    assert bytes(rejected["body"]) == body[:4096]
    assert rejected["body_size"] == len(body)


def test_a_body_over_the_cap_is_refused_unread_and_leaves_no_trace(
    live_server: LiveServer, ledger: Ledger, sign: SignFunction, db_rows: Rows
) -> None:
    body = json.dumps({"padding": "x" * 70_000}).encode()

    reply = live_server.post(NOTIFY, body, sign(body))

    assert reply.status == 413
    assert reply.json()["error"]["code"] == "payload_too_large"
    assert db_rows("SELECT * FROM deliveries") == []
    assert db_rows("SELECT * FROM rejected_deliveries") == []


def test_a_chunked_body_over_the_cap_is_refused_though_no_length_was_announced(
    live_server: LiveServer, ledger: Ledger, sign: SignFunction, db_rows: Rows
) -> None:
    body = json.dumps({"padding": "x" * 70_000}).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 8192):
            yield body[start : start + 8192]

    reply = live_server.request("POST", NOTIFY, chunks(), sign(body))

    assert reply.status == 413
    assert reply.json()["error"]["code"] == "payload_too_large"
    assert db_rows("SELECT * FROM deliveries") == []


def test_a_chunked_body_under_the_cap_is_received(
    live_server: LiveServer, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("card")

    reply = live_server.request("POST", NOTIFY, iter([body[:10], body[10:]]), sign(body))

    assert reply.status == 200
    assert reply.json()["reconciliation"] == "paid"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b'{"ll_transaction_id": "ll-1", ', 400, "malformed_json"),
        (b"\xff\xfe not text", 400, "malformed_json"),
        (json.dumps({"ll_transaction_id": "ll-1"}).encode(), 422, "invalid_payload"),
    ],
)
def test_an_authentic_body_that_cannot_be_read_is_kept_with_its_error(
    body: bytes,
    status: int,
    code: str,
    live_server: LiveServer,
    ledger: Ledger,
    secret: str,
    db_rows: Rows,
) -> None:
    headers = get_signer("standard-webhooks", secret).sign(body)

    reply = live_server.post(NOTIFY, body, headers)

    assert reply.status == status
    assert reply.json()["error"]["code"] == code
    (delivery,) = db_rows("SELECT status, error, body FROM deliveries")
    assert delivery["status"] == code
    assert delivery["error"]
    assert bytes(delivery["body"]) == body
    assert db_rows("SELECT * FROM outcomes") == []


def test_an_invalid_payload_reports_each_bad_field(
    live_server: LiveServer, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    body = make_body("wallet", amount="25", currency="yuan")

    reply = live_server.post(NOTIFY, body, sign(body))

    assert reply.status == 422
    details = json.dumps(reply.json()["error"]["details"])
    assert "payment_amount" in details
    assert "payment_currency_code" in details


def test_a_raising_signal_receiver_still_gets_200_and_the_delivery_keeps_the_error(
    app: Flask,
    live_server: LiveServer,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body("wallet")

    def explode(sender: Flask, **kwargs: Any) -> None:
        raise RuntimeError("warehouse is closed")

    with payment_succeeded.connected_to(explode, sender=app):
        reply = live_server.post(NOTIFY, body, sign(body))
        assert reply.status == 200
        assert reply.json()["status"] == "processed"
        # The receivers run once the answer is out: the error lands just after it.
        delivery_id = reply.json()["delivery_id"]
        assert eventually(lambda: "warehouse" in str(ledger.receiver.delivery(delivery_id)))
    delivery = ledger.receiver.delivery(delivery_id)
    assert delivery is not None
    assert "warehouse is closed" in (delivery.signal_error or "")
    assert "payment-succeeded" in caplog.text


@pytest.mark.sqlite_only  # locks or breaks the SQLite file itself
def test_a_locked_database_answers_503_and_the_same_delivery_succeeds_when_sent_again(
    make_app: AppFactory,
    serve: Callable[[Flask], LiveServer],
    ledger: Ledger,
    database: Path,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    server = serve(make_app(PAYHOOKS_BUSY_TIMEOUT_MS=50))
    body = make_body("card")
    headers = sign(body, msg_id="msg_locked")

    blocker = sqlite3.connect(database, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        refused = server.post(NOTIFY, body, headers)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    accepted = server.post(NOTIFY, body, headers)

    assert refused.status == 503
    assert refused.json()["error"]["code"] == "storage_unavailable"
    assert refused.headers["retry-after"].isdigit()
    assert accepted.status == 200
    assert accepted.json()["reconciliation"] == "paid"
    assert len(db_rows("SELECT * FROM outcomes")) == 1


def test_a_delivery_stored_before_a_failure_is_finished_by_the_retry(
    make_app: AppFactory,
    serve: Callable[[Flask], LiveServer],
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    # The first try stored the delivery and then failed before processing it.
    body = make_body("wallet")
    headers = sign(body, msg_id="msg_half_done")
    stored = ledger.receiver.record_delivery(dedupe_key="msg_half_done", body=body, headers={})
    ledger.expect_transaction("order-1", 2500, "CNY")
    server = serve(make_app())

    reply = server.post(NOTIFY, body, headers)

    assert reply.status == 200
    assert reply.json()["status"] == "processed"
    assert reply.json()["delivery_id"] == stored.id
    assert [row["status"] for row in db_rows("SELECT status FROM deliveries")] == ["processed"]


@pytest.mark.sqlite_only  # locks or breaks the SQLite file itself
def test_a_failure_after_the_delivery_is_stored_answers_503_and_the_retry_finishes_it(
    live_server: LiveServer,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A real fault in the SQLite file, not an availability problem: a trigger refuses every
    # outcome. The delivery is stored first, so the answer asks the service to come back.
    ledger.expect_transaction("order-1", 2500, "CNY")
    ledger.database.execute(
        "CREATE TRIGGER refuse_outcomes BEFORE INSERT ON outcomes "
        "BEGIN SELECT RAISE(ABORT, 'outcomes are frozen'); END"
    )
    body = make_body("card")
    headers = sign(body, msg_id="msg_fault")

    refused = live_server.post(NOTIFY, body, headers)
    (delivery,) = db_rows("SELECT id, status, error FROM deliveries")
    ledger.database.execute("DROP TRIGGER refuse_outcomes")
    retried = live_server.post(NOTIFY, body, headers)

    assert refused.status == 503
    assert refused.json()["error"] == {
        "code": "processing_error",
        "message": "The delivery is stored but could not be processed; try again.",
        "details": {},
    }
    assert refused.headers["retry-after"].isdigit()
    assert b"Traceback" not in refused.body
    assert (delivery["status"], delivery["error"]) == ("processing_error", "StorageError")
    assert "could not be processed" in caplog.text
    assert (retried.status, retried.json()["status"]) == (200, "processed")
    assert retried.json()["delivery_id"] == delivery["id"]
    assert retried.json()["reconciliation"] == "paid"
    assert len(db_rows("SELECT * FROM outcomes")) == 1


def test_a_second_outcome_that_contradicts_the_first_is_answered_conflicting_outcome(
    live_server: LiveServer,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    first = make_body("wallet")
    other = make_body("wallet", amount="2.50")  # same transaction and status, another amount

    accepted = live_server.post(NOTIFY, first, sign(first))
    contradicting = live_server.post(NOTIFY, other, sign(other))
    redelivered = live_server.post(NOTIFY, first, sign(first))

    assert (accepted.status, accepted.json()["status"]) == (200, "processed")
    assert contradicting.status == 200
    assert contradicting.json()["status"] == "conflicting_outcome"
    assert contradicting.json()["reconciliation"] == "paid"
    assert redelivered.json()["status"] == "duplicate"
    statuses = [row["status"] for row in db_rows("SELECT status FROM deliveries ORDER BY id")]
    assert statuses == ["processed", "conflicting_outcome", "duplicate"]
    assert db_rows("SELECT amount FROM outcomes") == [{"amount": "25.00"}]


def test_a_redelivery_is_answered_about_the_payment_its_stored_outcome_names(
    live_server: LiveServer, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    # The same transaction and status sent again under another merchant id: the first word
    # stands, so the answer, then and on redelivery, is about order-1, not the body's order-2.
    ledger.expect_transaction("order-1", 2500, "CNY")
    ledger.expect_transaction("order-2", 2500, "CNY")
    first = make_body("wallet", external_identifier="order-1")
    stray = make_body("wallet", external_identifier="order-2")
    live_server.post(NOTIFY, first, sign(first))
    headers = sign(stray, msg_id="msg_stray")

    answered = live_server.post(NOTIFY, stray, headers)
    redelivered = live_server.post(NOTIFY, stray, headers)

    assert answered.json()["status"] == "conflicting_outcome"
    assert answered.json()["reconciliation"] == "paid"
    assert redelivered.json()["status"] == "duplicate"
    assert redelivered.json()["delivery_id"] == answered.json()["delivery_id"]
    assert redelivered.json()["reconciliation"] == "paid"
    assert ledger.state("order-2") == "pending"


def test_the_sorted_fields_rsa_scheme_of_the_service_sdk_works_end_to_end(
    make_app: AppFactory,
    serve: Callable[[Flask], LiveServer],
    ledger: Ledger,
    make_body: BodyFactory,
) -> None:
    private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public_pem = (
        private_key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    server = serve(
        make_app(
            PAYHOOKS_SIGNATURE_SCHEME="sorted-fields-rsa",
            PAYHOOKS_SECRETS=None,
            PAYHOOKS_PUBLIC_KEYS=public_pem,
        )
    )
    ledger.expect_transaction("order-rsa", 2500, "CNY")
    body = make_body("orchestrator", external_identifier="order-rsa")
    signer = get_signer("sorted-fields-rsa", private_pem)

    good = server.post(NOTIFY, body, {**signer.sign(body), "content-type": "application/json"})
    forged = server.post(
        NOTIFY,
        make_body("orchestrator", external_identifier="order-rsa", amount="1.00"),
        signer.sign(body),
    )

    assert (good.status, good.json()["reconciliation"]) == (200, "paid")
    assert (forged.status, forged.json()["error"]["code"]) == (401, "invalid_signature")


@pytest.mark.parametrize(
    ("timezone_header", "local_zone"),
    [(None, "Asia/Shanghai"), ("-03:00", "-03:00"), ("Etc/GMT+5", "Etc/GMT+5")],
)
def test_sorted_fields_rsa_dates_the_check_and_the_payment_in_the_same_zone(
    timezone_header: str | None,
    local_zone: str,
    make_app: AppFactory,
    serve: Callable[[Flask], LiveServer],
    ledger: Ledger,
    make_body: BodyFactory,
    db_rows: Rows,
) -> None:
    # The SDK writes both times in local time; without a `timezone` header that is the
    # configured PAYHOOKS_PAYMENT_TIME_ZONE, for the age check as for `payment_time`.
    pair = generate_keypair("sorted-fields-rsa")
    server = serve(
        make_app(
            PAYHOOKS_SIGNATURE_SCHEME="sorted-fields-rsa",
            PAYHOOKS_SECRETS=None,
            PAYHOOKS_PUBLIC_KEYS=[pair.verifying_key],
            PAYHOOKS_SIGNATURE_OPTIONS={"check_timestamp": True},
            PAYHOOKS_PAYMENT_TIME_ZONE="Asia/Shanghai",
        )
    )
    zone = zone_from_header(local_zone)
    assert zone is not None
    local_now = datetime.now(UTC).astimezone(zone).strftime("%Y%m%d%H%M%S")
    body = make_body("wallet", payment_time=local_now)
    headers = {
        name: value
        for name, value in get_signer("sorted-fields-rsa", pair.signing_key).sign(body).items()
        if name != "timezone"
    }
    headers["timestamp"] = local_now
    if timezone_header is not None:
        headers["timezone"] = timezone_header

    reply = server.post(NOTIFY, body, headers)

    assert reply.status == 200, reply.json()
    (outcome,) = db_rows("SELECT paid_at FROM outcomes")
    paid_at = datetime.fromisoformat(outcome["paid_at"])
    assert abs(datetime.now(UTC) - paid_at) < timedelta(minutes=5)


def test_the_customer_return_reports_processing_then_paid_once_notified(
    app: Flask,
    live_server: LiveServer,
    ledger: Ledger,
    make_body: BodyFactory,
    sign: SignFunction,
    db_rows: Rows,
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    with app.test_request_context():
        path = return_url("order-1", _external=False)
    accept_json = {"accept": "application/json"}

    before = live_server.get(path + "&resultCode=Authorised", accept_json)
    body = make_body("orchestrator")
    live_server.post(NOTIFY, body, sign(body))
    after = live_server.get(path, accept_json)

    assert before.json() == {
        "external_identifier": "order-1",
        "state": "processing",
        "confirmed": False,
        "result_code": "Authorised",
    }
    assert after.json()["state"] == "paid"
    assert after.json()["confirmed"] is True
    assert [row["kind"] for row in db_rows("SELECT kind FROM returns")] == ["return", "return"]


def _gunicorn_port(process: subprocess.Popen[str], lines: queue.Queue[str]) -> int:
    """Wait for gunicorn to say where it listens; fail with its output if it does not."""
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=30)
        except queue.Empty:
            pytest.fail("gunicorn did not start:\n" + "".join(seen))
        seen.append(line)
        match = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", line)
        if match:
            return int(match.group(1))
        if process.poll() is not None:
            pytest.fail("gunicorn exited:\n" + "".join(seen))


def test_gunicorn_sync_workers_forked_from_a_preloaded_app_each_store_deliveries(
    tmp_path: Path, secret: str, make_body: BodyFactory, sign: SignFunction
) -> None:
    database = tmp_path / "gunicorn.db"
    with Ledger(database) as setup:
        for number in range(12):
            setup.expect_transaction(f"order-{number}", 2500, "CNY")
    env = {
        **os.environ,
        "HOME": str(tmp_path),  # gunicorn's control socket goes under $HOME
        "PAYHOOKS_SECRETS": secret,
        "PAYHOOKS_DATABASE": str(database),
        "SECRET_KEY": "gunicorn-test",
    }
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "--workers",
        "3",
        "--worker-class",
        "sync",
        "--preload",
        "--bind",
        "127.0.0.1:0",
        "payhooks.receiver.demo:create_app()",
    ]
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(
        command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    ) as process:
        stderr = process.stderr
        assert stderr is not None

        def pump() -> None:
            for line in stderr:
                lines.put(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            port = _gunicorn_port(process, lines)
            with ThreadPoolExecutor(max_workers=6) as pool:
                statuses = list(
                    pool.map(lambda number: _deliver(port, number, make_body, sign), range(12))
                )
        finally:
            process.terminate()
            process.wait(timeout=30)
            reader.join(timeout=30)

    assert statuses == [200] * 12
    with Ledger(database) as check:
        assert {row.state for row in check.reconcile()} == {"paid"}


def _deliver(port: int, number: int, make_body: BodyFactory, sign: SignFunction) -> int:
    body = make_body("wallet", external_identifier=f"order-{number}", transaction_id=f"ll-{number}")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", NOTIFY, body=body, headers=sign(body))
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()
