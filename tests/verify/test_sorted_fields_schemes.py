"""``sorted-fields-rsa`` and ``sorted-fields-hmac`` beyond the shared contract: key forms,
hash options, signatures made independently with ``cryptography`` and ``hmac``, the optional
timestamp check, and bodies that cannot be canonicalized."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa

from payhooks.verify import (
    InvalidSignatureError,
    MalformedSignatureError,
    MissingSignatureError,
    TimestampOutOfToleranceError,
    Verifier,
    get_signer,
    get_verifier,
)

NOW = 1_795_000_000  # 2026-11-18 11:06:40 UTC
NOW_UTC = "20261118110640"
NOW_SHANGHAI = "20261118190640"
BODY = json.dumps(
    {
        "merchant_transaction_id": "order-1",
        "ll_transaction_id": "ll-1",
        "payment_data": {
            "payment_status": "PS",
            "payment_amount": "25.00",
            "payment_currency_code": "CNY",
            "payment_time": "20261118110640",
        },
    }
).encode()
CANONICAL_RSA = (
    "ll_transaction_id=ll-1&merchant_transaction_id=order-1"
    "&payment_amount=25.00&payment_currency_code=CNY&payment_status=PS"
    "&payment_time=20261118110640"
)
CANONICAL_HMAC = (
    "ll_transaction_idll-1merchant_transaction_idorder-1payment_amount25.00"
    "payment_currency_codeCNYpayment_statusPSpayment_time20261118110640"
)


#: What the service's SDK signs with; payhooks must verify it, weak as it is.
SHA1 = hashes.SHA1()  # noqa: S303


def clock() -> float:
    return float(NOW)


@pytest.fixture(scope="module")
def private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem_public(key: rsa.RSAPrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def der_public(key: rsa.RSAPrivateKey) -> str:
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode()


def sdk_signature(key: rsa.RSAPrivateKey, algorithm: hashes.HashAlgorithm) -> str:
    """What the service's SDK sends, made here with cryptography alone."""
    return base64.b64encode(
        key.sign(CANONICAL_RSA.encode(), padding.PKCS1v15(), algorithm)
    ).decode()


def rsa_verifier(public_key: str, **options: Any) -> Verifier:
    return get_verifier("sorted-fields-rsa", public_key, clock=clock, **options)


# -- RSA: key forms and hash algorithms ------------------------------------------------------


@pytest.mark.parametrize("form", ["pem", "pkcs1-pem", "der-base64", "der-base64-wrapped"])
def test_public_key_is_accepted_as_pem_or_bare_base64_der(
    private_key: rsa.RSAPrivateKey, form: str
) -> None:
    if form == "pem":
        text = pem_public(private_key)
    elif form == "pkcs1-pem":
        text = (
            private_key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1)
            .decode()
        )
    elif form == "der-base64":
        text = der_public(private_key)
    else:
        der = der_public(private_key)
        text = "\n".join(der[i : i + 64] for i in range(0, len(der), 64))
    headers = {"signature": sdk_signature(private_key, SHA1)}
    verified = rsa_verifier(text).verify(headers, BODY)
    assert verified.scheme == "sorted-fields-rsa"
    assert verified.webhook_id is None


def test_sha1_is_the_default_and_sha256_an_option(private_key: rsa.RSAPrivateKey) -> None:
    sha1 = {"signature": sdk_signature(private_key, SHA1)}
    sha256 = {"signature": sdk_signature(private_key, hashes.SHA256())}
    default = rsa_verifier(der_public(private_key))
    by_option = rsa_verifier(der_public(private_key), hash_algorithm="sha256")
    assert default.is_valid(sha1, BODY)
    assert not default.is_valid(sha256, BODY)
    assert by_option.is_valid(sha256, BODY)
    assert not by_option.is_valid(sha1, BODY)


def test_wrong_public_key_is_rejected(
    private_key: rsa.RSAPrivateKey, other_private_key: rsa.RSAPrivateKey
) -> None:
    headers = {"signature": sdk_signature(private_key, SHA1)}
    with pytest.raises(InvalidSignatureError) as exc_info:
        rsa_verifier(pem_public(other_private_key)).verify(headers, BODY)
    assert exc_info.value.header == "signature"


def test_signature_covers_the_fields_not_the_layout(private_key: rsa.RSAPrivateKey) -> None:
    relaid = json.dumps(json.loads(BODY), indent=4, sort_keys=True).encode()
    headers = {"signature": sdk_signature(private_key, SHA1)}
    assert rsa_verifier(der_public(private_key)).is_valid(headers, relaid)


@pytest.mark.parametrize(
    "key_format",
    [serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.TraditionalOpenSSL],
)
@pytest.mark.parametrize("algorithm", ["sha1", "sha256"])
def test_signer_signs_the_canonical_string_as_the_sdk_does(
    private_key: rsa.RSAPrivateKey, key_format: serialization.PrivateFormat, algorithm: str
) -> None:
    pem = private_key.private_bytes(
        serialization.Encoding.PEM, key_format, serialization.NoEncryption()
    ).decode()
    sent = get_signer("sorted-fields-rsa", pem, hash_algorithm=algorithm).sign(BODY, timestamp=NOW)
    chosen = SHA1 if algorithm == "sha1" else hashes.SHA256()
    private_key.public_key().verify(
        base64.b64decode(sent["signature"]), CANONICAL_RSA.encode(), padding.PKCS1v15(), chosen
    )
    assert sent["timestamp"] == NOW_UTC
    assert sent["timezone"] == "UTC"


def test_signer_accepts_bare_base64_der_pkcs8(private_key: rsa.RSAPrivateKey) -> None:
    der = private_key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    sent = get_signer("sorted-fields-rsa", base64.b64encode(der).decode()).sign(BODY)
    assert rsa_verifier(pem_public(private_key)).is_valid(sent, BODY)


def test_signer_refuses_a_body_it_cannot_canonicalize(private_key: rsa.RSAPrivateKey) -> None:
    pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    with pytest.raises(ValueError, match="not a JSON object"):
        get_signer("sorted-fields-rsa", pem).sign(b"[1]")


def test_a_key_of_another_type_is_refused() -> None:
    pem = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    with pytest.raises(ValueError, match=r"keys\[0\].*another key type"):
        get_verifier("sorted-fields-rsa", pem)


def test_a_public_key_is_refused_as_a_signing_key(private_key: rsa.RSAPrivateKey) -> None:
    with pytest.raises(ValueError, match="key: not an unencrypted RSA private key"):
        get_signer("sorted-fields-rsa", pem_public(private_key))


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("hash_algorithm", "md5"),
        ("check_timestamp", "yes"),
        ("time_zone", "Mars/Olympus_Mons"),
        ("max_body_bytes", 0),
        ("max_depth", True),
    ],
)
def test_bad_option_values_are_refused_by_name(
    private_key: rsa.RSAPrivateKey, option: str, value: Any
) -> None:
    with pytest.raises(ValueError, match=option):
        rsa_verifier(der_public(private_key), **{option: value})


# -- RSA: bodies that cannot be canonicalized ----------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1]", b'{"a": 1, "a": 2}', ("{" + '"a": {' * 40 + "}" * 41).encode()],
    ids=["not-json", "array", "duplicate-key", "too-deep"],
)
def test_body_that_cannot_be_canonicalized_is_invalid(
    private_key: rsa.RSAPrivateKey, body: bytes
) -> None:
    headers = {"signature": sdk_signature(private_key, SHA1)}
    with pytest.raises(InvalidSignatureError, match="canonicalized") as exc_info:
        rsa_verifier(der_public(private_key)).verify(headers, body)
    assert exc_info.value.code == "invalid_signature"
    assert isinstance(exc_info.value.__cause__, ValueError)


def test_body_over_the_configured_cap_is_invalid(private_key: rsa.RSAPrivateKey) -> None:
    headers = {"signature": sdk_signature(private_key, SHA1)}
    verifier = rsa_verifier(der_public(private_key), max_body_bytes=len(BODY) - 1)
    with pytest.raises(InvalidSignatureError, match="larger than"):
        verifier.verify(headers, BODY)


def test_missing_signature_is_reported_before_the_body_is_parsed(
    private_key: rsa.RSAPrivateKey,
) -> None:
    with pytest.raises(MissingSignatureError):
        rsa_verifier(der_public(private_key)).verify({}, b"not json")


# -- RSA: the optional timestamp -------------------------------------------------------------


def signed_at(key: rsa.RSAPrivateKey, **extra: str) -> dict[str, str]:
    return {"signature": sdk_signature(key, SHA1), **extra}


def test_timestamp_is_not_checked_by_default(private_key: rsa.RSAPrivateKey) -> None:
    verifier = rsa_verifier(der_public(private_key))
    old = verifier.verify(signed_at(private_key, timestamp="20000101000000"), BODY)
    assert old.timestamp == datetime(2000, 1, 1, tzinfo=UTC)
    garbled = verifier.verify(signed_at(private_key, timestamp="yesterday"), BODY)
    assert garbled.timestamp is None
    assert verifier.verify(signed_at(private_key), BODY).timestamp is None


@pytest.mark.parametrize(
    ("timestamp", "zone_header", "time_zone"),
    [
        (NOW_UTC, None, "UTC"),
        (NOW_UTC, "UTC", "Asia/Shanghai"),
        (NOW_SHANGHAI, "Asia/Shanghai", "UTC"),
        (NOW_SHANGHAI, "+08:00", "UTC"),
        (NOW_SHANGHAI, "GMT+8", "UTC"),
        (NOW_SHANGHAI, None, "Asia/Shanghai"),
        (NOW_SHANGHAI, "Not/AZone", "Asia/Shanghai"),
    ],
)
def test_timestamp_is_read_in_the_named_zone_else_the_configured_one(
    private_key: rsa.RSAPrivateKey, timestamp: str, zone_header: str | None, time_zone: str
) -> None:
    extra = {"timestamp": timestamp}
    if zone_header is not None:
        extra["timezone"] = zone_header
    verifier = rsa_verifier(der_public(private_key), check_timestamp=True, time_zone=time_zone)
    verified = verifier.verify(signed_at(private_key, **extra), BODY)
    assert verified.timestamp == datetime.fromtimestamp(NOW, UTC)


def test_old_timestamp_is_rejected_when_checked(private_key: rsa.RSAPrivateKey) -> None:
    when = datetime.fromtimestamp(NOW - 600, ZoneInfo("Asia/Shanghai")).strftime("%Y%m%d%H%M%S")
    headers = signed_at(private_key, timestamp=when, timezone="Asia/Shanghai")
    verifier = rsa_verifier(der_public(private_key), check_timestamp=True)
    with pytest.raises(TimestampOutOfToleranceError) as exc_info:
        verifier.verify(headers, BODY)
    assert exc_info.value.header == "timestamp"
    assert exc_info.value.timestamp == datetime.fromtimestamp(NOW - 600, UTC)


@pytest.mark.parametrize("timestamp", ["2026-11-18", "20261318085320", "2026111808532", "x" * 14])
def test_unreadable_timestamp_is_malformed_when_checked(
    private_key: rsa.RSAPrivateKey, timestamp: str
) -> None:
    verifier = rsa_verifier(der_public(private_key), check_timestamp=True)
    with pytest.raises(MalformedSignatureError) as exc_info:
        verifier.verify(signed_at(private_key, timestamp=timestamp), BODY)
    assert exc_info.value.header == "timestamp"


def test_missing_timestamp_is_missing_when_checked(private_key: rsa.RSAPrivateKey) -> None:
    verifier = rsa_verifier(der_public(private_key), check_timestamp=True)
    with pytest.raises(MissingSignatureError) as exc_info:
        verifier.verify(signed_at(private_key), BODY)
    assert exc_info.value.header == "timestamp"


# -- HMAC ------------------------------------------------------------------------------------

SECRET = "clé-secrète-partagée"


def sdk_hmac(secret: str = SECRET, text: str = CANONICAL_HMAC) -> str:
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()


def hmac_verifier(*secrets: str, **options: Any) -> Verifier:
    return get_verifier("sorted-fields-hmac", list(secrets or [SECRET]), **options)


@pytest.mark.parametrize("case", [str.lower, str.upper], ids=["lower", "upper"])
def test_hex_signature_is_accepted_in_either_case(case: object) -> None:
    value = case(sdk_hmac())  # type: ignore[operator]
    verified = hmac_verifier().verify({"Signature": value}, BODY)
    assert verified == ("sorted-fields-hmac", None, None)


def test_hmac_signer_writes_lower_case_hex_of_the_kvkv_string() -> None:
    assert get_signer("sorted-fields-hmac", SECRET).sign(BODY) == {"signature": sdk_hmac()}


def test_hmac_secret_is_its_utf8_bytes() -> None:
    latin1_mac = hmac.new(SECRET.encode("latin-1"), CANONICAL_HMAC.encode(), hashlib.sha256)
    with pytest.raises(InvalidSignatureError):
        hmac_verifier().verify({"signature": latin1_mac.hexdigest()}, BODY)


@pytest.mark.parametrize(
    "value",
    [
        sdk_hmac()[:-2],
        sdk_hmac() + "00",
        sdk_hmac()[:10] + " " + sdk_hmac()[10:],
        "zz" * 32,
        base64.b64encode(bytes.fromhex(sdk_hmac())).decode(),
        sdk_hmac(text=CANONICAL_RSA),
    ],
    ids=["short", "long", "space-inside", "not-hex", "base64", "rsa-form"],
)
def test_hmac_value_that_is_not_the_hex_mac_is_invalid(value: str) -> None:
    with pytest.raises(InvalidSignatureError):
        hmac_verifier().verify({"signature": value}, BODY)


def test_hmac_body_that_cannot_be_canonicalized_is_invalid() -> None:
    with pytest.raises(InvalidSignatureError, match="canonicalized"):
        hmac_verifier().verify({"signature": sdk_hmac()}, b'{"a": NaN}')


# -- daylight saving: a repeated hour and a skipped one ---------------------------------------

#: In Berlin, 2026-10-25 03:00 CEST went back to 02:00 CET: 02:30 happened at 00:30 and at
#: 01:30 UTC. On 2026-03-29, 02:00 CET went forward to 03:00 CEST: 02:30 never happened.
REPEATED = "20261025023000"
SKIPPED = "20260329023000"
FIRST_02_30 = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
SECOND_02_30 = datetime(2026, 10, 25, 1, 30, tzinfo=UTC)


@pytest.mark.parametrize("sent_at", [FIRST_02_30, SECOND_02_30], ids=["first", "second"])
def test_a_time_in_the_repeated_hour_passes_when_either_reading_is_within_tolerance(
    private_key: rsa.RSAPrivateKey, sent_at: datetime
) -> None:
    verifier = get_verifier(
        "sorted-fields-rsa",
        der_public(private_key),
        clock=lambda: sent_at.timestamp() + 60,
        check_timestamp=True,
        time_zone="Europe/Berlin",
    )

    verified = verifier.verify(signed_at(private_key, timestamp=REPEATED), BODY)

    assert verified.timestamp == sent_at


def test_a_time_in_the_repeated_hour_is_stale_when_neither_reading_is_within_tolerance(
    private_key: rsa.RSAPrivateKey,
) -> None:
    verifier = get_verifier(
        "sorted-fields-rsa",
        der_public(private_key),
        clock=lambda: SECOND_02_30.timestamp() + 3600,
        check_timestamp=True,
        time_zone="Europe/Berlin",
    )
    with pytest.raises(TimestampOutOfToleranceError) as exc_info:
        verifier.verify(signed_at(private_key, timestamp=REPEATED), BODY)
    assert exc_info.value.timestamp == SECOND_02_30


def test_a_time_in_the_skipped_hour_is_malformed_and_says_so(
    private_key: rsa.RSAPrivateKey,
) -> None:
    verifier = get_verifier(
        "sorted-fields-rsa",
        der_public(private_key),
        clock=lambda: datetime(2026, 3, 29, 1, 0, tzinfo=UTC).timestamp(),
        check_timestamp=True,
        time_zone="Europe/Berlin",
    )
    with pytest.raises(MalformedSignatureError, match="does not exist in its zone") as exc_info:
        verifier.verify(signed_at(private_key, timestamp=SKIPPED), BODY)
    assert exc_info.value.header == "timestamp"
