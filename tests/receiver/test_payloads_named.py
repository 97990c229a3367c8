"""What an unverified body's start names: read member by member as far as the bytes parse,
and never more than a string the ledger could hold, once."""

from __future__ import annotations

import pytest

from payhooks.receiver.payloads.named import NamedInStart, named_in_start

WHOLE = b'{"ll_transaction_id": "ll-1", "merchant_transaction_id": "order-1", "payment_data": {}}'


@pytest.mark.parametrize(
    ("start", "named"),
    [
        (WHOLE, NamedInStart("order-1", "ll-1")),
        (WHOLE[:70], NamedInStart("order-1", "ll-1")),  # cut inside payment_data
        (WHOLE[:50], NamedInStart(None, "ll-1")),  # cut inside the identifier
        (b' \n{ "merchant_transaction_id" : "a" }', NamedInStart("a", None)),
        (b'{"payment_data": {"merchant_transaction_id": "nested"}}', NamedInStart()),
        (b'{"merchant_transaction_id": "a", "merchant_transaction_id": "b"}', NamedInStart()),
        (b'{"merchant_transaction_id": 7}', NamedInStart()),
        (b'{"merchant_transaction_id": ""}', NamedInStart()),
        (b'{"merchant_transaction_id": "' + b"a" * 65 + b'"}', NamedInStart()),
        (b'{"merchant_transaction_id": "' + b"a" * 64 + b'"}', NamedInStart("a" * 64)),
        (b'{"merchant_transaction_id": "a\\u0000b"}', NamedInStart()),
        (b'{"merchant_transaction_id": "\\ud800"}', NamedInStart()),
        ('{"merchant_transaction_id": "caf\u00e9"}'.encode(), NamedInStart("caf\u00e9")),
        ('{"merchant_transaction_id": "caf\u00e9"}'.encode()[:-3], NamedInStart()),
        (b'{"x": ' + b"[" * 5000, NamedInStart()),
        (b"[" * 5000, NamedInStart()),
        (b'["merchant_transaction_id", "a"]', NamedInStart()),
        (b"\xff\xfe{", NamedInStart()),
        (b"", NamedInStart()),
        (b'{"merchant_transaction_id" "a"}', NamedInStart()),
    ],
    ids=lambda value: None if isinstance(value, NamedInStart) else repr(value[:40]),
)
def test_the_start_of_a_body_names_what_parses_and_nothing_doubtful(
    start: bytes, named: NamedInStart
) -> None:
    assert named_in_start(start) == named
