"""The ``PAYHOOKS_*`` settings, read and checked in one place for every entry point.

:func:`load_settings` turns a mapping (an app's config, or the environment read by
:func:`~payhooks.receiver.config.config_from_env` over the defaults) into a frozen
:class:`ReceiverSettings`. The extension, the CLI and the demo all call it, so a value is
accepted or refused the same way, with the same message, wherever it is set. A bad value raises
:class:`ValueError` naming its key, and never echoes a secret.

No Flask here: the settings are plain values, and :mod:`payhooks.receiver.state` builds an
app's request-time state from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta, tzinfo
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo

from payhooks.receiver.config import CONFIG_DEFAULTS, KEY_CONFIG, config_keys
from payhooks.receiver.payloads import load_status_map, load_time_zone
from payhooks.receiver.redirects import check_redirect_template, check_shop_url
from payhooks.receiver.signal_retries import SignalRetries
from payhooks.storage import (
    DEFAULT_HEALTH_LOCK_TIMEOUT_MS,
    DEFAULT_MIN_FREE_BYTES,
    DEFAULT_POOL_SIZE,
    DEFAULT_STATUS_MAP,
    MAX_POOL_SIZE,
    SYNCHRONOUS_MODES,
    PaymentState,
)
from payhooks.verify import SCHEMES, Verifier, get_verifier

__all__ = ["STORED_HEADERS", "ReceiverSettings", "load_settings"]

#: Headers kept with every delivery besides the ones the scheme reads: enough to reprocess
#: (``timezone`` dates ``payment_time``) and to tell senders apart, and nothing that could
#: carry a credential. Here, below the receiver's view and the CLI, because both need it:
#: the view stores them, ``payhooks restore-pruned`` puts back no other.
STORED_HEADERS: tuple[str, ...] = ("content-type", "user-agent", "timezone")

# Schemes whose verifier reads a local `timestamp` header in a `time_zone` option.
_DATES_IN_LOCAL_TIME = frozenset({"sorted-fields-rsa"})


@dataclass(frozen=True, slots=True)
class ReceiverSettings:
    """Every ``PAYHOOKS_*`` setting, checked. Built by :func:`load_settings` only."""

    #: ``PAYHOOKS_DATABASE`` as given (None: the caller picks its default).
    database: str | None
    #: ``PAYHOOKS_SIGNATURE_SCHEME``.
    scheme: str
    #: The config key that holds the scheme's keys (``PAYHOOKS_SECRETS`` or
    #: ``PAYHOOKS_PUBLIC_KEYS``).
    key_config: str
    #: The scheme's keys (empty only when they were not required).
    keys: tuple[str, ...]
    #: The verifier's options: ``PAYHOOKS_SIGNATURE_OPTIONS`` with what the receiver derives
    #: (the sorted-fields parse cap from ``PAYHOOKS_MAX_BODY_BYTES``, the RSA ``time_zone``).
    signature_options: Mapping[str, Any]
    tolerance_seconds: int
    max_body_bytes: int
    #: ``PAYHOOKS_PAYMENT_TIME_ZONE``, loaded.
    time_zone: tzinfo
    #: The name or offset ``PAYHOOKS_PAYMENT_TIME_ZONE`` was given as.
    time_zone_name: str
    status_map: Mapping[str, PaymentState]
    url_prefix: str
    busy_timeout_ms: int
    synchronous: str
    return_max_age: int
    #: ``PAYHOOKS_RETURN_REDIRECT``, checked: a template for the return handler's 303, or None.
    return_redirect: str | None
    #: ``PAYHOOKS_SHOP_URL``, checked: where the customer's pages link back to, or None.
    shop_url: str | None = None
    #: ``PAYHOOKS_POSTGRES_POOL_SIZE``: the receiver's pool per process on PostgreSQL.
    postgres_pool_size: int = DEFAULT_POOL_SIZE
    #: Where and as whom ``payhooks sync`` lists the service's transactions (None: not set).
    service_url: str | None = None
    service_token: str | None = field(default=None, repr=False)
    merchant_account_id: str | None = None
    #: ``PAYHOOKS_SYNC_STATUS_MAP``, checked: the list's status strings and their states.
    sync_status_map: Mapping[str, PaymentState] = field(default_factory=dict)
    #: ``PAYHOOKS_SYNC_MAX_AGE`` in seconds.
    sync_max_age: int = 24 * 3600
    #: ``PAYHOOKS_SIGNALS_LEASE_SECONDS``: how long a claim on owed signals lasts.
    signals_lease_seconds: int = 300
    #: ``PAYHOOKS_SIGNALS_RETRY_*`` and ``PAYHOOKS_SIGNALS_MAX_ATTEMPTS``: a raising receiver's
    #: backoff.
    signal_retries: SignalRetries = field(default_factory=SignalRetries)
    #: ``PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS``: each serving process's look for due retries.
    signals_retry_poll_seconds: int = 30
    #: ``PAYHOOKS_DELIVERY_LOG``: one JSON line per delivery on ``payhooks.deliveries``.
    delivery_log: bool = False
    #: ``PAYHOOKS_HEALTH_MIN_FREE_BYTES``: below this, ``/health`` reports the disk full.
    health_min_free_bytes: int = DEFAULT_MIN_FREE_BYTES
    #: ``PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS``: how long ``/health`` waits for the write lock.
    health_lock_timeout_ms: int = DEFAULT_HEALTH_LOCK_TIMEOUT_MS
    #: ``PAYHOOKS_TIMEZONE``: the merchant's zone, where finance's days start (the console's
    #: periods and chart, ``payhooks reconcile``'s times without an offset). Not
    #: :attr:`time_zone`, which is the zone a notification's ``payment_time`` is written in.
    timezone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    #: The verifier built from the keys while checking them (None when there were none).
    verifier: Verifier | None = field(default=None, compare=False, repr=False)

    def verifier_with(self, keys: tuple[str, ...], *, tolerance_seconds: float | None) -> Verifier:
        """A verifier for this scheme and its options with other keys or tolerance (the CLI's
        ``--secret`` and ``--ignore-timestamp``).

        :raises ValueError: naming the key or option that cannot be used.
        """
        return _verifier(
            self.scheme,
            self.key_config,
            keys,
            self.signature_options,
            tolerance_seconds,
        )


def load_settings(config: Mapping[str, Any], *, require_keys: bool = True) -> ReceiverSettings:
    """Check every ``PAYHOOKS_*`` key of ``config`` (missing keys take their defaults).

    :param require_keys: a receiver cannot work without keys; the ledger commands can.
    :raises ValueError: naming the key, for a value that cannot work.
    """
    merged: Mapping[str, Any] = {**CONFIG_DEFAULTS, **config}
    scheme = merged["PAYHOOKS_SIGNATURE_SCHEME"]
    if scheme not in SCHEMES:
        raise ValueError(
            f"PAYHOOKS_SIGNATURE_SCHEME {scheme!r} is not a known scheme; "
            f"choose one of: {', '.join(sorted(SCHEMES))}"
        )
    key_config = KEY_CONFIG[SCHEMES[scheme].key_kind]
    try:
        keys = config_keys(merged[key_config])
    except TypeError as err:
        raise ValueError(f"{key_config} must be a list of strings or one string: {err}") from err
    if require_keys and not keys:
        raise ValueError(f"{key_config} is required for the {scheme!r} signature scheme")

    zone_name = merged["PAYHOOKS_PAYMENT_TIME_ZONE"]
    try:
        time_zone = load_time_zone(zone_name)
    except ValueError as err:
        raise ValueError(f"PAYHOOKS_PAYMENT_TIME_ZONE: {err}") from err

    options = merged["PAYHOOKS_SIGNATURE_OPTIONS"] or {}
    if not isinstance(options, Mapping):
        raise ValueError("PAYHOOKS_SIGNATURE_OPTIONS must be a mapping of option names to values")
    max_body = _positive_int(merged, "PAYHOOKS_MAX_BODY_BYTES")
    if SCHEMES[scheme].parses_body:
        # The verifier's own parse cap follows the receiver's, so a raised
        # PAYHOOKS_MAX_BODY_BYTES is not refused later as an invalid signature.
        options = {"max_body_bytes": max_body, **options}
    if scheme in _DATES_IN_LOCAL_TIME and isinstance(zone_name, str):
        # Without a `timezone` header, the delivery's `timestamp` is read in the zone its
        # `payment_time` is read in, unless the scheme's own option says otherwise.
        options = {"time_zone": zone_name, **options}
    options = MappingProxyType(dict(options))
    tolerance = _positive_int(merged, "PAYHOOKS_TOLERANCE_SECONDS")
    verifier = _verifier(scheme, key_config, keys, options, tolerance) if keys else None

    try:
        status_map = load_status_map(merged["PAYHOOKS_STATUS_MAP"])
    except ValueError as err:
        raise ValueError(f"PAYHOOKS_STATUS_MAP: {err}") from err
    if status_map == DEFAULT_STATUS_MAP:
        # The parser recognises the default by identity and skips checking it again on
        # every delivery.
        status_map = DEFAULT_STATUS_MAP

    prefix = merged["PAYHOOKS_URL_PREFIX"]
    if not isinstance(prefix, str) or (prefix and not prefix.startswith("/")):
        raise ValueError("PAYHOOKS_URL_PREFIX must be a path starting with '/'")
    database = merged["PAYHOOKS_DATABASE"]
    if (
        database is not None
        and not isinstance(database, str | bytes)
        and not hasattr(database, "__fspath__")
    ):
        raise ValueError("PAYHOOKS_DATABASE must be a path or a postgresql:// URL")

    return ReceiverSettings(
        database=None if database is None else str(database),
        scheme=scheme,
        key_config=key_config,
        keys=keys,
        signature_options=options,
        tolerance_seconds=tolerance,
        max_body_bytes=max_body,
        time_zone=time_zone,
        time_zone_name=str(zone_name),
        status_map=status_map,
        url_prefix=prefix,
        busy_timeout_ms=_positive_int(merged, "PAYHOOKS_BUSY_TIMEOUT_MS"),
        synchronous=_synchronous(merged),
        postgres_pool_size=_pool_size(merged),
        return_max_age=_positive_int(merged, "PAYHOOKS_RETURN_MAX_AGE"),
        return_redirect=check_redirect_template(merged["PAYHOOKS_RETURN_REDIRECT"]),
        shop_url=check_shop_url(merged["PAYHOOKS_SHOP_URL"]),
        service_url=_optional_string(merged, "PAYHOOKS_SERVICE_URL"),
        service_token=_optional_string(merged, "PAYHOOKS_SERVICE_TOKEN"),
        merchant_account_id=_optional_string(merged, "PAYHOOKS_MERCHANT_ACCOUNT_ID"),
        sync_status_map=_sync_status_map(merged["PAYHOOKS_SYNC_STATUS_MAP"]),
        sync_max_age=_positive_int(merged, "PAYHOOKS_SYNC_MAX_AGE"),
        signals_lease_seconds=_lease(merged),
        signal_retries=_signal_retries(merged),
        signals_retry_poll_seconds=_non_negative_int(merged, "PAYHOOKS_SIGNALS_RETRY_POLL_SECONDS"),
        delivery_log=_flag(merged, "PAYHOOKS_DELIVERY_LOG"),
        health_min_free_bytes=_non_negative_int(merged, "PAYHOOKS_HEALTH_MIN_FREE_BYTES"),
        health_lock_timeout_ms=_health_lock_timeout(merged),
        timezone=_timezone(merged),
        verifier=verifier,
    )


def _optional_string(config: Mapping[str, Any], key: str) -> str | None:
    value = config[key]
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value or None


def _sync_status_map(value: Any) -> Mapping[str, PaymentState]:
    """The list's status strings to states; ``unknown`` is what a missing string becomes, so
    no string may be mapped to it (the same rule as :func:`payhooks.service.sync.check_status_map`,
    which the receiver cannot import without the service extra)."""
    if not isinstance(value, Mapping) or not value:
        raise ValueError(
            "PAYHOOKS_SYNC_STATUS_MAP must be a non-empty mapping of strings to states"
        )
    checked: dict[str, PaymentState] = {}
    for status, state in value.items():
        known = isinstance(state, str) and state in set(PaymentState) - {PaymentState.UNKNOWN}
        if not isinstance(status, str) or not status or not known:
            raise ValueError(
                f"PAYHOOKS_SYNC_STATUS_MAP: {status!r} must map to a payhooks state other than "
                f"unknown, not {state!r}"
            )
        checked[status] = PaymentState(state)
    return MappingProxyType(checked)


def _verifier(
    scheme: str,
    key_config: str,
    keys: tuple[str, ...],
    options: Mapping[str, Any],
    tolerance_seconds: float | None,
) -> Verifier:
    """Build a verifier, blaming the setting that is really at fault: a key, or an option."""
    try:
        return get_verifier(scheme, keys, tolerance_seconds=tolerance_seconds, **options)
    except ValueError as err:
        # get_verifier names what it refused: `keys[...]` / `keys:` for a key, else an option.
        culprit = key_config if str(err).startswith("keys") else "PAYHOOKS_SIGNATURE_OPTIONS"
        raise ValueError(f"{culprit}: {err}") from err


def _synchronous(config: Mapping[str, Any]) -> str:
    value = config["PAYHOOKS_SQLITE_SYNCHRONOUS"]
    mode = value.strip().upper() if isinstance(value, str) else None
    if mode not in SYNCHRONOUS_MODES:
        raise ValueError(
            f"PAYHOOKS_SQLITE_SYNCHRONOUS must be one of {', '.join(SYNCHRONOUS_MODES)}, "
            f"got {value!r}"
        )
    return mode


#: The longest ``PAYHOOKS_SIGNALS_LEASE_SECONDS``: a day. Signals a dead sender held wait this
#: long for the next one.
MAX_LEASE_SECONDS = 86_400


def _lease(config: Mapping[str, Any]) -> int:
    key = "PAYHOOKS_SIGNALS_LEASE_SECONDS"
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LEASE_SECONDS:
        raise ValueError(f"{key} must be an integer from 1 to {MAX_LEASE_SECONDS}, got {value!r}")
    return value


def _signal_retries(config: Mapping[str, Any]) -> SignalRetries:
    first = _positive_int(config, "PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS")
    longest = _positive_int(config, "PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS")
    if longest < first:
        raise ValueError(
            "PAYHOOKS_SIGNALS_RETRY_MAX_SECONDS must be at least "
            f"PAYHOOKS_SIGNALS_RETRY_FIRST_SECONDS ({first}), got {longest}"
        )
    return SignalRetries(
        first=timedelta(seconds=first),
        longest=timedelta(seconds=longest),
        attempts=_positive_int(config, "PAYHOOKS_SIGNALS_MAX_ATTEMPTS"),
    )


def _flag(config: Mapping[str, Any], key: str) -> bool:
    value = config[key]
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be True or False, got {value!r}")
    return value


def _positive_int(config: Mapping[str, Any], key: str) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
    return value


def _pool_size(config: Mapping[str, Any]) -> int:
    """From 1 to 1000 connections: each one is a server process on PostgreSQL's side."""
    value = config["PAYHOOKS_POSTGRES_POOL_SIZE"]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_POOL_SIZE:
        raise ValueError(
            f"PAYHOOKS_POSTGRES_POOL_SIZE must be an integer from 1 to {MAX_POOL_SIZE}, "
            f"got {value!r}"
        )
    return value


def _non_negative_int(config: Mapping[str, Any], key: str) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be a whole number of 0 or more, got {value!r}")
    return value


def _health_lock_timeout(config: Mapping[str, Any]) -> int:
    """From 1 ms to 5 s: the lock probe holds up the receiver's writes for as long as it waits,
    and a load balancer's check gives up after a few seconds anyway."""
    value = _positive_int(config, "PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS")
    if value > 5000:
        raise ValueError(f"PAYHOOKS_HEALTH_LOCK_TIMEOUT_MS must be at most 5000, got {value!r}")
    return value


def _timezone(config: Mapping[str, Any]) -> ZoneInfo:
    """An IANA name (``Europe/Berlin``) or a :class:`~zoneinfo.ZoneInfo`. A fixed offset is
    refused: a merchant's day follows their zone's summer time, which an offset cannot."""
    value = config["PAYHOOKS_TIMEZONE"]
    if isinstance(value, ZoneInfo):
        return value
    try:
        if not isinstance(value, str):
            raise TypeError(value)
        return ZoneInfo(value)
    except (TypeError, ValueError, KeyError, OSError):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ValueError(
            f"PAYHOOKS_TIMEZONE must be an IANA time zone name such as 'Europe/Berlin', got {shown}"
        ) from None
