"""One verifier contract, run against every scheme by inheritance (as itsdangerous runs its
signer tests again for the timestamp signer). Scheme-specific behaviour lives in the other
``test_verify_*`` files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from payhooks.verify import (
    SCHEMES,
    InvalidSignatureError,
    KeyPair,
    MalformedSignatureError,
    MissingSignatureError,
    SignatureError,
    TimestampOutOfToleranceError,
    VerifiedDelivery,
    Verifier,
    generate_keypair,
    get_signer,
    get_verifier,
)

NOW = 1_795_000_000  # 2026-11-18 11:06:40 UTC, a fixed clock for every test here

BODY = json.dumps(
    {
        "ll_transaction_id": "ll-2026111800001",
        "merchant_transaction_id": "order-1",
        "payment_data": {
            "payment_status": "PS",
            "payment_amount": "25.00",
            "payment_currency_code": "CNY",
            "payment_time": "20261118120000",
        },
    }
).encode()
# One value changed: a different body for every scheme, the sorted-fields ones included.
TAMPERED = BODY.replace(b'"25.00"', b'"26.00"')

_PAIRS: dict[str, KeyPair] = {}


def pair_for(scheme: str, slot: int = 0) -> KeyPair:
    """Keys per scheme, made once per session (RSA key generation is the slow part)."""
    name = f"{scheme}#{slot}"
    if name not in _PAIRS:
        _PAIRS[name] = generate_keypair(scheme)
    return _PAIRS[name]


def key_fragments(pair: KeyPair) -> Iterator[str]:
    """Substrings that would betray key material if they showed up in text."""
    for key in (pair.signing_key, pair.verifying_key):
        yield key
        # Its ends, with and without a prefix such as ``whsec_``. A random key may hold a "_"
        # of its own near its end, leaving a one-letter "payload" found in any text: only
        # fragments of 16 characters count.
        for text in (key, key.split("_", 1)[-1]):
            if len(text) >= 16:
                yield text[:16]
                yield text[-16:]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``other_scheme``: every scheme but the class's own."""
    if "other_scheme" in metafunc.fixturenames:
        own = metafunc.cls.scheme if metafunc.cls else None
        metafunc.parametrize("other_scheme", [name for name in sorted(SCHEMES) if name != own])


class VerifierContract:
    """Every scheme must pass these. Subclasses name the scheme and its peculiarities."""

    scheme: ClassVar[str]
    #: The headers without which the scheme cannot verify.
    required_headers: ClassVar[tuple[str, ...]]
    #: The header that carries the signature value.
    signature_header: ClassVar[str]
    #: A key text the scheme must refuse at construction.
    bad_key: ClassVar[str]
    verifier_options: ClassVar[dict[str, Any]] = {}
    signer_options: ClassVar[dict[str, Any]] = {}

    @pytest.fixture
    def pair(self) -> KeyPair:
        return pair_for(self.scheme)

    @pytest.fixture
    def other_pair(self) -> KeyPair:
        return pair_for(self.scheme, 1)

    def verifier(self, *keys: str, **overrides: Any) -> Verifier:
        options = {**self.verifier_options, **overrides}
        options.setdefault("clock", lambda: float(NOW))
        return get_verifier(self.scheme, list(keys), **options)

    def sign(self, pair: KeyPair, body: bytes = BODY, **kwargs: Any) -> dict[str, str]:
        kwargs.setdefault("timestamp", NOW)
        return get_signer(self.scheme, pair.signing_key, **self.signer_options).sign(body, **kwargs)

    def signature_value(self, headers: dict[str, str]) -> str:
        for name, value in headers.items():
            if name.lower() == self.signature_header:
                return value
        raise AssertionError(f"the signer sent no {self.signature_header}")

    def with_signature(self, headers: dict[str, str], value: str) -> dict[str, str]:
        kept = {k: v for k, v in headers.items() if k.lower() != self.signature_header}
        return {**kept, self.signature_header: value}

    def foreign_code(self, other_scheme: str) -> str:
        """The code for a signature made by ``other_scheme`` put in this scheme's header."""
        return InvalidSignatureError.code

    # -- the contract -----------------------------------------------------------------------

    def test_scheme_is_registered_with_its_key_kind(self) -> None:
        assert SCHEMES[self.scheme].name == self.scheme
        assert SCHEMES[self.scheme].key_kind in ("secret", "public_key")

    def test_signed_delivery_verifies(self, pair: KeyPair) -> None:
        verified = self.verifier(pair.verifying_key).verify(self.sign(pair), BODY)
        assert isinstance(verified, VerifiedDelivery)
        assert verified.scheme == self.scheme

    def test_is_valid_answers_true_and_false(self, pair: KeyPair) -> None:
        verifier = self.verifier(pair.verifying_key)
        headers = self.sign(pair)
        assert verifier.is_valid(headers, BODY) is True
        assert verifier.is_valid(headers, TAMPERED) is False
        assert verifier.is_valid({}, BODY) is False

    def test_header_names_are_lower_case_and_cover_the_signature(self, pair: KeyPair) -> None:
        names = self.verifier(pair.verifying_key).header_names
        assert all(name == name.lower() for name in names)
        assert set(self.required_headers) <= set(names)
        assert {name.lower() for name in self.sign(pair)} <= set(names)

    @pytest.mark.parametrize("case", [str.upper, str.title, str.lower])
    def test_header_lookup_ignores_case(self, pair: KeyPair, case: Any) -> None:
        headers = {case(name): value for name, value in self.sign(pair).items()}
        assert self.verifier(pair.verifying_key).is_valid(headers, BODY)

    def test_changed_body_is_rejected_as_invalid(self, pair: KeyPair) -> None:
        with pytest.raises(InvalidSignatureError) as exc_info:
            self.verifier(pair.verifying_key).verify(self.sign(pair), TAMPERED)
        assert exc_info.value.code == "invalid_signature"

    def test_wrong_key_is_rejected_as_invalid(self, pair: KeyPair, other_pair: KeyPair) -> None:
        with pytest.raises(InvalidSignatureError) as exc_info:
            self.verifier(other_pair.verifying_key).verify(self.sign(pair), BODY)
        assert exc_info.value.code == "invalid_signature"
        assert exc_info.value.header == self.signature_header

    def test_each_missing_header_is_rejected_with_its_code(self, pair: KeyPair) -> None:
        verifier = self.verifier(pair.verifying_key)
        headers = self.sign(pair)
        for name in self.required_headers:
            kept = {k: v for k, v in headers.items() if k.lower() != name}
            with pytest.raises(MissingSignatureError) as exc_info:
                verifier.verify(kept, BODY)
            assert exc_info.value.code == "missing_signature"
            assert exc_info.value.header == name

    def test_empty_signature_header_counts_as_missing(self, pair: KeyPair) -> None:
        headers = self.with_signature(self.sign(pair), "")
        with pytest.raises(MissingSignatureError):
            self.verifier(pair.verifying_key).verify(headers, BODY)

    def test_no_headers_at_all_is_missing(self, pair: KeyPair) -> None:
        with pytest.raises(MissingSignatureError):
            self.verifier(pair.verifying_key).verify({}, BODY)

    @pytest.mark.parametrize("keep", [0.5, 0.9])
    def test_truncated_signature_is_invalid(self, pair: KeyPair, keep: float) -> None:
        headers = self.sign(pair)
        value = self.signature_value(headers)
        truncated = self.with_signature(headers, value[: int(len(value) * keep)])
        with pytest.raises(InvalidSignatureError):
            self.verifier(pair.verifying_key).verify(truncated, BODY)

    def test_garbage_signature_value_is_invalid(self, pair: KeyPair) -> None:
        headers = self.with_signature(self.sign(pair), self.garbage_signature())
        with pytest.raises(InvalidSignatureError):
            self.verifier(pair.verifying_key).verify(headers, BODY)

    def garbage_signature(self) -> str:
        return "not*base64*nor*hex!"

    def test_signature_for_another_scheme_is_rejected(
        self, pair: KeyPair, other_scheme: str
    ) -> None:
        foreign_headers = get_signer(other_scheme, pair_for(other_scheme).signing_key).sign(
            BODY, timestamp=NOW
        )
        foreign_value = next(
            value
            for name, value in foreign_headers.items()
            if name.lower() in ("webhook-signature", "signature", "x-signature")
        )
        headers = self.with_signature(self.sign(pair), foreign_value)
        with pytest.raises(SignatureError) as exc_info:
            self.verifier(pair.verifying_key).verify(headers, BODY)
        assert exc_info.value.code == self.foreign_code(other_scheme)

    @pytest.mark.parametrize("order", ["old-first", "new-first"])
    def test_rotation_passes_when_any_key_matches(
        self, pair: KeyPair, other_pair: KeyPair, order: str
    ) -> None:
        keys = [other_pair.verifying_key, pair.verifying_key]
        if order == "new-first":
            keys.reverse()
        verifier = self.verifier(*keys)
        assert verifier.is_valid(self.sign(pair), BODY)
        assert verifier.is_valid(self.sign(other_pair), BODY)
        assert not verifier.is_valid(self.sign(pair_for(self.scheme, 2)), BODY)

    def test_a_single_key_string_is_one_key(self, pair: KeyPair) -> None:
        options = {**self.verifier_options, "clock": lambda: float(NOW)}
        verifier = get_verifier(self.scheme, pair.verifying_key, **options)
        assert verifier.is_valid(self.sign(pair), BODY)

    def test_bad_key_is_refused_at_construction_naming_the_argument(self) -> None:
        with pytest.raises(ValueError, match=r"keys\[1\]") as exc_info:
            get_verifier(self.scheme, [pair_for(self.scheme).verifying_key, self.bad_key])
        assert self.bad_key.strip() not in str(exc_info.value) or not self.bad_key.strip()

    def test_no_keys_are_refused(self) -> None:
        with pytest.raises(ValueError, match="keys"):
            get_verifier(self.scheme, [])

    def test_reprs_and_errors_hold_no_key_material(
        self, pair: KeyPair, other_pair: KeyPair
    ) -> None:
        verifier = self.verifier(pair.verifying_key, other_pair.verifying_key)
        signer = get_signer(self.scheme, pair.signing_key, **self.signer_options)
        texts = [repr(verifier), str(verifier), repr(signer), repr(pair), str(pair)]
        failures: list[tuple[dict[str, str], bytes]] = [
            ({}, BODY),
            (self.sign(pair), TAMPERED),
            (self.with_signature(self.sign(pair), "x"), BODY),
            (self.sign(pair_for(self.scheme, 2)), BODY),
        ]
        for headers, body in failures:
            with pytest.raises(SignatureError) as exc_info:
                verifier.verify(headers, body)
            texts += [str(exc_info.value), repr(exc_info.value), exc_info.value.message]
        for text in texts:
            for fragment in (*key_fragments(pair), *key_fragments(other_pair)):
                assert fragment not in text

    def test_verifier_repr_says_scheme_and_key_count(self, pair: KeyPair) -> None:
        text = repr(self.verifier(pair.verifying_key, pair_for(self.scheme, 1).verifying_key))
        assert self.scheme in text
        assert "keys=2" in text

    def test_error_codes_match_their_classes(self, pair: KeyPair) -> None:
        verifier = self.verifier(pair.verifying_key)
        with pytest.raises(SignatureError) as missing:
            verifier.verify({}, BODY)
        with pytest.raises(SignatureError) as invalid:
            verifier.verify(self.sign(pair), TAMPERED)
        assert type(missing.value) is MissingSignatureError
        assert type(invalid.value) is InvalidSignatureError


class TimedContract(VerifierContract):
    """For schemes whose delivery carries a time the verifier checks."""

    timestamp_header: ClassVar[str]

    def test_verified_delivery_carries_the_timestamp(self, pair: KeyPair) -> None:
        verified = self.verifier(pair.verifying_key).verify(self.sign(pair), BODY)
        assert verified.timestamp is not None
        assert verified.timestamp.timestamp() == NOW
        assert verified.timestamp.utcoffset() is not None

    @pytest.mark.parametrize("offset", [-301, 301, -3600, 86_400 * 365])
    def test_timestamp_out_of_tolerance_is_rejected_with_its_code(
        self, pair: KeyPair, offset: int
    ) -> None:
        headers = self.sign(pair, timestamp=NOW + offset)
        with pytest.raises(TimestampOutOfToleranceError) as exc_info:
            self.verifier(pair.verifying_key).verify(headers, BODY)
        error = exc_info.value
        assert error.code == "timestamp_out_of_tolerance"
        assert error.header == self.timestamp_header
        assert error.timestamp.timestamp() == NOW + offset
        assert error.now.timestamp() == NOW
        assert error.tolerance_seconds == 300
        assert ("future" if offset > 0 else "past") in error.message

    @pytest.mark.parametrize("offset", [-300, 0, 300])
    def test_timestamp_at_the_tolerance_passes(self, pair: KeyPair, offset: int) -> None:
        assert self.verifier(pair.verifying_key).is_valid(
            self.sign(pair, timestamp=NOW + offset), BODY
        )

    def test_tolerance_is_configurable(self, pair: KeyPair) -> None:
        headers = self.sign(pair, timestamp=NOW - 60)
        assert self.verifier(pair.verifying_key, tolerance_seconds=120).is_valid(headers, BODY)
        with pytest.raises(TimestampOutOfToleranceError):
            self.verifier(pair.verifying_key, tolerance_seconds=30).verify(headers, BODY)

    def test_no_tolerance_skips_the_time_check(self, pair: KeyPair) -> None:
        headers = self.sign(pair, timestamp=NOW - 86_400 * 400)
        assert self.verifier(pair.verifying_key, tolerance_seconds=None).is_valid(headers, BODY)

    def test_signature_is_checked_before_the_time(self, pair: KeyPair, other_pair: KeyPair) -> None:
        headers = self.sign(other_pair, timestamp=NOW - 3600)
        with pytest.raises(InvalidSignatureError):
            self.verifier(pair.verifying_key).verify(headers, BODY)


def _sw_foreign_code(other_scheme: str) -> str:
    # A value without the "version,signature" form is malformed; a Standard Webhooks entry of
    # the other version is simply not a match.
    if other_scheme.startswith("standard-webhooks"):
        return InvalidSignatureError.code
    return MalformedSignatureError.code


class TestStandardWebhooks(TimedContract):
    scheme = "standard-webhooks"
    required_headers = ("webhook-id", "webhook-timestamp", "webhook-signature")
    signature_header = "webhook-signature"
    timestamp_header = "webhook-timestamp"
    bad_key = "whsec_not*base64!"

    def foreign_code(self, other_scheme: str) -> str:
        return _sw_foreign_code(other_scheme)

    def garbage_signature(self) -> str:
        return "v1,not*base64*nor*hex!"


class TestStandardWebhooksEd25519(TimedContract):
    scheme = "standard-webhooks-ed25519"
    required_headers = ("webhook-id", "webhook-timestamp", "webhook-signature")
    signature_header = "webhook-signature"
    timestamp_header = "webhook-timestamp"
    bad_key = "whpk_dG9vIHNob3J0"

    def foreign_code(self, other_scheme: str) -> str:
        return _sw_foreign_code(other_scheme)

    def garbage_signature(self) -> str:
        return "v1a,not*base64*nor*hex!"


class TestSortedFieldsRsa(VerifierContract):
    scheme = "sorted-fields-rsa"
    required_headers = ("signature",)
    signature_header = "signature"
    bad_key = "-----BEGIN PUBLIC KEY-----\nbm90IGEga2V5\n-----END PUBLIC KEY-----"


class TestSortedFieldsRsaCheckingTheTimestamp(TimedContract):
    scheme = "sorted-fields-rsa"
    required_headers = ("signature", "timestamp")
    signature_header = "signature"
    timestamp_header = "timestamp"
    bad_key = "bm90IGEga2V5IGF0IGFsbA=="
    verifier_options: ClassVar[dict[str, Any]] = {"check_timestamp": True}


class TestSortedFieldsRsaSha256(VerifierContract):
    scheme = "sorted-fields-rsa"
    required_headers = ("signature",)
    signature_header = "signature"
    bad_key = "not base64 at all!"
    verifier_options: ClassVar[dict[str, Any]] = {"hash_algorithm": "sha256"}
    signer_options: ClassVar[dict[str, Any]] = {"hash_algorithm": "sha256"}


class TestSortedFieldsHmac(VerifierContract):
    scheme = "sorted-fields-hmac"
    required_headers = ("signature",)
    signature_header = "signature"
    bad_key = "   "


class TestHmacSha256(VerifierContract):
    scheme = "hmac-sha256"
    required_headers = ("x-signature",)
    signature_header = "x-signature"
    bad_key = ""


class TestHmacSha256Base64InAnotherHeader(VerifierContract):
    scheme = "hmac-sha256"
    required_headers = ("x-payload-mac",)
    signature_header = "x-payload-mac"
    bad_key = ""
    verifier_options: ClassVar[dict[str, Any]] = {
        "header_name": "X-Payload-Mac",
        "encoding": "base64",
    }
    signer_options: ClassVar[dict[str, Any]] = {
        "header_name": "X-Payload-Mac",
        "encoding": "base64",
    }

    def signature_value(self, headers: dict[str, str]) -> str:
        return headers["X-Payload-Mac"]


def test_every_scheme_has_a_contract_class() -> None:
    covered = {
        cls.scheme
        for cls in globals().values()
        if isinstance(cls, type)
        and issubclass(cls, VerifierContract)
        and cls.__name__[:4] == "Test"
    }
    assert covered == set(SCHEMES)
