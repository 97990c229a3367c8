"""The precomputed HMAC-SHA256 must be HMAC-SHA256, byte for byte, for every key length."""

from __future__ import annotations

import hmac

from hypothesis import given, settings
from hypothesis import strategies as st

from payhooks.verify.keyed_hash import HmacSha256


@settings(max_examples=300)
@given(
    key=st.binary(max_size=200), messages=st.lists(st.binary(max_size=300), min_size=1, max_size=4)
)
def test_equals_the_standard_library_for_any_key_and_messages(
    key: bytes, messages: list[bytes]
) -> None:
    keyed = HmacSha256(key)
    for message in messages:  # reused: the cached states must never be consumed
        assert keyed.digest(message) == hmac.digest(key, message, "sha256")


def test_keys_at_the_block_size_boundary() -> None:
    for size in (63, 64, 65, 128):
        key = bytes(range(size))
        assert HmacSha256(key).digest(b"m") == hmac.digest(key, b"m", "sha256")


def test_repr_hides_the_key() -> None:
    assert "hidden" in repr(HmacSha256(b"secret"))
    assert "secret" not in repr(HmacSha256(b"secret"))
