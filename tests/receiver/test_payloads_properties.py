"""Properties of the parser over large input spaces: money round trips, and no crash."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from payhooks.receiver.payloads import MAX_AMOUNT_MINOR, PayloadError, parse_notification
from payhooks.storage import MINOR_UNIT_EXPONENTS, Outcome

CURRENCIES = st.sampled_from(sorted(MINOR_UNIT_EXPONENTS))


def notification(amount: str, currency: str, payment_time: str = "20261121120000") -> bytes:
    return json.dumps(
        {
            "ll_transaction_id": "ll_txn_1",
            "merchant_transaction_id": "order-1",
            "payment_data": {
                "payment_status": "PS",
                "payment_amount": amount,
                "payment_currency_code": currency,
                "payment_time": payment_time,
            },
        }
    ).encode()


def service_amount(minor: int, currency: str) -> str:
    """The amount as the service writes it: major units, at least two decimals (JPY 2500.00)."""
    exponent = MINOR_UNIT_EXPONENTS[currency]
    whole, fraction = divmod(minor, 10**exponent)
    digits = f"{fraction:0{exponent}d}" if exponent else ""
    return f"{whole}.{digits.ljust(max(2, exponent), '0')}"


def test_service_amount_writes_what_the_interface_shows() -> None:
    assert service_amount(2500, "CNY") == "25.00"
    assert service_amount(2500, "JPY") == "2500.00"
    assert service_amount(12345, "KWD") == "12.345"
    assert service_amount(5, "KWD") == "0.005"


@given(minor=st.integers(0, MAX_AMOUNT_MINOR), currency=CURRENCIES)
def test_an_amount_written_as_the_service_does_gives_back_its_minor_units(
    minor: int, currency: str
) -> None:
    outcome = parse_notification(notification(service_amount(minor, currency), currency))
    assert outcome.amount_minor == minor
    assert outcome.currency == currency
    assert outcome.amount * 10 ** MINOR_UNIT_EXPONENTS[currency] == minor


@given(
    whole=st.integers(0, 10**20),
    fraction=st.text(alphabet="0123456789", min_size=1, max_size=8),
    currency=CURRENCIES,
)
def test_any_decimal_spelling_parses_exactly_when_it_is_whole_minor_units(
    whole: int, fraction: str, currency: str
) -> None:
    exponent = MINOR_UNIT_EXPONENTS[currency]
    expected_minor = whole * 10**exponent + int(fraction[:exponent].ljust(exponent, "0") or "0")
    is_whole = fraction[exponent:].strip("0") == "" and expected_minor <= MAX_AMOUNT_MINOR
    amount = f"{whole}.{fraction}"
    result = outcome_or_error(notification(amount, currency))
    if is_whole:
        assert isinstance(result, Outcome)
        assert result.amount_minor == expected_minor
        assert result.amount == Decimal(amount)
        assert result.amount.as_tuple().exponent == -len(fraction)
    else:
        assert isinstance(result, PayloadError)
        assert result.fields == ("payment_data.payment_amount",)


@given(
    local=st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 12, 31)),
    offset_minutes=st.integers(-18 * 60, 18 * 60),
)
def test_a_payment_time_reads_as_that_wall_time_in_the_zone(
    local: datetime, offset_minutes: int
) -> None:
    local = local.replace(microsecond=0)
    zone = timezone(timedelta(minutes=offset_minutes))
    body = notification("25.00", "CNY", local.strftime("%Y%m%d%H%M%S"))
    assert parse_notification(body, time_zone=zone).paid_at == local.replace(tzinfo=zone)
    assert parse_notification(body).paid_at == local.replace(tzinfo=UTC)


# --- no input makes the parser raise anything but PayloadError ------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.decimals(allow_nan=False)
    | st.text(max_size=20)
    | st.sampled_from(["25.00", "2500.00", "CNY", "JPY", "20261121120000", "PS", "succeeded"])
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def member(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a valid value for a member, sometimes any JSON value at all."""
    return st.integers(0, 9).flatmap(lambda n: JSON_VALUES if n == 0 else valid)


PAYMENT_DATA = st.fixed_dictionaries(
    {
        "payment_status": member(st.sampled_from(["PS", "PF", "RS", "ZZ"])),
        "payment_amount": member(st.sampled_from(["25.00", "2500.00", "12.345", "0.01", "1.5"])),
        "payment_currency_code": member(st.sampled_from(["CNY", "JPY", "KWD", "cny", "XXX"])),
        "payment_time": member(st.sampled_from(["20261121120000", "20261301120000"])),
    },
).flatmap(
    lambda base: st.one_of(
        st.just({}),
        st.fixed_dictionaries(
            {
                "stripe_payment_intent_id": member(st.just("pi_1")),
                "status": member(st.sampled_from(["succeeded", "failed"])),
            },
        ),
        st.fixed_dictionaries(
            {
                "adyen_psp_reference": member(st.just("8815")),
                "result_code": member(st.sampled_from(["Authorised", "Refused"])),
            },
        ),
        st.fixed_dictionaries(
            {},
            optional=dict.fromkeys(
                ["status", "result_code", "a_psp_reference", "Bad_payment_intent_id"], JSON_VALUES
            ),
        ),
    ).map(lambda form: {**base, **form})
)
NEAR_NOTIFICATIONS = st.fixed_dictionaries(
    {
        "ll_transaction_id": member(st.text(min_size=1, max_size=5)),
        "merchant_transaction_id": member(st.text(min_size=1, max_size=70)),
        "payment_data": st.one_of(PAYMENT_DATA, PAYMENT_DATA, PAYMENT_DATA, JSON_VALUES),
    }
).flatmap(
    lambda known: st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3).map(
        lambda unknown: {**unknown, **known}
    )
)


def check_outcome(outcome: Outcome) -> None:
    assert isinstance(outcome.amount, Decimal)
    assert outcome.paid_at.tzinfo is UTC
    assert 0 <= outcome.amount_minor <= MAX_AMOUNT_MINOR
    assert len(outcome.currency) == 3
    assert outcome.currency.isupper()


def outcome_or_error(body: Any, **options: Any) -> Outcome | PayloadError:
    try:
        return parse_notification(body, **options)
    except PayloadError as err:
        return err


def parse_or_refuse(body: Any) -> None:
    result = outcome_or_error(body, delivery_time_zone="Asia/Shanghai")
    if isinstance(result, Outcome):
        check_outcome(result)
    else:
        assert result.code in {"malformed_json", "invalid_payload"}
        assert result.message
        assert result.fields
        json.dumps(result.details)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_only_ever_raise_payload_error(body: bytes) -> None:
    parse_or_refuse(body)


@settings(max_examples=300)
@given(JSON_VALUES)
def test_random_json_only_ever_raises_payload_error(value: Any) -> None:
    parse_or_refuse(json.dumps(value, default=str).encode())
    parse_or_refuse(json.dumps(value, default=str))
    if isinstance(value, dict):
        parse_or_refuse(value)


@settings(max_examples=300)
@given(NEAR_NOTIFICATIONS)
def test_bodies_near_a_notification_only_ever_raise_payload_error(value: dict[str, Any]) -> None:
    parse_or_refuse(json.dumps(value, default=str).encode())
    parse_or_refuse(value)


@given(st.binary(max_size=40), st.integers(0, 200), st.booleans())
def test_a_valid_body_with_bytes_spliced_in_only_ever_raises_payload_error(
    noise: bytes, position: int, replace: bool
) -> None:
    body = notification("25.00", "CNY")
    position = min(position, len(body))
    end = position + len(noise) if replace else position
    parse_or_refuse(body[:position] + noise + body[end:])


# --- a body's bytes, its text and the mapping it decodes to parse alike ---------------------------

#: Text that often holds a surrogate (lone, or one of a pair), a neighbour of the surrogate
#: range, a backslash or a bracket. (``st.text`` never makes surrogates, hence the join.)
ODD_TEXT = st.lists(
    st.characters()
    | st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\ud7ff", "\ue000"])
    | st.sampled_from(["\U0001f600", "\\", "{", "["]),
    max_size=6,
).map("".join)
PLAIN_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ODD_TEXT,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(ODD_TEXT, children, max_size=3)
    ),
    max_leaves=8,
)


def same_result(first: Outcome | PayloadError, second: Outcome | PayloadError) -> bool:
    if isinstance(first, Outcome) or isinstance(second, Outcome):
        return first == second
    return (first.code, first.message, first.details) == (
        second.code,
        second.message,
        second.details,
    )


@settings(max_examples=300)
@given(
    extra=st.dictionaries(ODD_TEXT, PLAIN_VALUES, max_size=3),
    wrap=st.integers(0, 40),
    upper=st.booleans(),
)
def test_bytes_text_and_the_decoded_mapping_parse_alike(
    extra: dict[str, Any], wrap: int, upper: bool
) -> None:
    for _ in range(wrap):  # nested lists, around the depth limit
        extra = {"w": [extra]}
    body = {**extra, **json.loads(notification("25.00", "CNY"))}
    escaped = json.dumps(body)
    if upper:  # \uD800 as well as \ud800 (may change a string holding a backslash: still JSON)
        escaped = escaped.replace("\\ud", "\\uD")
    expected = outcome_or_error(json.loads(escaped, parse_float=Decimal))
    assert same_result(outcome_or_error(escaped.encode()), expected)
    assert same_result(outcome_or_error(escaped), expected)
    raw = json.dumps(body, ensure_ascii=False)
    assert same_result(
        outcome_or_error(raw), outcome_or_error(json.loads(raw, parse_float=Decimal))
    )
