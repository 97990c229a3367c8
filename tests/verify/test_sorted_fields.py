"""The sorted-fields string, pinned case by case, and the limits of the parse behind it.

Each case gives the body and the (key, value) pairs the SDK writes, in order; the RSA form
joins them ``k=v&k=v``, the HMAC form ``kvkv``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payhooks.verify import sorted_fields_string

CASES: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("flat", '{"b": "2", "a": "1"}', [("a", "1"), ("b", "2")]),
    (
        "nested-object-walked-in-place",
        '{"m": {"z": "1", "a": "2"}, "b": "3", "n": "4"}',
        [("b", "3"), ("a", "2"), ("z", "1"), ("n", "4")],
    ),
    (
        "nested-keys-not-prefixed",
        '{"payment_data": {"payment_status": "PS", "payment_amount": "25.00"}}',
        [("payment_amount", "25.00"), ("payment_status", "PS")],
    ),
    (
        "array-of-objects",
        '{"items": [{"b": "1", "a": "2"}, {"c": "3"}], "a": "0"}',
        [("a", "0"), ("a", "2"), ("b", "1"), ("c", "3")],
    ),
    ("array-of-scalars-skipped", '{"tags": ["x", 1, true, null], "a": "1"}', [("a", "1")]),
    (
        "array-inside-array-skipped",
        '{"l": [[{"a": "1"}], {"b": "2"}, "s"]}',
        [("b", "2")],
    ),
    ("empty-array-and-object", '{"l": [], "o": {}, "a": "1"}', [("a", "1")]),
    ("nulls-skipped", '{"a": null, "b": "1", "c": {"d": null}}', [("b", "1")]),
    ("booleans", '{"t": true, "f": false}', [("f", "false"), ("t", "true")]),
    (
        "integers",
        '{"i": 25, "n": -3, "z": 0, "neg0": -0, "big": 123456789012345678901234567890}',
        [
            ("big", "123456789012345678901234567890"),
            ("i", "25"),
            ("n", "-3"),
            ("neg0", "0"),
            ("z", "0"),
        ],
    ),
    (
        "non-integer-numbers",
        '{"a": 25.5, "b": 1.00, "c": 1e20, "d": 1E-5, "e": 2.50e1, "f": -0.0, "g": 0.001,'
        ' "h": 12345678.9, "i": 1e0}',
        [
            ("a", "25.5"),
            ("b", "1.0"),
            ("c", "1.0E20"),
            ("d", "1.0E-5"),
            ("e", "25.0"),
            ("f", "-0.0"),
            ("g", "0.001"),
            ("h", "1.23456789E7"),
            ("i", "1.0"),
        ],
    ),
    (
        "strings-as-they-are",
        '{"s": "a=b&c", "u": "\\u00fcn\\u00efcode", "e": "line\\nbreak \\"q\\"", "x": ""}',
        [("e", 'line\nbreak "q"'), ("s", "a=b&c"), ("u", "ünïcode"), ("x", "")],
    ),
    (
        "ascii-order-is-code-unit-order",
        '{"a": "1", "B": "2", "_": "3", "ab": "4", "A": "5"}',
        [("A", "5"), ("B", "2"), ("_", "3"), ("a", "1"), ("ab", "4")],
    ),
    (
        "non-ascii-keys",
        '{"\\u65e5\\u672c": "3", "z": "2", "\\u00e9": "1"}',
        [("z", "2"), ("é", "1"), ("日本", "3")],
    ),
    (
        "utf16-order-differs-from-code-point-order",
        '{"\\uff5e": "fullwidth tilde", "\\ud83d\\ude00": "emoji", "\\ue000": "private use"}',
        [("😀", "emoji"), ("\ue000", "private use"), ("\uff5e", "fullwidth tilde")],
    ),
    (
        "a-notification",
        '{"ll_transaction_id": "ll-1", "merchant_transaction_id": "order-1", "payment_data":'
        ' {"payment_status": "PS", "payment_amount": "25.00", "payment_currency_code": "CNY",'
        ' "payment_time": "20261118120000", "stripe_payment_intent_id": "pi_1",'
        ' "status": "succeeded"}}',
        [
            ("ll_transaction_id", "ll-1"),
            ("merchant_transaction_id", "order-1"),
            ("payment_amount", "25.00"),
            ("payment_currency_code", "CNY"),
            ("payment_status", "PS"),
            ("payment_time", "20261118120000"),
            ("status", "succeeded"),
            ("stripe_payment_intent_id", "pi_1"),
        ],
    ),
    ("empty-object", "{}", []),
]


@pytest.mark.parametrize(("body", "pairs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rsa_form_joins_key_equals_value_with_ampersands(
    body: str, pairs: list[tuple[str, str]]
) -> None:
    expected = "&".join(f"{key}={value}" for key, value in pairs)
    assert sorted_fields_string(body.encode()) == expected
    assert sorted_fields_string(body.encode(), form="rsa") == expected


@pytest.mark.parametrize(("body", "pairs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hmac_form_concatenates_without_separators(body: str, pairs: list[tuple[str, str]]) -> None:
    expected = "".join(f"{key}{value}" for key, value in pairs)
    assert sorted_fields_string(body.encode(), form="hmac") == expected


def test_utf16_order_is_not_python_string_order() -> None:
    # The case above would pass by accident if Python's own order agreed with Java's.
    keys = ["\uff5e", "\U0001f600"]
    assert sorted(keys) == keys
    assert sorted_fields_string(json.dumps(dict.fromkeys(keys, "v")).encode()).startswith(
        "\U0001f600="
    )


def test_text_body_is_accepted_as_well_as_bytes() -> None:
    assert sorted_fields_string('{"é": "ü"}') == "é=ü"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[1, 2]", "not a JSON object"),
        (b'"text"', "not a JSON object"),
        (b"", "not JSON"),
        (b'{"a": 1,}', "not JSON"),
        (b"{'a': 1}", "not JSON"),
        (b'{"a": 1} trailing', "not JSON"),
        (b'{"a": NaN}', "NaN"),
        (b'{"a": Infinity}', "Infinity"),
        (b'{"a": -Infinity}', "Infinity"),
        (b'{"a": 1, "a": 2}', "duplicate"),
        (b'{"o": {"k": 1, "k": 1}}', "duplicate"),
        (b'{"a": "\xff"}', "UTF-8"),
        (b'\xef\xbb\xbf{"a": 1}', "not JSON"),
        (b'{"a": "\\ud800"}', "surrogate"),
        (b'{"\\udc00": 1}', "surrogate"),
    ],
)
def test_body_that_cannot_be_canonicalized_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sorted_fields_string(body)


def test_body_over_the_size_cap_is_refused_before_parsing() -> None:
    body = json.dumps({"a": "x" * 100}).encode()
    assert sorted_fields_string(body, max_body_bytes=len(body)) == "a=" + "x" * 100
    with pytest.raises(ValueError, match="larger than"):
        sorted_fields_string(body, max_body_bytes=len(body) - 1)
    with pytest.raises(ValueError, match="larger than"):
        sorted_fields_string(body.decode(), max_body_bytes=len(body) - 1)


def nested(depth: int) -> bytes:
    """An object whose innermost value sits ``depth`` containers deep."""
    return ('{"a": ' * depth + '"x"' + "}" * depth).encode()


def test_nesting_up_to_the_limit_is_walked() -> None:
    assert sorted_fields_string(nested(32)) == "a=x"
    assert sorted_fields_string(nested(5), max_depth=5) == "a=x"


def test_nesting_beyond_the_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="deeper than 5"):
        sorted_fields_string(nested(6), max_depth=5)


def test_hostile_nesting_is_refused_without_recursion() -> None:
    body = b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    with pytest.raises(ValueError, match="deeper than 32"):
        sorted_fields_string(body, max_body_bytes=len(body))


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    body = json.dumps({"a": "[[[[{{{{" * 20, "b": '\\"[[[['}).encode()
    assert sorted_fields_string(body, max_depth=1).startswith("a=[[[[")


def test_colons_and_escaped_quotes_inside_strings_do_not_count_as_members() -> None:
    body = json.dumps({"a": ':":' * 20, "b": "{:}"}).encode()
    assert sorted_fields_string(body, max_members=2) == "a=" + ':":' * 20 + "&b={:}"


def test_each_object_is_ordered_by_code_unit_whatever_its_neighbours_hold() -> None:
    # An ASCII-keyed object beside one whose keys need UTF-16 order: each is sorted its way.
    body = json.dumps(
        {"b": "1", "a": {"\uff5e": "2", "\U0001f600": "3"}, "c": {"y": "4", "x": "5"}}
    ).encode()
    assert sorted_fields_string(body, form="hmac") == "\U0001f6003\uff5e2b1x5y4"


def test_unknown_form_is_refused() -> None:
    with pytest.raises(ValueError, match="form"):
        sorted_fields_string(b"{}", form="xml")  # type: ignore[arg-type]


# -- properties ---------------------------------------------------------------------------------

keys = st.text(max_size=8)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.text(max_size=10),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=20,
)
objects = st.dictionaries(keys, values, max_size=6)


def reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(item) for item in value]
    return value


@settings(max_examples=150)
@given(objects)
def test_string_does_not_depend_on_how_the_json_is_laid_out(document: dict[str, Any]) -> None:
    compact = json.dumps(document, separators=(",", ":")).encode()
    spaced = json.dumps(reversed_keys(document), indent=2, ensure_ascii=False).encode()
    assert sorted_fields_string(compact) == sorted_fields_string(spaced)
    assert sorted_fields_string(compact, form="hmac") == sorted_fields_string(spaced, form="hmac")


def utf16_code_units(key: str) -> list[int]:
    """Java's view of a string, computed arithmetically (not through an encoder)."""
    units: list[int] = []
    for char in key:
        point = ord(char)
        if point > 0xFFFF:
            point -= 0x10000
            units += [0xD800 + (point >> 10), 0xDC00 + (point & 0x3FF)]
        else:
            units.append(point)
    return units


def written(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


@settings(max_examples=150)
@given(st.dictionaries(keys, scalars, max_size=8))
def test_flat_object_writes_every_non_null_scalar_in_code_unit_order(
    document: dict[str, Any],
) -> None:
    expected = [
        f"{key}={written(document[key])}"
        for key in sorted(document, key=utf16_code_units)
        if document[key] is not None
    ]
    assert sorted_fields_string(json.dumps(document).encode()) == "&".join(expected)
