"""Java's ``Double.toString``, pinned by values whose Java output is known, and by properties
that must hold for every double."""

from __future__ import annotations

import math
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payhooks.verify import java_double_to_string

MIN_SUBNORMAL = 5e-324


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1.0"),
        (25.5, "25.5"),
        (100.0, "100.0"),
        (0.1, "0.1"),
        (-2.5, "-2.5"),
        (1e20, "1.0E20"),
        (2.5e20, "2.5E20"),
        (1e23, "1.0E23"),
        (1e-5, "1.0E-5"),
        (1.5e-5, "1.5E-5"),
        (1e-4, "1.0E-4"),
        (0.001, "0.001"),
        (0.0015, "0.0015"),
        (0.0009999999999999998, "9.999999999999998E-4"),
        (1e7, "1.0E7"),
        (9999999.0, "9999999.0"),
        (1234567.5, "1234567.5"),
        (123456789.0, "1.23456789E8"),
        (-1e7, "-1.0E7"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (sys.float_info.max, "1.7976931348623157E308"),
        (sys.float_info.min, "2.2250738585072014E-308"),
        (MIN_SUBNORMAL, "4.9E-324"),
        (2 * MIN_SUBNORMAL, "9.9E-324"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
    ],
)
def test_known_java_outputs(value: float, expected: str) -> None:
    assert java_double_to_string(value) == expected


finite = st.floats(allow_nan=False, allow_infinity=False).filter(lambda value: value != 0)


@settings(max_examples=500)
@given(finite)
def test_output_reads_back_as_the_same_double(value: float) -> None:
    assert float(java_double_to_string(value)) == value


@settings(max_examples=500)
@given(finite)
def test_plain_inside_the_java_range_scientific_outside(value: float) -> None:
    text = java_double_to_string(value)
    if 1e-3 <= abs(value) < 1e7:
        assert "E" not in text
        integer_part, fraction_part = text.lstrip("-").split(".")
        assert integer_part
        assert fraction_part
    else:
        mantissa, exponent = text.lstrip("-").split("E")
        assert len(mantissa.split(".")[0]) == 1
        assert mantissa[0] != "0"
        assert mantissa.split(".")[1]
        assert "+" not in exponent
        assert exponent.lstrip("-").isdigit()


@settings(max_examples=500)
@given(finite.filter(lambda value: abs(value) >= sys.float_info.min))
def test_normal_doubles_use_no_more_digits_than_the_shortest_repr(value: float) -> None:
    text = java_double_to_string(value).lstrip("-")
    digits = text.split("E")[0].replace(".", "").strip("0")
    shortest = repr(abs(value)).split("e")[0].replace(".", "").strip("0")
    assert digits == shortest
