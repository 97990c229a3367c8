"""The ``PAYHOOKS_*`` configuration keys: their defaults, and how each is read and checked.

One table serves three readers: :meth:`payhooks.receiver.PayHooks.init_app` (Flask config), the demo
app and the CLI (the process environment). Keeping the names, defaults and parsing rules here means
the three cannot drift apart.

Every key, its default and why it exists is in docs/configuration.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from payhooks.storage import (
    DEFAULT_HEALTH_LOCK_TIMEOUT_MS,
    DEFAULT_MIN_FREE_BYTES,
    DEFAULT_POOL_SIZE,
    DEFAULT_STATUS_MAP,
)

__all__ = [
    "CONFIG_DEFAULTS",
    "CONFIG_KEYS",
    "ENV_PARSERS",
    "KEY_CONFIG",
    "config_from_env",
    "config_keys",
    "split_key_setting",
]

#: Which key holds a scheme's keys, by its :attr:`payhooks.verify.SchemeInfo.key_kind`: shared
#: secrets for the HMAC schemes, public keys for Ed25519 and RSA.
KEY_CONFIG: Mapping[str, str] = MappingProxyType(
    {"secret": "PAYHOOKS_SECRETS", "public_key": "PAYHOOKS_PUBLIC_KEYS"}
)

# A PEM block is one key even though it contains whitespace; everything else in an environment
# variable's value is split on whitespace.
_PEM_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?-----END [A-Z0-9 ]+-----", re.DOTALL)


def config_keys(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """The keys ``PAYHOOKS_SECRETS`` or ``PAYHOOKS_PUBLIC_KEYS`` holds in an app's config.

    A list (or any iterable of strings) is one key per item; one string is one key, spaces and
    all: a shared secret may contain spaces (``"correct horse battery staple"``) and a PEM key
    contains line breaks, so splitting it would turn one secret into several weaker ones. Only
    the environment, which has no lists, separates keys by whitespace
    (:func:`split_key_setting`). Surrounding whitespace is trimmed and blank entries dropped,
    so ``""`` means no keys.

    :raises TypeError: for an item that is not a string.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return (value.strip(),) if value.strip() else ()
    keys: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise TypeError(f"each key must be a string, got {type(item).__name__}")
        if item.strip():
            keys.append(item.strip())
    return tuple(keys)


def split_key_setting(text: str) -> tuple[str, ...]:
    """Read ``PAYHOOKS_SECRETS`` or ``PAYHOOKS_PUBLIC_KEYS`` from an environment variable.

    The environment holds one string, so several keys (while rotating) are separated by
    whitespace; a PEM block stays one key.
    """
    pem_blocks = [match.group(0) for match in _PEM_BLOCK.finditer(text)]
    rest = _PEM_BLOCK.sub(" ", text)
    return (*pem_blocks, *rest.split())


def _json_object(text: str) -> dict[str, Any]:
    loaded = json.loads(text)
    if not isinstance(loaded, dict):
        raise ValueError("expected a JSON object")
    return loaded


def _optional_text(text: str) -> str | None:
    return text or None


_FLAGS: Mapping[str, bool] = {
    **dict.fromkeys(("1", "true", "yes", "on"), True),
    **dict.fromkeys(("", "0", "false", "no", "off"), False),
}


def _flag(text: str) -> bool:
    try:
        return _FLAGS[text.strip().lower()]
    except KeyError:
        raise ValueError("expected one of 1, true, yes, on, 0, false, no, off") from None


# Every key: its default, and how it is read from an environment variable of the same name.
_TABLE: Mapping[str, tuple[Any, Callable[[str], Any]]] = {
    "PAYHOOKS_DATABASE": (None, str),
    "PAYHOOKS_SIGNATURE_SCHEME": ("standard-webhooks", str),
    "PAYHOOKS_SIGNATURE_OPTIONS": ({}, _json_object),
    "PAYHOOKS_SECRETS": (None, split_key_setting),
    "PAYHOOKS_PUBLIC_KEYS": (None, split_key_setting),
    "PAYHOOKS_TOLERANCE_SECONDS": (300, int),
    "PAYHOOKS_MAX_BODY_BYTES": (65536, int),
    "PAYHOOKS_PAYMENT_TIME_ZONE": ("UTC", str),
    "PAYHOOKS_TIMEZONE": ("UTC", str),
    "PAYHOOKS_STATUS_MAP": (
        {code: state.value for code, state in DEFAULT_STATUS_MAP.items()},
        _json_object,
    ),
    "PAYHOOKS_URL_PREFIX": ("/payhooks", str),
    "PAYHOOKS_BUSY_TIMEOUT_MS": (5000, int),
    "PAYHOOKS_SQLITE_SYNCHRONOUS": ("FULL", str),
    "PAYHOOKS_POSTGRES_POOL_SIZE": (DEFAULT_POOL_SIZE, int),
    "PAYHOOKS_HEALTH_MIN_FREE_BYTES": (DEFAULT_MIN_FREE_BYTES, int),
    "PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS": (DEFAULT_HEALTH_LOCK_TIMEOUT_MS, int),
    "PAYHOOKS_SIGNALS_LEASE_SECONDS": (300, int),
    "PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS": (60, int),
    "PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS": (4 * 3600, int),
    "PAYHOOKS_SIGNALS_MAX_ATTEMPTS": (14, int),
    "PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS": (30, int),
    "PAYHOOKS_RETURN_MAX_AGE": (7 * 24 * 3600, int),
    "PAYHOOKS_RETURN_REDIRECT": (None, _optional_text),
    "PAYHOOKS_SHOP_URL": (None, _optional_text),
    "PAYHOOKS_SERVICE_URL": (None, _optional_text),
    "PAYHOOKS_SERVICE_TOKEN": (None, _optional_text),
    "PAYHOOKS_MERCHANT_ACCOUNT_ID": (None, _optional_text),
    # payhooks.service.sync.DEFAULT_SYNC_STATUS_MAP, written out: the receiver must load
    # without the service extra (httpx); a test keeps the two equal.
    "PAYHOOKS_SYNC_STATUS_MAP": (
        {
            "processing": "pending",
            "succeeded": "succeeded",
            "failed": "failed",
            "cancelled": "cancelled",
            "refund_pending": "refund_pending",
            "partially_refunded": "partially_refunded",
            "refunded": "refunded",
            "charged_back": "charged_back",
        },
        _json_object,
    ),
    "PAYHOOKS_SYNC_MAX_AGE": (24 * 3600, int),
    "PAYHOOKS_DELIVERY_LOG": (False, _flag),
}

#: Every key and its default. ``PAYHOOKS_DATABASE`` is None here because its real default,
#: ``payhooks.db`` in the app's instance folder, depends on the app; ``init_app`` fills it in.
CONFIG_DEFAULTS: Mapping[str, Any] = {key: default for key, (default, _) in _TABLE.items()}

#: How each key is read from an environment variable of the same name.
ENV_PARSERS: Mapping[str, Callable[[str], Any]] = {key: parse for key, (_, parse) in _TABLE.items()}

#: The key names, in table order.
CONFIG_KEYS: tuple[str, ...] = tuple(_TABLE)


def config_from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """Read every ``PAYHOOKS_*`` key present in ``environ`` (normally :data:`os.environ`).

    Keys that are absent are left out, so the caller's defaults apply. A value that cannot be
    read raises :class:`ValueError` naming the variable, never echoing a secret's value.
    """
    config: dict[str, Any] = {}
    for key, parse in ENV_PARSERS.items():
        if key not in environ:
            continue
        try:
            config[key] = parse(environ[key])
        except (ValueError, TypeError) as err:
            raise ValueError(f"environment variable {key} cannot be read: {err}") from err
    return config
