"""HMAC-SHA256 with the key's work done once, at construction.

``hmac.digest`` redoes the key schedule on every call (and OpenSSL 3 fetches the digest and
allocates its contexts each time); even an ``hmac.HMAC`` keyed once and copied per message
goes through three Python-level methods and OpenSSL's HMAC context per call. For a 1 KiB
webhook body either costs about as much again as the hashing itself.

So this is RFC 2104 spelled out over two ``hashlib.sha256`` states, the same construction as
the standard library's own pure-Python fallback (``hmac.HMAC._init_old``): the key, hashed
first when longer than the 64-byte block, padded with zeros to the block, XORed with ``0x36``
for the inner state and ``0x5c`` for the outer, each state hashed once here. Per message only
a copy of the inner state is fed the message, and the outer hash is one ``sha256`` over the
outer block and that digest (cheaper, for 96 bytes, than copying a second state): nothing of
the key is recomputed. It is byte-for-byte ``hmac.digest(key, message, "sha256")`` for every
key length, which ``tests/verify/test_keyed_hash.py`` checks against the standard library.
Comparison stays with ``hmac.compare_digest``, in the callers.
"""

from __future__ import annotations

import hashlib

__all__ = ["HmacSha256"]

_sha256 = hashlib.sha256
_BLOCK = 64  # SHA-256's block size in bytes
_INNER_PAD = bytes.maketrans(bytes(range(256)), bytes(x ^ 0x36 for x in range(256)))
_OUTER_PAD = bytes.maketrans(bytes(range(256)), bytes(x ^ 0x5C for x in range(256)))


class HmacSha256:
    """A key ready to MAC many messages. Safe to share between threads: the keyed states are
    only ever copied, never updated."""

    __slots__ = ("_inner", "_outer_block")

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        block = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(block.translate(_INNER_PAD))
        self._outer_block = block.translate(_OUTER_PAD)

    def digest(self, message: bytes) -> bytes:
        """The 32-byte HMAC-SHA256 of ``message``."""
        inner = self._inner.copy()
        inner.update(message)
        return _sha256(self._outer_block + inner.digest()).digest()

    def __repr__(self) -> str:
        return "<HmacSha256 key=<hidden>>"
