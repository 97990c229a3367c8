"""Header lookup: lower-case names first, any case after, empty values as absent."""

from __future__ import annotations

from typing import Any

import pytest
from werkzeug.datastructures import Headers

from payhooks.verify.headers import lookup_headers

NAMES = ("webhook-id", "webhook-signature")


@pytest.mark.parametrize(
    "headers",
    [
        {"webhook-id": "a", "webhook-signature": "b"},
        {"Webhook-Id": "a", "WEBHOOK-SIGNATURE": "b"},
        {"webhook-id": "a", "Webhook-Signature": "b", "Other": "c"},
        Headers([("Webhook-Id", "a"), ("Webhook-Signature", "b")]),
    ],
    ids=["lower", "mixed", "partly", "werkzeug"],
)
def test_names_are_found_in_any_case(headers: Any) -> None:
    assert lookup_headers(headers, NAMES) == ["a", "b"]


def test_absent_and_empty_values_are_none() -> None:
    assert lookup_headers({"Webhook-Id": ""}, NAMES) == [None, None]
    assert lookup_headers({}, NAMES) == [None, None]


def test_a_value_is_returned_as_sent() -> None:
    assert lookup_headers({"webhook-id": "  a "}, NAMES) == ["  a ", None]
