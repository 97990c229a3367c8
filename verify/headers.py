"""Case-insensitive header lookup over any mapping.

HTTP header names are case-insensitive, but callers hand us whatever mapping they have: a
werkzeug ``Headers`` (already case-insensitive), a plain ``dict`` from a test or a captured
file (any case). A name found as given (lower-case) is taken; otherwise the mapping's names
are compared lower-cased.
"""

from __future__ import annotations

from collections.abc import Mapping

from payhooks.verify.errors import MissingSignatureError

__all__ = ["lookup_headers", "required"]


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


def required(value: str | None, name: str) -> str:
    """``value``, the header ``name`` as :func:`lookup_headers` found it; ``missing_signature``
    naming it when it is absent."""
    if value is None:
        raise MissingSignatureError(f"the {name} header is missing", header=name)
    return value
