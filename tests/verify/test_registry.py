"""The registry: scheme names, options, key generation; and the public surface of ``verify``."""

from __future__ import annotations

import importlib
import math
from typing import Any

import pytest

from payhooks.verify import (
    DEFAULT_SCHEME,
    SCHEMES,
    InvalidSignatureError,
    MalformedSignatureError,
    MissingSignatureError,
    SignatureError,
    TimestampOutOfToleranceError,
    generate_keypair,
    get_signer,
    get_verifier,
)
from tests.support.notifications import NOTIFICATION

SECRET = generate_keypair("standard-webhooks").signing_key


def test_the_five_schemes_and_their_key_kinds() -> None:
    assert {name: info.key_kind for name, info in SCHEMES.items()} == {
        "standard-webhooks": "secret",
        "standard-webhooks-ed25519": "public_key",
        "sorted-fields-rsa": "public_key",
        "sorted-fields-hmac": "secret",
        "hmac-sha256": "secret",
    }
    assert DEFAULT_SCHEME == "standard-webhooks"


def test_schemes_cannot_be_changed_by_callers() -> None:
    with pytest.raises(TypeError):
        SCHEMES["mine"] = SCHEMES[DEFAULT_SCHEME]  # type: ignore[index]


@pytest.mark.parametrize("factory", [get_verifier, get_signer])
@pytest.mark.parametrize("scheme", ["standard_webhooks", "", "HMAC-SHA256", None])
def test_unknown_scheme_is_refused_listing_the_known_ones(factory: Any, scheme: Any) -> None:
    with pytest.raises(ValueError, match="scheme: unknown signature scheme") as exc_info:
        factory(scheme, SECRET)
    assert "standard-webhooks-ed25519" in str(exc_info.value)


@pytest.mark.parametrize(
    ("scheme", "option"),
    [
        ("standard-webhooks", "hash_algorithm"),
        ("standard-webhooks", "header_name"),
        ("sorted-fields-hmac", "check_timestamp"),
        ("hmac-sha256", "max_depth"),
        ("sorted-fields-rsa", "hash_algoritm"),
    ],
)
def test_option_of_another_scheme_or_a_typo_is_refused_by_name(scheme: str, option: str) -> None:
    pair = generate_keypair(scheme) if scheme != "sorted-fields-rsa" else None
    key = pair.verifying_key if pair else "unused: options are checked first"
    options: dict[str, Any] = {option: "x"}
    with pytest.raises(ValueError, match=f"^{option}: not an option of the {scheme} scheme"):
        get_verifier(scheme, key, **options)


def test_signer_options_are_checked_too() -> None:
    with pytest.raises(ValueError, match="check_timestamp"):
        get_signer("sorted-fields-rsa", "unused", check_timestamp=True)


@pytest.mark.parametrize("tolerance", [-1, math.nan, math.inf, True, "300"])
def test_bad_tolerance_is_refused_by_name(tolerance: Any) -> None:
    with pytest.raises(ValueError, match="tolerance_seconds"):
        get_verifier("standard-webhooks", SECRET, tolerance_seconds=tolerance)


def test_clock_must_be_callable() -> None:
    with pytest.raises(ValueError, match="clock"):
        get_verifier("standard-webhooks", SECRET, clock=1795000000)  # type: ignore[arg-type]


@pytest.mark.parametrize("keys", [[SECRET, 7], [SECRET, None], b"whsec_abc"])
def test_keys_must_be_strings(keys: Any) -> None:
    with pytest.raises(ValueError, match="keys"):
        get_verifier("standard-webhooks", keys)


def test_verifier_exposes_its_tolerance() -> None:
    assert get_verifier("standard-webhooks", SECRET).tolerance_seconds == 300
    assert (
        get_verifier("standard-webhooks", SECRET, tolerance_seconds=None).tolerance_seconds is None
    )


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_generated_keys_are_single_tokens_that_work_together(scheme: str) -> None:
    pair = generate_keypair(scheme)
    for key in (pair.signing_key, pair.verifying_key):
        assert key
        assert key.split() == [key]
    headers = get_signer(scheme, pair.signing_key).sign(NOTIFICATION)
    assert get_verifier(scheme, pair.verifying_key).is_valid(headers, NOTIFICATION)
    if SCHEMES[scheme].key_kind == "secret":
        assert pair.signing_key == pair.verifying_key
    else:
        assert pair.signing_key != pair.verifying_key


def test_generated_keys_are_fresh_and_in_their_scheme_form() -> None:
    assert generate_keypair("standard-webhooks").signing_key.startswith("whsec_")
    ed = generate_keypair("standard-webhooks-ed25519")
    assert ed.signing_key.startswith("whsk_")
    assert ed.verifying_key.startswith("whpk_")
    assert generate_keypair("hmac-sha256") != generate_keypair("hmac-sha256")


def test_keypair_repr_hides_both_keys() -> None:
    pair = generate_keypair("hmac-sha256")
    assert pair.signing_key not in repr(pair)
    assert "hidden" in repr(pair)


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error_class", "code"),
    [
        (MissingSignatureError, "missing_signature"),
        (MalformedSignatureError, "malformed_signature"),
        (InvalidSignatureError, "invalid_signature"),
    ],
)
def test_each_error_has_its_stable_code_and_message(error_class: Any, code: str) -> None:
    error = error_class("the signature header is missing", header="signature")
    assert isinstance(error, SignatureError)
    assert error.code == code
    assert str(error) == error.message == "the signature header is missing"
    assert error.header == "signature"
    assert error_class.__name__ in repr(error)


def test_timestamp_error_carries_the_times() -> None:
    from datetime import UTC, datetime

    then, now = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    error = TimestampOutOfToleranceError(
        "too old", header="webhook-timestamp", timestamp=then, now=now, tolerance_seconds=300
    )
    assert isinstance(error, SignatureError)
    assert error.code == "timestamp_out_of_tolerance"
    assert (error.timestamp, error.now, error.tolerance_seconds) == (then, now, 300)


def test_base_error_code_is_one_the_receiver_knows() -> None:
    assert SignatureError("x").code == "invalid_signature"


def test_public_names_are_those_the_architecture_lists() -> None:
    documented = {
        "SCHEMES", "DEFAULT_SCHEME", "get_verifier", "get_signer", "generate_keypair",
        "sorted_fields_string", "SignatureError", "MissingSignatureError",
        "MalformedSignatureError", "InvalidSignatureError", "TimestampOutOfToleranceError",
        "VerifiedDelivery", "KeyPair",
    }  # fmt: skip
    package = importlib.import_module("payhooks.verify")
    assert documented <= set(package.__all__)
    assert all(hasattr(package, name) for name in package.__all__)


@pytest.mark.parametrize(
    ("scheme", "complaint"),
    [
        ("standard-webhooks", "not a whsec_ secret"),
        ("standard-webhooks-ed25519", "not a whpk_ public key"),
        ("sorted-fields-rsa", "not an RSA public key"),
    ],
)
def test_a_key_that_does_not_decode_is_named_by_its_place_in_the_list(
    scheme: str, complaint: str
) -> None:
    good = generate_keypair(scheme).verifying_key

    with pytest.raises(ValueError, match=rf"^keys\[1\]: {complaint}"):
        get_verifier(scheme, [good, "!!not a key!!"])
