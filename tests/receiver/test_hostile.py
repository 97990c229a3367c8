"""Hostile input against the webhook endpoint, through Flask's test client, for every scheme.

What must hold whatever arrives: no answer is a 500; nothing without a valid signature gets
past verification, so nothing unauthenticated is stored as a delivery and no outcome is made
from it; an authentic body, however strange, is stored and answered 200, 400 or 422 (never
503 for a body that will never parse, or the service would retry it forever); replayed old
deliveries are refused as stale; and ``rejected_deliveries`` stays within its bound. (Under
the sorted-fields schemes an "authentic body" is one its signed string determines; the others
are refused as ``non_canonical_body``, which ``tests/receiver/test_signature_integrity.py``
covers.)

The test client is fast enough for volume; what it hides (raw headers, bad framing) is in
``test_hostile_http.py``.
"""

from __future__ import annotations

import codecs
import json
import sqlite3
import time
import weakref
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from payhooks.storage import Ledger
from payhooks.storage.limits import DEFAULT_MAX_REJECTED
from payhooks.verify import (
    SCHEMES,
    KeyPair,
    NonCanonicalBodyError,
    Signer,
    generate_keypair,
    get_signer,
    get_verifier,
)
from tests.support.app import AppFactory
from tests.support.notifications import PROVIDERS

NOTIFY = "/payhooks/notifications"
ALL_SCHEMES = sorted(SCHEMES)
RAW_BODY_SCHEMES = [name for name in ALL_SCHEMES if not SCHEMES[name].parses_body]
TIMESTAMPED = ["standard-webhooks", "standard-webhooks-ed25519", "sorted-fields-rsa"]
SIGNATURE_CODES = {
    "missing_signature",
    "malformed_signature",
    "invalid_signature",
    "timestamp_out_of_tolerance",
}
#: What an authentic body may get: stored and processed, or stored and refused as unreadable.
AUTHENTIC_ANSWERS = {200, 400, 422}

#: Refusals decided by the signature, before the ledger is asked anything: the engine does
#: not matter, so these run on SQLite only (their examples on PostgreSQL took half this
#: module's time and tested the same code).
BEFORE_THE_LEDGER = pytest.mark.sqlite_only

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

Rows = Callable[..., list[dict[str, Any]]]


@cache
def keys_for(scheme: str) -> KeyPair:
    """One key pair per scheme for the whole module (RSA keys are slow to make)."""
    return generate_keypair(scheme)


def scheme_config(scheme: str, **options: Any) -> dict[str, Any]:
    key_config = (
        "PAYHOOKS_SECRETS" if SCHEMES[scheme].key_kind == "secret" else "PAYHOOKS_PUBLIC_KEYS"
    )
    if scheme == "sorted-fields-hmac":
        # The card and orchestrator forms are read only for the providers it is told.
        options = {"providers": list(PROVIDERS), **options}
    return {
        "PAYHOOKS_SIGNATURE_SCHEME": scheme,
        key_config: [keys_for(scheme).verifying_key],
        "PAYHOOKS_SIGNATURE_OPTIONS": options,
    }


@cache
def signer_for(scheme: str) -> Signer:
    """One signer per scheme: a signer keeps no state between signatures, and loading an RSA
    private key checks the key (about 60 ms of CPU), once per example before."""
    return get_signer(scheme, keys_for(scheme).signing_key)


def notification(**payment_data: Any) -> dict[str, Any]:
    return {
        "ll_transaction_id": "ll-1",
        "merchant_transaction_id": "order-1",
        "payment_data": {
            "payment_status": "PS",
            "payment_amount": "25.00",
            "payment_currency_code": "CNY",
            "payment_time": "20261121120000",
            **payment_data,
        },
    }


def post(client: FlaskClient, body: bytes, headers: Mapping[str, str]) -> Any:
    return client.post(NOTIFY, data=body, headers=dict(headers))


def assert_refused(response: Any) -> str:
    """A 401 in the error shape with a signature code; the code."""
    assert response.status_code == 401, response.get_data(as_text=True)
    code: str = response.get_json()["error"]["code"]
    assert code in SIGNATURE_CODES
    return code


def count(db_rows: Rows, table: str) -> int:
    return int(db_rows(f"SELECT COUNT(*) AS n FROM {table}")[0]["n"])  # noqa: S608


# -- strategies -------------------------------------------------------------------------------

#: Header text the test client can carry (it encodes headers as latin-1): printable, any
#: latin-1 letter, sometimes very long.
header_text = st.one_of(
    st.text(st.characters(codec="latin-1", exclude_categories=["Cc"]), max_size=200),
    st.integers(1000, 20_000).map(lambda n: "v1," + "A" * n),
    st.sampled_from(["", " ", "v1,", ",", "v1a,====", "v1,AAAA v2,BBBB", "0" * 40, "-1"]),
)


def headers_for(scheme: str) -> st.SearchStrategy[dict[str, str]]:
    """Any subset of the scheme's own headers (in any case) with any values."""
    names = [*get_verifier_names(scheme), "timezone", "webhook-id", "signature"]
    name = st.sampled_from(names).flatmap(lambda n: st.sampled_from([n, n.upper(), n.title()]))
    return st.dictionaries(name, header_text, max_size=5)


def get_verifier_names(scheme: str) -> tuple[str, ...]:
    options: dict[str, Any] = {"check_timestamp": True} if scheme == "sorted-fields-rsa" else {}
    return get_verifier(scheme, keys_for(scheme).verifying_key, **options).header_names


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.text(max_size=30),
    st.decimals(allow_nan=False, allow_infinity=False).map(str),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)


def _nested(depth: int, opener: str = "[", closer: str = "]") -> bytes:
    return (opener * depth + closer * depth).encode()


def _member_nested(depth: int) -> bytes:
    inner = '{"a":' * depth + "1" + "}" * depth
    return json.dumps(notification()).replace('"PS"', '"PS", "deep": ' + inner, 1).encode()


def _encoded(encoding: str) -> bytes:
    text = json.dumps(notification(note="café 支付"), ensure_ascii=False)
    return text.encode(encoding, errors="replace")


#: The ``payment_data`` members an authentic body carries in one form or another.
_PAYMENT_MEMBERS = [
    "payment_status",
    "payment_amount",
    "payment_currency_code",
    "payment_time",
    "stripe_payment_intent_id",
    "status",
    "adyen_psp_reference",
    "result_code",
]


def _one_member_made(
    values: st.SearchStrategy[Any], top_members: list[str], top_values: st.SearchStrategy[Any]
) -> st.SearchStrategy[bytes]:
    """Authentic-looking bodies with one ``payment_data`` member set to one of ``values``, or
    one of ``top_members`` to one of ``top_values``."""
    return st.one_of(
        st.builds(
            lambda key, value: json.dumps(notification(**{key: value})).encode(),
            st.sampled_from(_PAYMENT_MEMBERS),
            values,
        ),
        st.builds(
            lambda key, value: json.dumps({**notification(), key: value}).encode(),
            st.sampled_from(top_members),
            top_values,
        ),
    )


#: Authentic bodies that must be refused 400/422 (or, where noted, accepted).
#: Authentic-looking JSON objects with one member made hostile: the bodies the sorted-fields
#: schemes can still canonicalize, and so sign.
object_bodies = _one_member_made(
    json_values,
    ["ll_transaction_id", "merchant_transaction_id", "payment_data"],
    st.one_of(json_values, st.integers(0, 70_000).map(lambda n: "x" * n)),
)

#: The same, in the shape the sorted-fields schemes accept (every value a string): the other
#: shapes are refused before anything stores them, as ``non_canonical_body``.
canonical_object_bodies = _one_member_made(
    st.text(min_size=1, max_size=30),
    ["ll_transaction_id", "merchant_transaction_id"],
    st.one_of(st.text(min_size=1, max_size=30), st.integers(1, 70_000).map(lambda n: "x" * n)),
)

hostile_bodies = st.one_of(
    st.binary(max_size=2048),
    st.integers(1, 30_000).map(_nested),
    st.integers(1, 20_000).map(lambda d: _nested(d, '{"a":', "}")[: 5 * d] + b"1" + b"}" * d),
    st.integers(20, 10_000).map(_member_nested),
    st.sampled_from(["utf-16", "utf-16-le", "utf-32", "latin-1", "utf-8-sig", "cp1252"]).map(
        _encoded
    ),
    st.builds(
        lambda prefix, junk: json.dumps(notification()).encode()[:prefix] + junk,
        st.integers(0, 200),
        st.binary(min_size=1, max_size=8).filter(lambda b: not _is_utf8(b)),
    ),
    st.sampled_from(
        [
            # duplicate members, at the top and inside payment_data
            b'{"ll_transaction_id": "a", "ll_transaction_id": "b", "merchant_transaction_id":'
            b' "o", "payment_data": {}}',
            json.dumps(notification()).replace('"PS"', '"PS", "payment_status": "PF"').encode(),
            b'{"ll_transaction_id": "\\ud800", "merchant_transaction_id": "o", "payment_data":'
            b' {"payment_status": "PS"}}',
            json.dumps(notification(payment_amount=float("nan"))).encode(),
            json.dumps(notification(payment_amount="1" * 60_000 + ".00")).encode(),
            b'{"ll_transaction_id": 1' + b"0" * 10_000 + b"}",
            b"\xef\xbb\xbf" + json.dumps(notification()).encode(),
            codecs.BOM_UTF16_LE + json.dumps(notification()).encode("utf-16-le"),
            b"[]",
            b"null",
            b'"a string"',
            b"",
        ]
    ),
    object_bodies,
    json_values.map(lambda value: json.dumps(value).encode()),
)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# -- unauthenticated input --------------------------------------------------------------------


@BEFORE_THE_LEDGER
@pytest.mark.parametrize("scheme", ALL_SCHEMES)
@FUZZ
@given(
    body=st.one_of(st.binary(max_size=1024), hostile_bodies.filter(lambda b: len(b) < 60_000)),
    data=st.data(),
)
def test_random_headers_and_bodies_never_get_past_verification(
    make_app: AppFactory, db_rows: Rows, scheme: str, body: bytes, data: st.DataObject
) -> None:
    client = _client(make_app, scheme)
    headers = data.draw(headers_for(scheme))

    assert_refused(post(client, body, headers))
    assert count(db_rows, "deliveries") == count(db_rows, "outcomes") == 0


#: The apps each test's ``make_app`` built, by scheme and options, so that hypothesis' examples
#: share one app (and one database) instead of building one per example.
_APPS: weakref.WeakKeyDictionary[AppFactory, dict[str, Flask]] = weakref.WeakKeyDictionary()


def _client(make_app: AppFactory, scheme: str, **options: Any) -> FlaskClient:
    apps = _APPS.setdefault(make_app, {})
    key = scheme + repr(sorted(options.items()))
    if key not in apps:
        apps[key] = make_app(**scheme_config(scheme, **options))
        Ledger(apps[key].config["PAYHOOKS_DATABASE"]).close()  # the tables, before any count
    return apps[key].test_client()


@BEFORE_THE_LEDGER
@pytest.mark.parametrize("scheme", ALL_SCHEMES)
@FUZZ
@given(
    signed=st.builds(notification, payment_amount=st.sampled_from(["25.00", "1.00"])),
    changed=st.sampled_from(
        [
            ("payment_amount", "2500.00"),
            ("payment_currency_code", "USD"),
            ("payment_status", "PF"),
            ("payment_time", "20261121120001"),
            ("note", "added"),
        ]
    ),
    in_place=st.booleans(),
)
def test_a_signature_made_for_another_body_is_invalid(
    make_app: AppFactory,
    db_rows: Rows,
    scheme: str,
    signed: dict[str, Any],
    changed: tuple[str, str],
    in_place: bool,
) -> None:
    client = _client(make_app, scheme)
    signed_body = json.dumps(signed).encode()
    headers = signer_for(scheme).sign(signed_body)
    key, value = changed
    forged = json.loads(signed_body)
    (forged["payment_data"] if in_place else forged)[key] = value

    assert assert_refused(post(client, json.dumps(forged).encode(), headers)) == (
        "invalid_signature"
    )
    assert count(db_rows, "deliveries") == 0


@BEFORE_THE_LEDGER
@pytest.mark.parametrize("signed_with", ALL_SCHEMES)
@pytest.mark.parametrize("scheme", ALL_SCHEMES)
def test_a_delivery_signed_for_another_scheme_or_key_is_refused(
    make_app: AppFactory, db_rows: Rows, scheme: str, signed_with: str
) -> None:
    client = _client(make_app, scheme)
    body = json.dumps(notification()).encode()
    # The same scheme with a key of its own kind that is not configured, else the other scheme.
    other_key = generate_keypair(signed_with).signing_key
    headers = get_signer(signed_with, other_key).sign(body)

    code = assert_refused(post(client, body, headers))

    assert code in {"missing_signature", "malformed_signature", "invalid_signature"}
    assert count(db_rows, "deliveries") == 0


@BEFORE_THE_LEDGER
@pytest.mark.parametrize("scheme", TIMESTAMPED)
@FUZZ
@given(
    # Past the 300 s tolerance. A time from the past only grows older before it is checked; one
    # from the future comes closer: the signers write whole seconds (a future time floored
    # loses up to 1 s) and a loaded machine may take seconds to verify, hence its margin.
    age=st.one_of(st.integers(301, 10 * 365 * 86_400), st.integers(-10 * 365 * 86_400, -330)),
)
def test_a_replayed_old_delivery_is_refused_as_stale_and_not_stored(
    make_app: AppFactory, db_rows: Rows, scheme: str, age: int
) -> None:
    options = {"check_timestamp": True} if scheme == "sorted-fields-rsa" else {}
    client = _client(make_app, scheme, **options)
    body = json.dumps(notification()).encode()
    # Captured `age` seconds ago (or dated in the future): authentic, but out of tolerance.
    headers = signer_for(scheme).sign(body, timestamp=time.time() - age)

    assert assert_refused(post(client, body, headers)) == "timestamp_out_of_tolerance"
    assert count(db_rows, "deliveries") == 0


def test_a_delivery_accepted_once_and_replayed_later_is_refused(
    make_app: AppFactory, db_rows: Rows
) -> None:
    client = _client(make_app, "standard-webhooks")
    body = json.dumps(notification()).encode()
    signer = signer_for("standard-webhooks")
    on_time = signer.sign(body, webhook_id="msg_replayed", timestamp=time.time() - 290)
    assert post(client, body, on_time).status_code == 200

    replay = signer.sign(body, webhook_id="msg_replayed", timestamp=time.time() - 400)

    assert assert_refused(post(client, body, replay)) == "timestamp_out_of_tolerance"
    assert db_rows("SELECT attempts FROM deliveries") == [{"attempts": 1}]


# -- authentic but hostile input --------------------------------------------------------------


@pytest.mark.parametrize("scheme", ALL_SCHEMES)
@FUZZ
@given(data=st.data())
def test_an_authentic_body_whatever_it_holds_never_gets_a_server_error(
    make_app: AppFactory, db_rows: Rows, scheme: str, data: st.DataObject
) -> None:
    # The sorted-fields schemes can only sign what they can canonicalize (JSON objects); the
    # bodies they cannot sign are covered, unsigned, by the test above. Of those they sign,
    # they accept only the ones their signed string determines (the others are refused as
    # non_canonical_body, before anything is stored: test_signature_integrity.py).
    body = data.draw(canonical_object_bodies if SCHEMES[scheme].parses_body else hostile_bodies)
    client = _client(make_app, scheme)
    try:
        headers = signer_for(scheme).sign(body)
    except ValueError:
        assume(False)
    if SCHEMES[scheme].parses_body:
        options = scheme_config(scheme)["PAYHOOKS_SIGNATURE_OPTIONS"]
        verifier = get_verifier(scheme, keys_for(scheme).verifying_key, **options)
        try:
            verifier.verify(headers, body)
        except NonCanonicalBodyError:
            assume(False)
    before = count(db_rows, "deliveries")

    response = post(client, body, headers)

    if len(body) > 65_536:
        assert response.status_code == 413
        assert count(db_rows, "deliveries") == before
        return
    assert response.status_code in AUTHENTIC_ANSWERS, response.get_data(as_text=True)
    if response.status_code != 200:
        assert response.get_json()["error"]["code"] in {"malformed_json", "invalid_payload"}
    # Stored whatever it held (or recognised as one stored before): the service need not retry.
    stored = db_rows("SELECT status FROM deliveries WHERE id = (SELECT MAX(id) FROM deliveries)")
    assert stored
    assert stored[0]["status"] in {
        "processed",
        "duplicate",
        "conflicting_outcome",  # the same transaction and status said otherwise before
        "malformed_json",
        "invalid_payload",
    }


@FUZZ
@given(
    zone=header_text,
    webhook_id=st.one_of(
        st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), min_size=1),
        st.integers(256, 6000).map(lambda n: "m" * n),
    ),
)
def test_authentic_headers_with_odd_values_are_stored_not_refused(
    make_app: AppFactory, db_rows: Rows, zone: str, webhook_id: str
) -> None:
    """The unsigned ``timezone`` header names no zone: the configured one applies; an odd or
    long ``webhook-id`` is still a key to deduplicate on."""
    assume(webhook_id.strip() == webhook_id)
    client = _client(make_app, "standard-webhooks")
    body = json.dumps(notification()).encode()
    headers = {**_sign_with_id(body, webhook_id), "timezone": zone}

    response = post(client, body, headers)

    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["status"] in {"processed", "duplicate"}
    assert db_rows("SELECT COUNT(*) AS n FROM deliveries WHERE dedupe_key = ?", webhook_id) == [
        {"n": 1}
    ]


def _sign_with_id(body: bytes, webhook_id: str) -> dict[str, str]:
    """Standard Webhooks headers for any id (the signer refuses ids it would not send)."""
    import base64
    import hashlib
    import hmac

    from payhooks.verify.keys import decode_whsec

    key = decode_whsec(keys_for("standard-webhooks").signing_key, argument="key")
    timestamp = str(int(time.time()))
    mac = hmac.digest(key, f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": timestamp,
        "webhook-signature": "v1," + base64.b64encode(mac).decode(),
    }


# -- authentic but conflicting ---------------------------------------------------------------


@pytest.mark.parametrize("order", ["expected-first", "stray-first"])
def test_an_outcome_redelivered_under_another_identifier_is_kept_as_a_conflict(
    make_app: AppFactory, db_rows: Rows, ledger: Ledger, order: str
) -> None:
    """The same transaction and status under another ``merchant_transaction_id``: the first
    stored outcome stands, the second delivery is kept and flagged, and the answer reports the
    payment the stored outcome names, instead of failing on one that has no outcome."""
    client = _client(make_app, "standard-webhooks")
    signer = signer_for("standard-webhooks")
    ledger.expect_transaction("order-1", 2500, "CNY")
    first, second = ("order-1", "stray-1") if order == "expected-first" else ("stray-1", "order-1")
    answers = []
    for identifier in (first, second):
        data = json.dumps({**notification(), "merchant_transaction_id": identifier}).encode()
        answers.append(post(client, data, signer.sign(data)))

    assert [a.status_code for a in answers] == [200, 200], answers[1].get_data(as_text=True)
    assert [a.get_json()["status"] for a in answers] == ["processed", "conflicting_outcome"]
    state = "paid" if first == "order-1" else "unexpected"
    assert answers[1].get_json()["reconciliation"] == state
    assert db_rows("SELECT external_identifier FROM outcomes") == [{"external_identifier": first}]
    assert [r["status"] for r in db_rows("SELECT status FROM deliveries ORDER BY id")] == [
        "processed",
        "conflicting_outcome",
    ]


class _UnreadableStream:
    """A WSGI input that fails as gunicorn's does when a body is cut short or badly chunked."""

    def __init__(self, error: Exception) -> None:
        self._error = error

    def read(self, size: int = -1) -> bytes:
        raise self._error

    def readinto(self, buffer: bytearray) -> int:
        raise self._error


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(ConnectionResetError("reset"), id="connection-reset"),
        pytest.param(TimeoutError("timed out"), id="timeout"),
        pytest.param(ValueError("invalid chunk size"), id="parse-error"),
    ],
)
def test_a_body_the_server_cannot_read_is_a_400_not_a_500(
    make_app: AppFactory, db_rows: Rows, error: Exception
) -> None:
    client = _client(make_app, "standard-webhooks")

    response = client.post(
        NOTIFY,
        headers={"Transfer-Encoding": "chunked"},
        environ_overrides={
            "wsgi.input": _UnreadableStream(error),
            "wsgi.input_terminated": True,
        },
    )

    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "bad_request"
    assert count(db_rows, "deliveries") == count(db_rows, "rejected_deliveries") == 0


# -- bounds -----------------------------------------------------------------------------------


@pytest.mark.sqlite_only  # reads or locks the SQLite file itself
def test_rejected_deliveries_keep_only_the_newest_within_the_bound(
    make_app: AppFactory, db_rows: Rows, database: Path
) -> None:
    """A flood of forged deliveries cannot fill the disk: past the ledger's bound (10,000 by
    default) each new refusal prunes the oldest, and each keeps at most 4 KiB of its body.

    The table is filled close to the bound directly (a flood's aftermath, made fast), then the
    last forged deliveries go through the receiver."""
    client = _client(make_app, "standard-webhooks")
    earlier = DEFAULT_MAX_REJECTED - 10
    conn = sqlite3.connect(database)
    with conn:
        conn.executemany(
            "INSERT INTO rejected_deliveries (received_at, remote_addr, reason, body, body_size) "
            "VALUES ('2026-01-01T00:00:00+00:00', '127.0.0.1', 'missing_signature', x'', 0)",
            [()] * earlier,
        )
    conn.close()
    forged = {"webhook-id": "m", "webhook-timestamp": "1"}  # no signature header

    for _ in range(40):
        assert post(client, b"x" * 10_000, forged).status_code == 401

    flood = earlier + 40
    kept = db_rows(
        "SELECT MIN(id) AS first, MAX(id) AS last, COUNT(*) AS n FROM rejected_deliveries"
    )
    assert kept == [
        {"first": flood - DEFAULT_MAX_REJECTED + 1, "last": flood, "n": DEFAULT_MAX_REJECTED}
    ]
    newest = db_rows(
        "SELECT length(body) AS kept, body_size FROM rejected_deliveries WHERE id > ?", earlier
    )
    assert newest == [{"kept": 4096, "body_size": 10_000}] * 40
    assert count(db_rows, "deliveries") == 0


def test_the_largest_amounts_the_ledger_takes_still_add_up(
    make_app: AppFactory, db_rows: Rows, ledger: Ledger
) -> None:
    """Amounts at the bound, many times over one payment and one currency: the sums the
    reconciliation makes must not overflow SQLite's 64-bit integers."""
    from payhooks.storage import MAX_AMOUNT_MINOR

    client = _client(make_app, "standard-webhooks")
    signer = signer_for("standard-webhooks")
    largest = f"{MAX_AMOUNT_MINOR // 100}.{MAX_AMOUNT_MINOR % 100:02d}"
    ledger.expect_subscription("sub-1", MAX_AMOUNT_MINOR, "CNY", MAX_AMOUNT_MINOR)
    answers = []
    for number in range(12):
        body = notification(payment_amount=largest, payment_time=f"2026{number + 1:02d}01000000")
        body["merchant_transaction_id"] = "sub-1" if number < 6 else f"stray-{number}"
        body["ll_transaction_id"] = f"ll-{number}"
        data = json.dumps(body).encode()
        answers.append(post(client, data, signer.sign(data)).status_code)

    assert answers == [200] * 12
    assert ledger.state("sub-1") == "paid"
    totals = {(row.state, row.count, row.received_amount_minor) for row in ledger.summary()}
    assert totals == {("paid", 1, 6 * MAX_AMOUNT_MINOR), ("unexpected", 6, 6 * MAX_AMOUNT_MINOR)}


@pytest.mark.parametrize("scheme", RAW_BODY_SCHEMES)
def test_an_authentic_amount_over_the_bound_is_an_invalid_payload(
    make_app: AppFactory, db_rows: Rows, scheme: str
) -> None:
    from payhooks.storage import MAX_AMOUNT_MINOR

    client = _client(make_app, scheme)
    too_much = MAX_AMOUNT_MINOR + 1
    body = json.dumps(
        notification(payment_amount=f"{too_much // 100}.{too_much % 100:02d}")
    ).encode()

    response = post(client, body, signer_for(scheme).sign(body))

    assert response.status_code == 422
    assert response.get_json()["error"]["details"] == {
        "payment_data": {"payment_amount": ["Too large an amount."]}
    }
    assert db_rows("SELECT status FROM deliveries") == [{"status": "invalid_payload"}]


# -- the customer's return ----------------------------------------------------------------


@FUZZ
@given(
    identifier=st.text(min_size=1, max_size=300).filter(lambda s: "\x00" not in s),
    query=st.dictionaries(
        st.sampled_from(["token", "resultCode", "x"]), st.text(max_size=300), max_size=3
    ),
    route=st.sampled_from(["return", "cancel"]),
    accept=st.sampled_from(["application/json", "text/html", "*/*", ""]),
)
def test_the_return_routes_never_get_a_server_error(
    app: Flask, identifier: str, query: dict[str, str], route: str, accept: str
) -> None:
    client = app.test_client()

    response = client.get(
        f"/payhooks/{route}/{quote(identifier)}", query_string=query, headers={"Accept": accept}
    )

    assert response.status_code in {200, 303, 404}, response.get_data(as_text=True)
