"""Reading a captured delivery's headers for ``payhooks verify``.

Two shapes are accepted, because that is how headers get captured: a JSON object of names to
values (a log line, a test fixture), or ``Name: value`` lines as ``curl -D`` and
``payhooks sign`` write them. In the lines form, HTTP status lines (``HTTP/1.1 200 OK``) and
blank lines are skipped, so a ``curl -D`` dump can be used as is.
"""

from __future__ import annotations

import json

__all__ = ["HeadersFileError", "read_headers"]


class HeadersFileError(ValueError):
    """The text is neither a JSON object of strings nor ``Name: value`` lines.

    ``code`` is ``invalid_headers``; ``message`` names the line at fault.
    """

    code = "invalid_headers"

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def read_headers(text: str) -> dict[str, str]:
    """The headers in ``text``, names lower-cased (lookups are case-insensitive anyway).

    :raises HeadersFileError: naming the first line that is not a header.
    """
    stripped = text.lstrip("\ufeff").strip()
    if stripped.startswith("{"):
        return _from_json(stripped)
    headers: dict[str, str] = {}
    for number, raw in enumerate(stripped.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("HTTP/"):
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or " " in name.strip():
            raise HeadersFileError(
                f"line {number} is not a 'Name: value' header (nor is the file a JSON object)."
            )
        headers[name.strip().lower()] = value.strip()
    if not headers:
        raise HeadersFileError("The headers file holds no header.")
    return headers


def _from_json(text: str) -> dict[str, str]:
    try:
        document = json.loads(text)
    except ValueError as err:
        raise HeadersFileError(f"The headers file is not valid JSON: {err}.") from err
    except RecursionError as err:
        # Nesting deeper than the interpreter's stack: no headers file looks like that.
        raise HeadersFileError(
            "The headers file nests too deeply; it must be a JSON object of names to strings."
        ) from err
    if not isinstance(document, dict) or not all(
        isinstance(value, str) for value in document.values()
    ):
        raise HeadersFileError("The headers file must be a JSON object of names to string values.")
    return {str(name).lower(): value for name, value in document.items()}
