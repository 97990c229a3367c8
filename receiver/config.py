"""The ``PAYHOOKS_*`` configuration keys: their defaults, and how each is read and checked.

One table serves three readers: :meth:`payhooks.receiver.PayHooks.init_app` (Flask config), the demo
app and the CLI (the process environment). Keeping the names, defaults and parsing rules here means
the three cannot drift apart.

Keys of payhooks' own, beyond the basic webhook settings, with why (every key is in
docs/configuration.md):

- ``PAYHOOKS_SIGNATURE_OPTIONS`` (``{}``): the scheme's options, passed to
  :func:`payhooks.verify.get_verifier` (``hash_algorithm`` for ``sorted-fields-rsa``,
  ``header_name`` and ``encoding`` for ``hmac-sha256``).
- ``PAYHOOKS_BUSY_TIMEOUT_MS`` (5000): how long a write waits for a locked database before the
  receiver answers 503 so the service retries.
- ``PAYHOOKS_SQLITE_SYNCHRONOUS`` (``"FULL"``): SQLite's ``PRAGMA synchronous`` for the
  receiver's connections (:data:`payhooks.storage.SYNCHRONOUS_MODES`). ``FULL`` syncs every commit
  to disk before the answer, so an acknowledged delivery survives a power loss; ``NORMAL`` (opt-in)
  is much cheaper per commit but survives only a crash of the process, not of the machine: the
  last acknowledged deliveries can vanish, and the service will not send them again.
- ``PAYHOOKS_POSTGRES_POOL_SIZE`` (10): on PostgreSQL, the most connections each process's
  receiver pool opens (1 to 1000); a console mounted in the same process has a pool of its own.
- ``PAYHOOKS_HEALTH_MIN_FREE_BYTES`` (64 MiB) and ``PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS`` (100):
  the ``/health`` route reports a SQLite ledger full below that much free space in its folder,
  and locked when the write lock is not free within that time (on PostgreSQL: a connection).
- ``PAYHOOKS_SIGNALS_LEASE_SECONDS`` (300): how long a sender's claim on owed signals holds
  off other senders; a process that dies holding it leaves the signals to the next sender once
  it passes. Longer than any receiver takes.
- ``PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS`` (60), ``PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS`` (14400)
  and ``PAYHOOKS_SIGNALS_MAX_ATTEMPTS`` (14): a signal whose receiver raised is tried again
  after the first delay, doubling up to the longest, with jitter; after that many rounds in all
  (about a day by default) it is parked for a person.
- ``PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS`` (30): how often each serving process looks for
  retries that are due while no delivery arrives; 0 leaves it to deliveries and cron.
- ``PAYHOOKS_RETURN_MAX_AGE`` (7 days, in seconds): how long a URL made by
  :func:`payhooks.receiver.return_url` stays valid.
- ``PAYHOOKS_RETURN_REDIRECT`` (None): a merchant page to send returning customers to with a
  303, as a template with ``{external_identifier}`` and ``{state}``; without it the return
  handler renders ``payhooks/return.html``.
- ``PAYHOOKS_SHOP_URL`` (None): the shop's page that payhooks' own pages for customers link
  back to ("Back to the shop", "Try again" after a failure); without it they have no link.
- ``PAYHOOKS_SERVICE_URL``, ``PAYHOOKS_SERVICE_TOKEN``, ``PAYHOOKS_MERCHANT_ACCOUNT_ID`` (None):
  where ``payhooks sync`` reads the service's transaction list, and as whom.
- ``PAYHOOKS_SYNC_STATUS_MAP``: the list's status strings and the states they mean; the
  interface shows only ``processing``, so the rest is an assumption the merchant can correct.
- ``PAYHOOKS_SYNC_MAX_AGE`` (one day, in seconds): how long an expected payment may be absent
  from the service's list before a complete sync calls it ``missing_at_service``.
- ``PAYHOOKS_DELIVERY_LOG`` (False): one JSON line per request to the notification endpoint on
  the ``payhooks.deliveries`` logger; off by default, for a busy receiver's log grows by a line
  per delivery and many merchants already log requests at their proxy.
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

#: Every key and its default. ``PAYHOOKS_DATABASE`` is None here because its real default,
#: ``payhooks.db`` in the app's instance folder, depends on the app; ``init_app`` fills it in.
CONFIG_DEFAULTS: Mapping[str, Any] = {
    "PAYHOOKS_DATABASE": None,
    "PAYHOOKS_SIGNATURE_SCHEME": "standard-webhooks",
    "PAYHOOKS_SIGNATURE_OPTIONS": {},
    "PAYHOOKS_SECRETS": None,
    "PAYHOOKS_PUBLIC_KEYS": None,
    "PAYHOOKS_TOLERANCE_SECONDS": 300,
    "PAYHOOKS_MAX_BODY_BYTES": 65536,
    "PAYHOOKS_PAYMENT_TIME_ZONE": "UTC",
    "PAYHOOKS_STATUS_MAP": {code: state.value for code, state in DEFAULT_STATUS_MAP.items()},
    "PAYHOOKS_URL_PREFIX": "/payhooks",
    "PAYHOOKS_BUSY_TIMEOUT_MS": 5000,
    "PAYHOOKS_SQLITE_SYNCHRONOUS": "FULL",
    "PAYHOOKS_POSTGRES_POOL_SIZE": DEFAULT_POOL_SIZE,
    "PAYHOOKS_HEALTH_MIN_FREE_BYTES": DEFAULT_MIN_FREE_BYTES,
    "PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS": DEFAULT_HEALTH_LOCK_TIMEOUT_MS,
    "PAYHOOKS_SIGNALS_LEASE_SECONDS": 300,
    "PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS": 60,
    "PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS": 4 * 3600,
    "PAYHOOKS_SIGNALS_MAX_ATTEMPTS": 14,
    "PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS": 30,
    "PAYHOOKS_RETURN_MAX_AGE": 7 * 24 * 3600,
    "PAYHOOKS_RETURN_REDIRECT": None,
    "PAYHOOKS_SHOP_URL": None,
    "PAYHOOKS_SERVICE_URL": None,
    "PAYHOOKS_SERVICE_TOKEN": None,
    "PAYHOOKS_MERCHANT_ACCOUNT_ID": None,
    # payhooks.service.sync.DEFAULT_SYNC_STATUS_MAP, written out: the receiver must load
    # without the service extra (httpx); a test keeps the two equal.
    "PAYHOOKS_SYNC_STATUS_MAP": {
        "processing": "pending",
        "succeeded": "succeeded",
        "failed": "failed",
        "cancelled": "cancelled",
        "refund_pending": "refund_pending",
        "partially_refunded": "partially_refunded",
        "refunded": "refunded",
        "charged_back": "charged_back",
    },
    "PAYHOOKS_SYNC_MAX_AGE": 24 * 3600,
    "PAYHOOKS_DELIVERY_LOG": False,
}

#: The key names, in table order.
CONFIG_KEYS: tuple[str, ...] = tuple(CONFIG_DEFAULTS)

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


#: How each key is read from an environment variable of the same name.
ENV_PARSERS: Mapping[str, Callable[[str], Any]] = {
    "PAYHOOKS_DATABASE": str,
    "PAYHOOKS_SIGNATURE_SCHEME": str,
    "PAYHOOKS_SIGNATURE_OPTIONS": _json_object,
    "PAYHOOKS_SECRETS": split_key_setting,
    "PAYHOOKS_PUBLIC_KEYS": split_key_setting,
    "PAYHOOKS_TOLERANCE_SECONDS": int,
    "PAYHOOKS_MAX_BODY_BYTES": int,
    "PAYHOOKS_PAYMENT_TIME_ZONE": str,
    "PAYHOOKS_STATUS_MAP": _json_object,
    "PAYHOOKS_URL_PREFIX": str,
    "PAYHOOKS_BUSY_TIMEOUT_MS": int,
    "PAYHOOKS_SQLITE_SYNCHRONOUS": str,
    "PAYHOOKS_POSTGRES_POOL_SIZE": int,
    "PAYHOOKS_HEALTH_MIN_FREE_BYTES": int,
    "PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS": int,
    "PAYHOOKS_SIGNALS_LEASE_SECONDS": int,
    "PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS": int,
    "PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS": int,
    "PAYHOOKS_SIGNALS_MAX_ATTEMPTS": int,
    "PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS": int,
    "PAYHOOKS_RETURN_MAX_AGE": int,
    "PAYHOOKS_RETURN_REDIRECT": _optional_text,
    "PAYHOOKS_SHOP_URL": _optional_text,
    "PAYHOOKS_SERVICE_URL": _optional_text,
    "PAYHOOKS_SERVICE_TOKEN": _optional_text,
    "PAYHOOKS_MERCHANT_ACCOUNT_ID": _optional_text,
    "PAYHOOKS_SYNC_STATUS_MAP": _json_object,
    "PAYHOOKS_SYNC_MAX_AGE": int,
    "PAYHOOKS_DELIVERY_LOG": _flag,
}


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
