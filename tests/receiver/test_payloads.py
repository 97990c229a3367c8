"""parse_notification: the three forms, the outcome's fields, and each kind of invalid body."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from payhooks.receiver.payloads import (
    MAX_DEPTH,
    InvalidPayloadError,
    MalformedJSONError,
    PayloadError,
    parse_notification,
)
from payhooks.storage import Flow, PaymentState

MISSING = object()


def make_body(*, top: Mapping[str, Any] | None = None, **payment_data: Any) -> dict[str, Any]:
    """A valid wallet body; keyword arguments set payment_data members (MISSING removes)."""
    data: dict[str, Any] = {
        "payment_status": "PS",
        "payment_amount": "25.00",
        "payment_currency_code": "CNY",
        "payment_time": "20261121120000",
    }
    data.update(payment_data)
    body: dict[str, Any] = {
        "ll_transaction_id": "ll_txn_1",
        "merchant_transaction_id": "order-1",
        "payment_data": data,
    }
    body.update(top or {})
    for obj in (body, data):
        for key in [k for k, v in obj.items() if v is MISSING]:
            del obj[key]
    return body


def encode(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def refused(body: Any, **options: Any) -> PayloadError:
    with pytest.raises(PayloadError) as exc_info:
        parse_notification(body if isinstance(body, bytes) else encode(body), **options)
    return exc_info.value


# --- the three forms ------------------------------------------------------------------------------


def test_card_form_names_its_processor_and_intent() -> None:
    body = make_body(stripe_payment_intent_id="pi_123", status="succeeded")
    outcome = parse_notification(encode(body))
    assert outcome.flow is Flow.CARD
    assert (outcome.provider, outcome.provider_reference, outcome.provider_status) == (
        "stripe",
        "pi_123",
        "succeeded",
    )
    assert outcome.state is PaymentState.SUCCEEDED
    assert outcome.extra == {}


def test_orchestrator_form_names_its_orchestrator_and_psp_reference() -> None:
    body = make_body(adyen_psp_reference="8815", result_code="Authorised")
    outcome = parse_notification(encode(body))
    assert outcome.flow is Flow.ORCHESTRATOR
    assert (outcome.provider, outcome.provider_reference, outcome.provider_status) == (
        "adyen",
        "8815",
        "Authorised",
    )
    assert outcome.state is PaymentState.SUCCEEDED


def test_wallet_form_has_no_provider() -> None:
    outcome = parse_notification(encode(make_body()))
    assert outcome.flow is Flow.WALLET
    assert (outcome.provider, outcome.provider_reference, outcome.provider_status) == (
        None,
        None,
        None,
    )
    assert outcome.transaction_id == "ll_txn_1"
    assert outcome.external_identifier == "order-1"
    assert outcome.payment_status == "PS"
    assert outcome.amount == Decimal("25.00")
    assert str(outcome.amount) == "25.00"
    assert (outcome.currency, outcome.amount_minor) == ("CNY", 2500)
    assert outcome.paid_at == datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("prefix", ["stripe", "2c2p", "checkout_com", "a" * 32])
def test_any_well_formed_provider_name_is_accepted(prefix: str) -> None:
    members: dict[str, Any] = {f"{prefix}_payment_intent_id": "pi_1", "status": "succeeded"}
    body = make_body(**members)
    assert parse_notification(encode(body)).provider == prefix


@pytest.mark.parametrize(
    "member",
    [
        "Stripe_payment_intent_id",
        "_payment_intent_id",
        "payment_intent_id",
        "stri-pe_payment_intent_id",
        "stripe__x_payment_intent_id",
        "a" * 33 + "_payment_intent_id",
    ],
)
def test_a_malformed_provider_name_is_refused_on_its_member(member: str) -> None:
    members: dict[str, Any] = {member: "pi_1", "status": "succeeded"}
    error = refused(make_body(**members))
    assert error.fields == (f"payment_data.{member}",)


# --- the state ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "state"),
    [
        ("IN", PaymentState.PENDING),
        ("PS", PaymentState.SUCCEEDED),
        ("PF", PaymentState.FAILED),
        ("ER", PaymentState.FAILED),
        ("PC", PaymentState.CANCELLED),
        ("RP", PaymentState.REFUND_PENDING),
        ("PR", PaymentState.PARTIALLY_REFUNDED),
        ("RS", PaymentState.REFUNDED),
        ("CB", PaymentState.CHARGED_BACK),
        ("ZZ", PaymentState.UNKNOWN),
        ("ps", PaymentState.UNKNOWN),
    ],
)
def test_payment_status_maps_to_its_state(code: str, state: PaymentState) -> None:
    assert parse_notification(encode(make_body(payment_status=code))).state is state


@pytest.mark.parametrize(
    ("members", "state"),
    [
        ({"stripe_payment_intent_id": "pi_1", "status": "succeeded"}, PaymentState.SUCCEEDED),
        ({"stripe_payment_intent_id": "pi_1", "status": "processing"}, PaymentState.UNKNOWN),
        ({"stripe_payment_intent_id": "pi_1", "status": "Succeeded"}, PaymentState.UNKNOWN),
        ({"adyen_psp_reference": "8815", "result_code": "Authorised"}, PaymentState.SUCCEEDED),
        ({"adyen_psp_reference": "8815", "result_code": "Refused"}, PaymentState.UNKNOWN),
        ({"adyen_psp_reference": "8815", "result_code": "authorised"}, PaymentState.UNKNOWN),
    ],
)
def test_success_needs_the_provider_to_agree(members: dict[str, Any], state: PaymentState) -> None:
    assert parse_notification(encode(make_body(**members))).state is state


def test_a_failure_does_not_need_the_provider_to_agree() -> None:
    body = make_body(payment_status="PF", stripe_payment_intent_id="pi_1", status="succeeded")
    assert parse_notification(encode(body)).state is PaymentState.FAILED


def test_a_configured_status_map_replaces_the_default() -> None:
    body = encode(make_body(payment_status="OK"))
    assert parse_notification(body, status_map={"OK": "succeeded"}).state is PaymentState.SUCCEEDED
    default_code = encode(make_body(payment_status="PS"))
    assert parse_notification(default_code, status_map={"OK": "succeeded"}).state is (
        PaymentState.UNKNOWN
    )


# --- unknown members ------------------------------------------------------------------------------


def test_unknown_members_are_kept_in_extra_shaped_like_the_body() -> None:
    body = make_body(top={"event": "paid", "n": 2}, fee={"rate": 0.03}, note=None)
    outcome = parse_notification(encode(body))
    assert outcome.extra == {
        "event": "paid",
        "n": 2,
        "payment_data": {"fee": {"rate": Decimal("0.03")}, "note": None},
    }
    assert isinstance(outcome.extra["payment_data"]["fee"]["rate"], Decimal)


def test_an_unknown_member_named_like_an_attribute_cannot_overwrite_a_checked_value() -> None:
    body = make_body(top={"transaction_id": "forged"}, amount="999.99", currency="USD")
    outcome = parse_notification(encode(body))
    assert (outcome.transaction_id, outcome.amount, outcome.currency) == (
        "ll_txn_1",
        Decimal("25.00"),
        "CNY",
    )
    assert outcome.extra == {
        "transaction_id": "forged",
        "payment_data": {"amount": "999.99", "currency": "USD"},
    }


# --- input types ----------------------------------------------------------------------------------


def test_text_bytes_and_a_decoded_mapping_give_the_same_outcome() -> None:
    body = make_body(stripe_payment_intent_id="pi_1", status="succeeded")
    from_bytes = parse_notification(encode(body))
    assert parse_notification(encode(body).decode()) == from_bytes
    assert parse_notification(body) == from_bytes


def test_a_mapping_with_floats_keeps_them_as_decimals_in_extra() -> None:
    outcome = parse_notification(make_body(top={"rate": 0.1}))
    assert outcome.extra == {"rate": Decimal("0.1")}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), b"bytes", object(), {1: "x"}])
def test_a_mapping_with_a_value_json_cannot_hold_is_refused(value: Any) -> None:
    with pytest.raises(InvalidPayloadError) as exc_info:
        parse_notification(make_body(top={"odd": value}))
    assert exc_info.value.fields[0].startswith("odd")


def test_a_mapping_amount_given_as_a_float_is_refused() -> None:
    with pytest.raises(InvalidPayloadError) as exc_info:
        parse_notification(make_body(payment_amount=25.0))
    assert exc_info.value.fields == ("payment_data.payment_amount",)


# --- malformed bodies -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b'{"ll_transaction_id": ',
        b"\xff\xfe{}",
        b'\xef\xbb\xbf{"a": 1}',
        '{"a": 1}'.encode("utf-16"),
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b'{"a": -Infinity}',
        b'{"a": 1, "a": 1}',
        b'{"payment_data": {"payment_status": "PF", "payment_status": "PS"}}',
        b'{"a": ' + b"9" * 65 + b"}",
        b"{} {}",
    ],
)
def test_a_body_that_is_not_one_unambiguous_json_text_is_malformed(body: bytes) -> None:
    error = refused(body)
    assert isinstance(error, MalformedJSONError)
    assert error.code == "malformed_json"
    assert error.fields == ("_schema",)
    assert error.message.endswith(".")


@pytest.mark.parametrize("body", [b"[]", b"[{}]", b'"PS"', b"25.00", b"null", b"true"])
def test_json_that_is_not_an_object_is_invalid_as_a_whole(body: bytes) -> None:
    error = refused(body)
    assert error.code == "invalid_payload"
    assert error.details == {"_schema": ["Invalid input type."]}


def test_deep_nesting_is_refused_without_recursion_error() -> None:
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert refused(deep).code == "invalid_payload"


def nested_body(levels: int) -> dict[str, Any]:
    """A valid body whose member "x" makes it ``levels`` objects deep (the body is level 1)."""
    nested: dict[str, Any] = {}
    body = make_body(top={"x": nested})
    for _ in range(levels - 2):
        nested["x"] = {}
        nested = nested["x"]
    return body


@pytest.mark.parametrize("levels", [3, MAX_DEPTH - 1, MAX_DEPTH])
def test_nesting_within_the_limit_is_kept_as_sent(levels: int) -> None:
    body = nested_body(levels)
    assert parse_notification(encode(body)).extra == {"x": body["x"]}


def test_nesting_up_to_the_limit_is_kept_and_one_more_level_is_refused() -> None:
    assert "x" in parse_notification(encode(nested_body(MAX_DEPTH))).extra
    error = refused(nested_body(MAX_DEPTH + 1))
    assert error.code == "invalid_payload"
    assert error.fields == (".".join(["x"] * MAX_DEPTH),)
    assert len(error.message) < 200


def test_an_unpaired_surrogate_is_refused_on_its_member() -> None:
    error = refused(b'{"ll_transaction_id": "\\ud800", "merchant_transaction_id": "o"}')
    assert error.code == "invalid_payload"
    assert error.fields == ("ll_transaction_id",)


def with_raw_member(name: str, json_text: bytes) -> bytes:
    """A valid body with one more top-level member, written as ``json_text`` exactly."""
    return encode(make_body(top={name: "RAW"})).replace(b'"RAW"', json_text)


@pytest.mark.parametrize(
    "escaped",
    [b'"\\ud800"', b'"\\uDBFF"', b'"\\udc00"', b'"x\\uDFFFx"', b'"\\ude00\\ud83d"', b'["\\ud800"]'],
)
def test_a_lone_surrogate_is_refused_however_it_is_escaped(escaped: bytes) -> None:
    error = refused(with_raw_member("note", escaped))
    assert error.code == "invalid_payload"
    assert error.fields[0].startswith("note")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"\\ud800": 1}', "_schema"),
        (b'{"payment_data": {"\\uDC00": 1}}', "payment_data"),
    ],
)
def test_a_lone_surrogate_in_a_member_name_is_refused_on_its_object(
    body: bytes, field: str
) -> None:
    error = refused(body)
    assert error.code == "invalid_payload"
    assert error.fields == (field,)


def test_text_handed_in_with_a_lone_surrogate_of_its_own_is_refused_on_its_member() -> None:
    text = json.dumps(make_body(top={"note": "a\ud800"}), ensure_ascii=False)
    with pytest.raises(InvalidPayloadError) as exc_info:
        parse_notification(text)
    assert exc_info.value.fields == ("note",)


@pytest.mark.parametrize("as_text", [False, True])
def test_escaped_pairs_and_characters_beside_the_surrogates_are_kept(as_text: bool) -> None:
    body = with_raw_member("note", b'"\\ud83d\\ude00 \\uD7FF \\ue000 \xc3\xa9"')
    outcome = parse_notification(body.decode() if as_text else body)
    assert outcome.extra == {"note": "\U0001f600 \ud7ff \ue000 \u00e9"}


def test_brackets_inside_strings_do_not_count_towards_the_nesting_limit() -> None:
    note = "{[" * MAX_DEPTH
    assert parse_notification(encode(make_body(top={"note": note}))).extra == {"note": note}


@pytest.mark.parametrize(
    ("body", "name"),
    [(b'{"a": 1, "b": 2, "b": 3, "a": 4}', "b"), (b'{"a": {"c": 1, "c": 2}, "a": 3}', "c")],
)
def test_a_repeated_member_name_is_named_where_it_first_repeats(body: bytes, name: str) -> None:
    error = refused(body)
    assert isinstance(error, MalformedJSONError)
    assert error.details == {"_schema": [f"The member name {name!r} appears twice in one object."]}


# --- invalid members ------------------------------------------------------------------------------


@pytest.mark.parametrize("member", ["ll_transaction_id", "merchant_transaction_id", "payment_data"])
def test_each_missing_top_level_member_is_named(member: str) -> None:
    error = refused(make_body(top={member: MISSING}))
    assert error.code == "invalid_payload"
    assert error.fields == (member,)


@pytest.mark.parametrize(
    "member", ["payment_status", "payment_amount", "payment_currency_code", "payment_time"]
)
@pytest.mark.parametrize("value", [MISSING, None, 25, ["25.00"], {"v": "25.00"}, True])
def test_each_base_member_missing_or_of_the_wrong_type_is_named(member: str, value: Any) -> None:
    error = refused(make_body(**{member: value}))
    assert error.code == "invalid_payload"
    assert error.fields == (f"payment_data.{member}",)


@pytest.mark.parametrize("member", ["ll_transaction_id", "merchant_transaction_id"])
@pytest.mark.parametrize("value", [None, 1, "", ["x"]])
def test_identifiers_must_be_non_empty_strings(member: str, value: Any) -> None:
    assert refused(make_body(top={member: value})).fields == (member,)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ([], "payment_data._schema"),
        ("x", "payment_data._schema"),
        (1, "payment_data._schema"),
        (None, "payment_data"),
    ],
)
def test_payment_data_that_is_not_an_object_is_named(value: Any, field: str) -> None:
    assert refused(make_body(top={"payment_data": value})).fields == (field,)


def test_external_identifier_may_have_64_characters_and_no_more() -> None:
    assert parse_notification(encode(make_body(top={"merchant_transaction_id": "é" * 64})))
    error = refused(make_body(top={"merchant_transaction_id": "é" * 65}))
    assert error.fields == ("merchant_transaction_id",)


def test_transaction_id_may_have_255_characters_and_no_more() -> None:
    assert parse_notification(encode(make_body(top={"ll_transaction_id": "t" * 255})))
    assert refused(make_body(top={"ll_transaction_id": "t" * 256})).fields == ("ll_transaction_id",)


@pytest.mark.parametrize(
    ("amount", "currency"),
    [
        ("25", "CNY"),
        ("-1.00", "CNY"),
        ("+1.00", "CNY"),
        ("1e3", "CNY"),
        ("1.0e3", "CNY"),
        ("NaN", "CNY"),
        ("Infinity", "CNY"),
        (" 25.00", "CNY"),
        ("25.00 ", "CNY"),
        ("25.00\n", "CNY"),
        (".50", "CNY"),
        ("25.", "CNY"),
        ("25.001", "CNY"),
        ("100.50", "JPY"),
        ("1.2345", "KWD"),
        ("12345", "KWD"),
        ("-3500", "JPY"),
        ("3500.", "JPY"),
        ("1,000.00", "CNY"),
        ("1_000.00", "CNY"),
        ("25,00", "CNY"),
        ("\uff12\uff15.00", "CNY"),
        ("\u0662\u0665.00", "CNY"),
        ("25.\uff100", "CNY"),
        ("", "CNY"),
        ("99999999999999999999.00", "CNY"),
    ],
)
def test_an_amount_that_is_not_exactly_minor_units_is_named(amount: str, currency: str) -> None:
    error = refused(make_body(payment_amount=amount, payment_currency_code=currency))
    assert error.code == "invalid_payload"
    assert error.fields == ("payment_data.payment_amount",)


@pytest.mark.parametrize(
    ("amount", "currency", "minor"),
    [
        ("25.00", "CNY", 2500),
        ("25.0", "CNY", 2500),
        ("25.5", "CNY", 2550),
        ("0.00", "CNY", 0),
        ("0.01", "CNY", 1),
        ("2500.00", "JPY", 2500),
        ("2500.0000", "JPY", 2500),
        ("12.345", "KWD", 12345),
        ("12.30", "KWD", 12300),
        ("12.300", "KWD", 12300),
        ("3500", "JPY", 3500),
        ("0", "JPY", 0),
        ("3500.00", "JPY", 3500),
        ("1.2345", "CLF", 12345),
        ("10000000000000.00", "CNY", 10**15),
    ],
)
def test_an_amount_gives_its_minor_units_exactly(amount: str, currency: str, minor: int) -> None:
    outcome = parse_notification(
        encode(make_body(payment_amount=amount, payment_currency_code=currency))
    )
    assert outcome.amount_minor == minor
    assert outcome.amount == Decimal(amount)
    assert str(outcome.amount) == amount


@pytest.mark.parametrize("currency", ["CNY", "JPY", "KWD"])
def test_an_amount_over_the_ledgers_bound_is_an_invalid_amount_not_a_storage_error(
    currency: str,
) -> None:
    from payhooks.storage import MAX_AMOUNT_MINOR, from_minor_units, minor_unit_exponent

    def written(minor: int) -> str:  # as the service writes it: at least two decimals
        return f"{from_minor_units(minor, currency):.{max(2, minor_unit_exponent(currency))}f}"

    at_the_bound = make_body(
        payment_amount=written(MAX_AMOUNT_MINOR), payment_currency_code=currency
    )
    assert parse_notification(encode(at_the_bound)).amount_minor == MAX_AMOUNT_MINOR
    error = refused(
        make_body(payment_amount=written(MAX_AMOUNT_MINOR + 1), payment_currency_code=currency)
    )
    assert error.code == "invalid_payload"
    assert error.details == {"payment_data": {"payment_amount": ["Too large an amount."]}}


def test_a_fraction_of_a_minor_unit_beyond_decimal_precision_is_still_refused() -> None:
    error = refused(make_body(payment_amount="1." + "0" * 30 + "1"))
    assert error.fields == ("payment_data.payment_amount",)


@pytest.mark.parametrize("currency", ["cn", "CN", "XXXX", "C1Y", "ÇNY", "", "XXX", "XAU", "ABC"])
def test_a_currency_that_is_not_an_active_iso_code_is_named(currency: str) -> None:
    error = refused(make_body(payment_currency_code=currency))
    assert error.fields == ("payment_data.payment_currency_code",)


def test_a_lower_case_currency_is_upper_cased() -> None:
    assert parse_notification(encode(make_body(payment_currency_code="cny"))).currency == "CNY"


def test_a_bad_currency_does_not_also_blame_the_amount() -> None:
    error = refused(make_body(payment_amount="25.001", payment_currency_code="XXXX"))
    assert error.fields == ("payment_data.payment_currency_code",)


@pytest.mark.parametrize(
    "time",
    [
        "2026112112000",
        "202611211200000",
        "20261301120000",
        "20260230120000",
        "20261121240000",
        "20261121126000",
        "20261121120060",
        "20261121235960",
        "00001121120000",
        "2026-11-21T12:00:00Z",
        "2026112112000\uff10",
        "20261121 20000",
        "",
    ],
)
def test_a_payment_time_that_is_not_a_real_calendar_time_is_named(time: str) -> None:
    error = refused(make_body(payment_time=time))
    assert error.fields == ("payment_data.payment_time",)


def test_a_leap_day_is_a_real_calendar_time() -> None:
    outcome = parse_notification(encode(make_body(payment_time="20280229235959")))
    assert outcome.paid_at == datetime(2028, 2, 29, 23, 59, 59, tzinfo=UTC)


@pytest.mark.parametrize(
    ("time", "zone"), [("00010101000000", "+08:00"), ("99991231233000", "-01:00")]
)
def test_a_payment_time_outside_representable_utc_is_named(time: str, zone: str) -> None:
    error = refused(make_body(payment_time=time), time_zone=zone)
    assert error.fields == ("payment_data.payment_time",)


# --- forms that do not fit ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("members", "fields"),
    [
        (
            {
                "stripe_payment_intent_id": "pi_1",
                "status": "succeeded",
                "adyen_psp_reference": "8815",
                "result_code": "Authorised",
            },
            ("payment_data._schema",),
        ),
        ({"status": "succeeded", "result_code": "Authorised"}, ("payment_data._schema",)),
        ({"stripe_payment_intent_id": "pi_1", "result_code": "x"}, ("payment_data._schema",)),
        ({"stripe_payment_intent_id": "pi_1"}, ("payment_data.status",)),
        ({"status": "succeeded"}, ("payment_data._schema",)),
        ({"adyen_psp_reference": "8815"}, ("payment_data.result_code",)),
        ({"result_code": "Authorised"}, ("payment_data._schema",)),
        (
            {"a_payment_intent_id": "1", "b_payment_intent_id": "2", "status": "succeeded"},
            ("payment_data._schema",),
        ),
        (
            {"a_psp_reference": "1", "b_psp_reference": "2", "result_code": "Authorised"},
            ("payment_data._schema",),
        ),
        (
            {"stripe_payment_intent_id": 1, "status": "succeeded"},
            ("payment_data.stripe_payment_intent_id",),
        ),
        (
            {"stripe_payment_intent_id": "", "status": "succeeded"},
            ("payment_data.stripe_payment_intent_id",),
        ),
        (
            {"stripe_payment_intent_id": "p" * 256, "status": "succeeded"},
            ("payment_data.stripe_payment_intent_id",),
        ),
        ({"stripe_payment_intent_id": "pi_1", "status": None}, ("payment_data.status",)),
        ({"stripe_payment_intent_id": "pi_1", "status": 1}, ("payment_data.status",)),
        ({"adyen_psp_reference": "8815", "result_code": ""}, ("payment_data.result_code",)),
    ],
)
def test_payment_data_fitting_no_form_or_two_is_refused(
    members: dict[str, Any], fields: tuple[str, ...]
) -> None:
    error = refused(make_body(**members))
    assert error.code == "invalid_payload"
    assert error.fields == fields


@pytest.mark.parametrize(
    ("members", "form_field"),
    [
        ({"stripe_payment_intent_id": "pi_1"}, "status"),
        ({"status": "succeeded"}, "_schema"),
        ({"Stripe_payment_intent_id": "pi_1", "status": "succeeded"}, "Stripe_payment_intent_id"),
    ],
)
def test_a_form_that_does_not_fit_and_an_amount_in_no_whole_minor_units_are_both_named(
    members: dict[str, Any], form_field: str
) -> None:
    error = refused(make_body(payment_amount="25.001", **members))
    assert error.fields == tuple(
        sorted(["payment_data.payment_amount", f"payment_data.{form_field}"])
    )
    assert error.details["payment_data"]["payment_amount"] == [
        "Not a whole number of CNY minor units."
    ]


def test_two_forms_at_once_names_the_members_of_both() -> None:
    body = make_body(stripe_payment_intent_id="pi_1", status="succeeded", adyen_psp_reference="1")
    (message,) = refused(body).details["payment_data"]["_schema"]
    assert "stripe_payment_intent_id" in message
    assert "adyen_psp_reference" in message


# --- the error itself -----------------------------------------------------------------------------


def test_every_problem_is_reported_at_once_in_marshmallows_shape() -> None:
    body = make_body(
        top={"merchant_transaction_id": MISSING},
        payment_amount="25.001",
        payment_time="20260230120000",
    )
    error = refused(body)
    assert error.details == {
        "merchant_transaction_id": ["Missing data for required field."],
        "payment_data": {
            "payment_amount": ["Not a whole number of CNY minor units."],
            "payment_time": ["Not a real calendar time."],
        },
    }
    assert error.fields == (
        "merchant_transaction_id",
        "payment_data.payment_amount",
        "payment_data.payment_time",
    )
    assert error.message == (
        "The notification is not valid: check merchant_transaction_id, "
        "payment_data.payment_amount, payment_data.payment_time."
    )


@pytest.mark.parametrize("currency", ["CNY", "KWD"])
def test_a_whole_amount_without_a_decimal_point_is_refused_where_minor_units_are_not_major(
    currency: str,
) -> None:
    # 2500 could be minor units (25.00 CNY) as well as major ones; only where the two are the
    # same, in a zero-decimal currency, is the bare form unambiguous.
    error = refused(make_body(payment_amount="2500", payment_currency_code=currency))
    assert error.details == {
        "payment_data": {
            "payment_amount": [f"A {currency} amount needs a decimal point (such as 25.00)."]
        }
    }


def test_a_bare_amount_beside_a_bad_currency_is_refused_with_it() -> None:
    error = refused(make_body(payment_amount="2500", payment_currency_code="yuan"))
    assert error.fields == ("payment_data.payment_amount", "payment_data.payment_currency_code")


def test_the_error_message_never_echoes_the_value_sent() -> None:
    error = refused(make_body(payment_amount="secret-looking-value", payment_currency_code="QQQ"))
    assert "secret-looking-value" not in f"{error.message} {error.details} {error!r}"
    assert "QQQ" not in f"{error.message} {error.details}"


def test_the_error_keeps_its_cause() -> None:
    error = refused(b"{")
    assert isinstance(error.__cause__, ValueError)
    assert isinstance(refused(make_body(payment_amount="1")).__cause__, Exception)


def test_the_error_details_are_json_serialisable() -> None:
    error = refused(make_body(top={"merchant_transaction_id": 5}, payment_time="x"))
    assert json.loads(json.dumps(error.details)) == error.details
