"""The Standard Webhooks schemes beyond the shared contract: the header grammar, the signed
content, the Ed25519 form of the specification, and tampering of any single byte."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from hypothesis import given, settings
from hypothesis import strategies as st

from payhooks.verify import (
    InvalidSignatureError,
    MalformedSignatureError,
    MissingSignatureError,
    Verifier,
    get_signer,
    get_verifier,
)

NOW = 1_795_000_000
SECRET_BYTES = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(SECRET_BYTES).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"\x01" * 32).decode()
BODY = b'{"merchant_transaction_id":"order-1","payment_data":{"payment_status":"PS"}}'
MSG_ID = "msg_2pQ9sX"


def clock() -> float:
    return float(NOW)


def hmac_verifier(*secrets: str, **options: Any) -> Verifier:
    return get_verifier("standard-webhooks", list(secrets or [SECRET]), clock=clock, **options)


def v1_entry(secret_bytes: bytes, msg_id: str, timestamp: str, body: bytes) -> str:
    """A v1 entry computed from the specification, independently of payhooks."""
    mac = hmac.new(secret_bytes, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def headers(signature: str, *, msg_id: str = MSG_ID, timestamp: str = str(NOW)) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": timestamp, "webhook-signature": signature}


GOOD = v1_entry(SECRET_BYTES, MSG_ID, str(NOW), BODY)


def test_signer_writes_the_specified_v1_entry() -> None:
    sent = get_signer("standard-webhooks", SECRET).sign(BODY, webhook_id=MSG_ID, timestamp=NOW)
    assert sent == headers(GOOD)


def test_delivery_verifies_and_reports_its_id_and_time() -> None:
    verified = hmac_verifier().verify(headers(GOOD), BODY)
    assert verified.scheme == "standard-webhooks"
    assert verified.webhook_id == MSG_ID
    assert verified.timestamp == datetime.fromtimestamp(NOW, UTC)


def test_bytes_that_are_not_utf8_are_verified_as_received() -> None:
    body = b"\xff\xfe\x00 not text"
    signature = v1_entry(SECRET_BYTES, MSG_ID, str(NOW), body)
    assert hmac_verifier().is_valid(headers(signature), body)


@pytest.mark.parametrize(
    "header",
    [
        f"{GOOD}",
        f"v1,AAAA {GOOD}",
        f"{GOOD} v1,AAAA",
        f"v1a,{'A' * 88} {GOOD}",
        f"v2,whatever {GOOD} v0,x",
        f"  {GOOD}   ",
        f"v1,{'A' * 43}= {GOOD}",
    ],
    ids=[
        "alone",
        "after-a-bad-v1",
        "before-a-bad-v1",
        "after-v1a",
        "among-others",
        "padded",
        "after-a-wrong-v1",
    ],
)
def test_any_matching_entry_among_several_passes(header: str) -> None:
    assert hmac_verifier().is_valid(headers(header), BODY)


def test_several_entries_and_several_keys_pass_when_any_pair_matches() -> None:
    other = v1_entry(b"\x01" * 32, MSG_ID, str(NOW), BODY)
    third = "whsec_" + base64.b64encode(b"\x02" * 32).decode()
    header = f"v1,{'B' * 43}= {other}"
    assert hmac_verifier(third, OTHER_SECRET).is_valid(headers(header), BODY)
    assert not hmac_verifier(third, SECRET).is_valid(headers(header), BODY)


@pytest.mark.parametrize("header", [f"v1,AAAA\t{GOOD}", f"v1,AAAA\t{GOOD} v2,x"])
def test_entries_are_separated_by_spaces_only(header: str) -> None:
    with pytest.raises(InvalidSignatureError):
        hmac_verifier().verify(headers(header), BODY)


@pytest.mark.parametrize("header", ["garbage", "v1", ",abc", "v1,", "   ", "v1;abc", "abc def"])
def test_header_without_a_parseable_entry_is_malformed(header: str) -> None:
    with pytest.raises(MalformedSignatureError) as exc_info:
        hmac_verifier().verify(headers(header), BODY)
    assert exc_info.value.code == "malformed_signature"
    assert exc_info.value.header == "webhook-signature"


@pytest.mark.parametrize(
    "header",
    [
        "v1a," + base64.b64encode(b"\x00" * 64).decode(),
        "v2," + GOOD[3:],
        "v1,not*base64!",
        "v1," + GOOD[3:-8],
        "v1," + base64.b64encode(b"\x00" * 31).decode(),
        "v1," + GOOD[3:].rstrip("="),
        "V1," + GOOD[3:],
    ],
    ids=[
        "only-v1a",
        "only-v2",
        "not-base64",
        "truncated",
        "31-bytes",
        "unpadded",
        "upper-case-version",
    ],
)
def test_parseable_header_without_a_matching_v1_entry_is_invalid(header: str) -> None:
    with pytest.raises(InvalidSignatureError) as exc_info:
        hmac_verifier().verify(headers(header), BODY)
    assert exc_info.value.code == "invalid_signature"


@pytest.mark.parametrize(
    "timestamp",
    [
        "abc",
        "1.5",
        "-1",
        "+1795000000",
        "\uff11\uff17\uff19\uff15",
        " 1795000000",
        "123456789012",
        "1_795",
    ],
)
def test_timestamp_that_is_not_whole_seconds_is_malformed(timestamp: str) -> None:
    with pytest.raises(MalformedSignatureError) as exc_info:
        hmac_verifier().verify(headers(GOOD, timestamp=timestamp), BODY)
    assert exc_info.value.header == "webhook-timestamp"


def test_id_that_cannot_be_encoded_is_malformed() -> None:
    with pytest.raises(MalformedSignatureError) as exc_info:
        hmac_verifier().verify(headers(GOOD, msg_id="msg_\ud800"), BODY)
    assert exc_info.value.header == "webhook-id"


@pytest.mark.parametrize("name", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_empty_header_is_missing(name: str) -> None:
    sent = {**headers(GOOD), name: ""}
    with pytest.raises(MissingSignatureError) as exc_info:
        hmac_verifier().verify(sent, BODY)
    assert exc_info.value.header == name


def test_timestamp_is_read_as_sent_not_reformatted() -> None:
    # Leading zeros are signed as they stand; the verifier must not normalize them away.
    padded = "0" + str(NOW)
    signature = v1_entry(SECRET_BYTES, MSG_ID, padded, BODY)
    assert hmac_verifier().is_valid(headers(signature, timestamp=padded), BODY)
    assert not hmac_verifier().is_valid(headers(signature, timestamp=str(NOW)), BODY)


@pytest.mark.parametrize(
    "secret",
    [SECRET, SECRET.removeprefix("whsec_"), SECRET.rstrip("=")],
    ids=["prefixed", "bare-base64", "unpadded"],
)
def test_whsec_forms_the_reference_package_accepts_are_accepted(secret: str) -> None:
    assert hmac_verifier(secret).is_valid(headers(GOOD), BODY)


@pytest.mark.parametrize("secret", ["whsec_", "whsec_!!!!", "whsec_YQ"[:-1] + "="])
def test_unusable_whsec_is_refused_without_echoing_it(secret: str) -> None:
    with pytest.raises(ValueError, match=r"keys\[0\]") as exc_info:
        hmac_verifier(secret)
    assert "!!!!" not in str(exc_info.value)


# -- tampering: any one changed byte is rejected ----------------------------------------------


@settings(max_examples=150, deadline=None)
@given(body=st.binary(min_size=1, max_size=300), data=st.data())
def test_any_changed_body_byte_is_rejected_as_invalid(body: bytes, data: st.DataObject) -> None:
    sent = get_signer("standard-webhooks", SECRET).sign(body, timestamp=NOW)
    position = data.draw(st.integers(0, len(body) - 1), label="position")
    replacement = data.draw(
        st.integers(0, 255).filter(lambda value: value != body[position]), label="byte"
    )
    changed = body[:position] + bytes([replacement]) + body[position + 1 :]
    verifier = hmac_verifier()
    assert verifier.is_valid(sent, body)
    with pytest.raises(InvalidSignatureError):
        verifier.verify(sent, changed)


@settings(max_examples=100, deadline=None)
@given(
    msg_id=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40),
    data=st.data(),
)
def test_any_changed_id_character_is_rejected_as_invalid(msg_id: str, data: st.DataObject) -> None:
    sent = get_signer("standard-webhooks", SECRET).sign(BODY, webhook_id=msg_id, timestamp=NOW)
    position = data.draw(st.integers(0, len(msg_id) - 1), label="position")
    replacement = data.draw(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E).filter(
            lambda char: char != msg_id[position]
        ),
        label="char",
    )
    changed = {**sent, "webhook-id": msg_id[:position] + replacement + msg_id[position + 1 :]}
    with pytest.raises(InvalidSignatureError):
        hmac_verifier().verify(changed, BODY)


@settings(max_examples=60, deadline=None)
@given(position=st.integers(0, len(str(NOW)) - 1), digit=st.sampled_from("0123456789"))
def test_any_changed_timestamp_digit_is_rejected_as_invalid(position: int, digit: str) -> None:
    sent = get_signer("standard-webhooks", SECRET).sign(BODY, webhook_id=MSG_ID, timestamp=NOW)
    text = sent["webhook-timestamp"]
    if text[position] == digit:
        digit = str((int(digit) + 1) % 10)
    changed = {**sent, "webhook-timestamp": text[:position] + digit + text[position + 1 :]}
    # Checked before the time, so even a timestamp far from now reports the signature.
    with pytest.raises(InvalidSignatureError):
        hmac_verifier().verify(changed, BODY)


# -- the signer --------------------------------------------------------------------------------


def test_signer_makes_a_fresh_message_id_by_default() -> None:
    signer = get_signer("standard-webhooks", SECRET)
    first, second = signer.sign(BODY), signer.sign(BODY)
    assert first["webhook-id"].startswith("msg_")
    assert first["webhook-id"] != second["webhook-id"]


def test_signer_reads_an_aware_datetime_in_any_zone() -> None:
    when = datetime.fromtimestamp(NOW, UTC).astimezone(timezone(timedelta(hours=8)))
    sent = get_signer("standard-webhooks", SECRET).sign(BODY, timestamp=when)
    assert sent["webhook-timestamp"] == str(NOW)


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("timestamp", datetime(2026, 11, 18, 12, 0)),
        ("timestamp", -5),
        ("timestamp", float("nan")),
        ("webhook_id", "has space"),
        ("webhook_id", ""),
        ("webhook_id", "x" * 256),
    ],
)
def test_signer_refuses_what_it_cannot_send(argument: str, value: object) -> None:
    with pytest.raises(ValueError, match=argument):
        get_signer("standard-webhooks", SECRET).sign(BODY, **{argument: value})  # type: ignore[arg-type]


def test_signer_refuses_more_than_one_key() -> None:
    with pytest.raises(ValueError, match="key"):
        get_signer("standard-webhooks", [SECRET, OTHER_SECRET])  # type: ignore[arg-type]


# -- Ed25519 (v1a), keys made with cryptography ------------------------------------------------


def whsk(key: ed25519.Ed25519PrivateKey) -> str:
    raw = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return "whsk_" + base64.b64encode(raw).decode()


def whpk(key: ed25519.Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "whpk_" + base64.b64encode(raw).decode()


@pytest.fixture(scope="module")
def ed_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def test_ed25519_signature_is_the_specified_v1a_form(ed_key: ed25519.Ed25519PrivateKey) -> None:
    sent = get_signer("standard-webhooks-ed25519", whsk(ed_key)).sign(
        BODY, webhook_id=MSG_ID, timestamp=NOW
    )
    version, _, value = sent["webhook-signature"].partition(",")
    assert version == "v1a"
    # Verified with cryptography directly, over the content the specification names.
    ed_key.public_key().verify(base64.b64decode(value), f"{MSG_ID}.{NOW}.".encode() + BODY)


def test_ed25519_signature_made_with_cryptography_verifies(
    ed_key: ed25519.Ed25519PrivateKey,
) -> None:
    signature = ed_key.sign(f"{MSG_ID}.{NOW}.".encode() + BODY)
    header = f"v1,{'A' * 43}= v1a,{base64.b64encode(signature).decode()}"
    verifier = get_verifier("standard-webhooks-ed25519", whpk(ed_key.public_key()), clock=clock)
    verified = verifier.verify(headers(header), BODY)
    assert verified.webhook_id == MSG_ID


def test_ed25519_wrong_key_is_rejected(ed_key: ed25519.Ed25519PrivateKey) -> None:
    other = ed25519.Ed25519PrivateKey.generate()
    sent = get_signer("standard-webhooks-ed25519", whsk(ed_key)).sign(BODY, timestamp=NOW)
    verifier = get_verifier("standard-webhooks-ed25519", whpk(other.public_key()), clock=clock)
    with pytest.raises(InvalidSignatureError):
        verifier.verify(sent, BODY)


def test_ed25519_verifier_ignores_v1_entries(ed_key: ed25519.Ed25519PrivateKey) -> None:
    verifier = get_verifier("standard-webhooks-ed25519", whpk(ed_key.public_key()), clock=clock)
    with pytest.raises(InvalidSignatureError):
        verifier.verify(headers(GOOD), BODY)


@pytest.mark.parametrize(
    "key",
    [
        "whsk_" + base64.b64encode(b"\x00" * 32).decode(),
        base64.b64encode(b"\x00" * 32).decode(),
        "whpk_" + base64.b64encode(b"\x00" * 31).decode(),
        "whpk_***",
    ],
    ids=["a-signing-key", "no-prefix", "31-bytes", "not-base64"],
)
def test_ed25519_verifier_refuses_what_is_not_a_whpk_key(key: str) -> None:
    with pytest.raises(ValueError, match=r"keys\[0\].*whpk_"):
        get_verifier("standard-webhooks-ed25519", key)


@pytest.mark.parametrize(
    "key",
    [
        "whpk_" + base64.b64encode(b"\x00" * 32).decode(),
        "whsk_" + base64.b64encode(b"1" * 64).decode(),
    ],
    ids=["a-public-key", "64-bytes"],
)
def test_ed25519_signer_refuses_what_is_not_a_whsk_seed(key: str) -> None:
    with pytest.raises(ValueError, match=r"key.*whsk_"):
        get_signer("standard-webhooks-ed25519", key)
