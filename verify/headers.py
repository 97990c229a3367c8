"""Case-insensitive header lookup over any mapping.

HTTP header names are case-insensitive, but callers hand us whatever mapping they have: a
werkzeug ``Headers`` (already case-insensitive), a plain ``dict`` from a test or a captured
file (any case). The common case, a direct hit on the lower-case name, costs one ``get`` per
header; only a miss builds a lower-cased copy, once per lookup.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["lookup_headers"]


def lookup_headers(headers: Mapping[str, str], names: tuple[str, ...]) -> list[str | None]:
    """Return the value of each of ``names`` (lower-case) in ``headers``, or None.

    An empty value counts as absent: a sender that cannot fill a header has not sent it.
    """
    values: list[str | None] = [headers.get(name) for name in names]
    if None in values:
        lowered = {str(key).lower(): value for key, value in headers.items()}
        values = [
            lowered.get(name) if value is None else value
            for name, value in zip(names, values, strict=True)
        ]
    return [value or None for value in values]
