"""``PAYHOOKS_RETURN_REDIRECT``: the merchant page a returning customer is sent to, checked once.

The setting is a template such as ``"/orders/{external_identifier}?payment={state}"``. It is
checked when the app starts (:func:`check_redirect_template`), so a typo cannot turn every
customer's return into a server error, and it is checked for where it can send people: a path
on this site (``/...``, never ``//...``, which a browser reads as another host) or an absolute
``http``/``https`` URL whose host is fixed text. The values filled in are URL-quoted, ``/``
included, so neither the identifier nor the state can change the host or the path's shape: the
redirect cannot be turned into an open redirect by what the customer's URL carries.

Only ``str.format``'s plain fields are understood here, and only the two names: attribute or
index access (``{state.__class__}``), conversions (``!r``) and format specs (``:>10``) are
refused, because the template is formatted with values that come from the request.
"""

from __future__ import annotations

import re
from string import Formatter
from urllib.parse import quote

__all__ = ["REDIRECT_FIELDS", "check_redirect_template", "check_shop_url", "fill_redirect_template"]

#: The placeholders a redirect template may use.
REDIRECT_FIELDS = frozenset({"external_identifier", "state"})

_KEY = "PAYHOOKS_RETURN_REDIRECT"
_SHOP_KEY = "PAYHOOKS_SHOP_URL"
# Browsers drop tabs and newlines inside URLs and read "\" as "/", so "/\t/evil.example" or
# "/\evil.example" would leave the site: none of them has a place in a redirect template.
_UNSAFE_CHARACTER = re.compile(r"[\x00-\x20\x7f\\]")
_ABSOLUTE = re.compile(r"https?://", re.IGNORECASE)
# The host part of an absolute URL, and whether it is finished (a "/", "?" or "#" follows).
_AUTHORITY = re.compile(r"([^/?#]*)([/?#]?)")


def check_redirect_template(template: object) -> str | None:
    """Check a ``PAYHOOKS_RETURN_REDIRECT`` value; None (or ``""``) means no redirect.

    :raises ValueError: naming ``PAYHOOKS_RETURN_REDIRECT``, for a template that names other
        fields, uses a conversion or format spec, does not parse, or could send the customer
        somewhere other than a page of this site or of the fixed host it names.
    """
    if template is None or template == "":
        return None
    if not isinstance(template, str):
        raise ValueError(f"{_KEY} must be a string, got {type(template).__name__}")
    try:
        parts = list(Formatter().parse(template))
    except ValueError as err:
        raise ValueError(f"{_KEY}: {err} (write a literal brace as {{{{ or }}}})") from err

    prefix: list[str] = []  # the fixed text before the first placeholder
    has_fields = False
    for literal, field, spec, conversion in parts:
        if not has_fields:
            prefix.append(literal)
        if field is None:
            continue
        has_fields = True
        if field not in REDIRECT_FIELDS:
            raise ValueError(
                f"{_KEY}: {{{field}}} is not a placeholder it knows; use only "
                "{external_identifier} and {state}"
            )
        if spec or conversion:
            raise ValueError(
                f"{_KEY}: {{{field}}} takes no conversion or format spec; write it plainly"
            )
    literal_text = "".join(literal for literal, _, _, _ in parts)
    if _UNSAFE_CHARACTER.search(literal_text):
        raise ValueError(f"{_KEY} must not contain spaces, control characters or backslashes")
    _check_destination("".join(prefix), has_fields=has_fields)
    return template


def check_shop_url(url: object) -> str | None:
    """Check ``PAYHOOKS_SHOP_URL``, the link back to the shop: None (or ``""``) for none, else
    a path on this site or an absolute ``http(s)`` URL with a host, as a redirect's must be.

    :raises ValueError: naming ``PAYHOOKS_SHOP_URL``.
    """
    if url is None or url == "":
        return None
    if not isinstance(url, str) or _UNSAFE_CHARACTER.search(url):
        raise ValueError(f"{_SHOP_KEY} must be a URL without spaces or backslashes")
    _check_destination(url, has_fields=False, key=_SHOP_KEY)
    return url


def _check_destination(fixed: str, *, has_fields: bool, key: str = _KEY) -> None:
    """``fixed``, the text before the first placeholder, must pin down where the URL goes."""
    if fixed.startswith("//"):
        raise ValueError(f"{key}: a path must start with a single '/' ('//' names another host)")
    if fixed.startswith("/"):
        return
    scheme = _ABSOLUTE.match(fixed)
    if scheme is None:
        raise ValueError(f"{key} must be a path starting with '/' or an absolute http(s) URL")
    authority = _AUTHORITY.match(fixed, scheme.end())
    assert authority is not None  # the pattern matches the empty string too
    host, ended = authority.groups()
    if not host or "@" in host:
        raise ValueError(f"{key}: an absolute URL needs a host, and no user name in it")
    if has_fields and not ended:
        raise ValueError(
            f"{key}: the host must be fixed text; put placeholders after the '/' that ends it"
        )


def fill_redirect_template(template: str, *, external_identifier: str, state: str) -> str:
    """Fill a template :func:`check_redirect_template` accepted, each value URL-quoted
    (``/`` too, so a value stays inside its path segment or query parameter)."""
    return template.format(
        external_identifier=quote(external_identifier, safe=""),
        state=quote(state, safe=""),
    )
