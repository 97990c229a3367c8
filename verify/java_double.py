"""Java's ``Double.toString``, because the service's SDK writes non-integer numbers with it.

The sorted-fields string must be byte-for-byte what the SDK signed, so ``25.5`` must become
``25.5``, ``1.00`` must become ``1.0`` and ``1e20`` must become ``1.0E20``. The rules, as the
JDK (19 and later) specifies them:

- NaN, infinities and zeros: ``NaN``, ``Infinity``, ``-Infinity``, ``0.0``, ``-0.0``.
- The digits are the shortest decimal that reads back as the same double; among several of
  that length, the closest. Python's ``repr`` gives exactly that, with one exception the JDK
  spells out: when the shortest has a single digit, two-digit decimals compete too, and the
  closest wins. Only subnormals with little precision feel it (``4.9E-324``, which ``repr``
  writes ``5e-324``): for a normal double the interval that reads back as it is far
  narrower than the step between two-digit decimals, so the one-digit decimal is the only
  candidate and the comparison is skipped. It is done in exact integer arithmetic: the
  sorted-fields schemes format numbers of unauthenticated bodies, so each must stay cheap.
- For ``1e-3 <= |x| < 1e7``: plain notation, at least one digit after the point
  (``100.0``, ``0.001``, ``1234567.5``).
- Otherwise computerized scientific notation: one digit, the point, at least one more digit,
  ``E`` and the exponent with ``-`` but never ``+`` (``1.0E7``, ``1.0E-4``, ``2.5E20``).
"""

from __future__ import annotations

import math
import sys

__all__ = ["java_double_to_string"]

#: The smallest positive normal double; below it the JDK's two-digit rule can matter.
_MIN_NORMAL = sys.float_info.min


def java_double_to_string(value: float) -> str:
    """Format ``value`` exactly as Java's ``Double.toString(double)`` does."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    digits, exponent = _shortest_digits(magnitude)
    if len(digits) == 1 and magnitude < _MIN_NORMAL:
        digits, exponent = _closest_of_one_or_two_digits(magnitude, digits, exponent)
    if -3 <= exponent < 7:
        return sign + _plain(digits, exponent)
    return sign + _scientific(digits, exponent)


def _shortest_digits(magnitude: float) -> tuple[str, int]:
    """The significant digits of ``repr`` (no leading or trailing zeros) and the exponent
    ``n`` such that the value is ``d.ddd x 10**n``."""
    text = repr(magnitude)
    mantissa, _, exponent_text = text.partition("e")
    integer_part, _, fraction_part = mantissa.partition(".")
    all_digits = integer_part + fraction_part
    leading_zeros = len(all_digits) - len(all_digits.lstrip("0"))
    exponent = len(integer_part) - 1 - leading_zeros + (int(exponent_text) if exponent_text else 0)
    return all_digits.strip("0"), exponent


def _closest_of_one_or_two_digits(magnitude: float, digits: str, exponent: int) -> tuple[str, int]:
    """The JDK's rule for a one-digit shortest: among the decimals of one or two digits that
    read back as ``magnitude``, the closest to it (ties: the even last digit).

    Exact, in integers: every quantity is multiplied by ``denominator * 10**shift`` (the
    magnitude is ``numerator / denominator``), which makes the magnitude and each candidate
    ``significand * 10**scale`` whole numbers.
    """
    numerator, denominator = magnitude.as_integer_ratio()
    lowest = exponent - 2
    shift = max(0, -lowest)
    exact = numerator * 10**shift
    best_key: tuple[int, int] | None = None
    best = (digits, exponent)
    for scale in (lowest, exponent - 1, exponent):
        unit = denominator * 10 ** (scale + shift)
        low = exact // unit
        for significand in (low, low + 1):
            if not 1 <= significand <= 99:
                continue
            if float(f"{significand}e{scale}") != magnitude:
                continue
            candidate_digits = str(significand).rstrip("0")
            candidate_exponent = scale + len(str(significand)) - 1
            key = (abs(significand * unit - exact), int(candidate_digits[-1]) % 2)
            if best_key is None or key < best_key:
                best_key = key
                best = (candidate_digits, candidate_exponent)
    return best


def _plain(digits: str, exponent: int) -> str:
    if exponent >= 0:
        integer_part = digits[: exponent + 1].ljust(exponent + 1, "0")
        fraction_part = digits[exponent + 1 :] or "0"
        return f"{integer_part}.{fraction_part}"
    return "0." + "0" * (-exponent - 1) + digits


def _scientific(digits: str, exponent: int) -> str:
    return f"{digits[0]}.{digits[1:] or '0'}E{exponent}"
