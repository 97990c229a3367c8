"""Per-app receiver state: what one app's requests need, built from its config once.

:meth:`receiver.PayHooks.init_app` builds a :class:`ReceiverState` and keeps it in the app's
``extensions``; the views find it through :func:`receiver_state`. Nothing here is global, so two
apps in one process never share a verifier or a database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path
from typing import Any

from flask import Flask, current_app

from receiver.config import KEY_CONFIG, config_keys
from receiver.ledgers import LedgerPool
from receiver.payloads import load_status_map, load_time_zone
from receiver.redirects import check_redirect_template
from storage import DEFAULT_STATUS_MAP, SYNCHRONOUS_MODES, Ledger, PaymentState
from verify import SCHEMES, Verifier, get_verifier

__all__ = ["STATE_KEY", "ReceiverState", "build_state", "receiver_state"]

#: Where :meth:`receiver.PayHooks.init_app` keeps the app's :class:`ReceiverState`.
STATE_KEY = "payhooks.state"

# Schemes whose verifier reads a local `timestamp` header in a `time_zone` option.
_DATES_IN_LOCAL_TIME = frozenset({"sorted-fields-rsa"})

@dataclass(frozen=True, slots=True)
class ReceiverState:
    """Everything one app's receiver needs at request time, built from its config once."""

    verifier: Verifier
    ledgers: LedgerPool
    status_map: Mapping[str, PaymentState]
    time_zone: tzinfo
    max_body_bytes: int
    #: ``PAYHOOKS_RETURN_REDIRECT``, checked: a template for the return handler's 303, or None.
    return_redirect: str | None = None

    @property
    def ledger(self) -> Ledger:
        """The calling thread's ledger for this app."""
        return self.ledgers.get()


def receiver_state(app: Flask | None = None) -> ReceiverState:
    """The :class:`ReceiverState` of ``app`` (default: the current app).

    :raises RuntimeError: when :class:`PayHooks` was not initialised on that app.
    """
    target: Flask = current_app._get_current_object() if app is None else app  # type: ignore[attr-defined]
    try:
        state: ReceiverState = target.extensions[STATE_KEY]
    except KeyError:
        raise RuntimeError(
            f"PayHooks is not initialised on app {target.name!r}: call PayHooks(app) "
            "or PayHooks().init_app(app)"
        ) from None
    return state


def build_state(config: Mapping[str, Any]) -> ReceiverState:
    """Check an app's ``PAYHOOKS_*`` config and build its state.

    :raises ValueError: naming the key, for a configuration that cannot work.
    """
    scheme = config["PAYHOOKS_SIGNATURE_SCHEME"]
    if scheme not in SCHEMES:
        raise ValueError(
            f"PAYHOOKS_SIGNATURE_SCHEME {scheme!r} is not a known scheme; "
            f"choose one of: {', '.join(sorted(SCHEMES))}"
        )
    key_config = KEY_CONFIG[SCHEMES[scheme].key_kind]
    try:
        keys = config_keys(config[key_config])
    except TypeError as err:
        raise ValueError(f"{key_config} must be a list of strings or one string: {err}") from err
    if not keys:
        raise ValueError(f"{key_config} is required for the {scheme!r} signature scheme")

    try:
        time_zone = load_time_zone(config["PAYHOOKS_PAYMENT_TIME_ZONE"])
    except ValueError as err:
        raise ValueError(f"PAYHOOKS_PAYMENT_TIME_ZONE: {err}") from err

    options = config["PAYHOOKS_SIGNATURE_OPTIONS"] or {}
    if not isinstance(options, Mapping):
        raise ValueError("PAYHOOKS_SIGNATURE_OPTIONS must be a mapping of option names to values")
    if SCHEMES[scheme].parses_body:
        # The verifier's own parse cap follows the receiver's, so a raised
        # PAYHOOKS_MAX_BODY_BYTES is not refused later as an invalid signature.
        max_body = _positive_int(config, "PAYHOOKS_MAX_BODY_BYTES")
        options = {"max_body_bytes": max_body, **options}
    payment_zone = config["PAYHOOKS_PAYMENT_TIME_ZONE"]
    if scheme in _DATES_IN_LOCAL_TIME and isinstance(payment_zone, str):
        # Without a `timezone` header, the delivery's `timestamp` is read in the zone its
        # `payment_time` is read in, unless the scheme's own option says otherwise.
        options = {"time_zone": payment_zone, **options}
    tolerance = _positive_int(config, "PAYHOOKS_TOLERANCE_SECONDS")
    try:
        verifier = get_verifier(scheme, keys, tolerance_seconds=tolerance, **options)
    except ValueError as err:
        raise ValueError(f"{key_config} or PAYHOOKS_SIGNATURE_OPTIONS: {err}") from err

    try:
        status_map = load_status_map(config["PAYHOOKS_STATUS_MAP"])
    except ValueError as err:
        raise ValueError(f"PAYHOOKS_STATUS_MAP: {err}") from err
    if status_map == DEFAULT_STATUS_MAP:
        # The parser recognises the default by identity and skips checking it again on
        # every delivery.
        status_map = DEFAULT_STATUS_MAP

    prefix = config["PAYHOOKS_URL_PREFIX"]
    if not isinstance(prefix, str) or (prefix and not prefix.startswith("/")):
        raise ValueError("PAYHOOKS_URL_PREFIX must be a path starting with '/'")
    _positive_int(config, "PAYHOOKS_RETURN_MAX_AGE")
    return_redirect = check_redirect_template(config["PAYHOOKS_RETURN_REDIRECT"])

    return ReceiverState(
        verifier=verifier,
        ledgers=LedgerPool(
            Path(config["PAYHOOKS_DATABASE"]),
            busy_timeout_ms=_positive_int(config, "PAYHOOKS_BUSY_TIMEOUT_MS"),
            synchronous=_synchronous(config),
        ),
        status_map=status_map,
        time_zone=time_zone,
        max_body_bytes=_positive_int(config, "PAYHOOKS_MAX_BODY_BYTES"),
        return_redirect=return_redirect,
    )


def _synchronous(config: Mapping[str, Any]) -> str:
    value = config["PAYHOOKS_SQLITE_SYNCHRONOUS"]
    mode = value.strip().upper() if isinstance(value, str) else None
    if mode not in SYNCHRONOUS_MODES:
        raise ValueError(
            f"PAYHOOKS_SQLITE_SYNCHRONOUS must be one of {', '.join(SYNCHRONOUS_MODES)}, "
            f"got {value!r}"
        )
    return mode


def _positive_int(config: Mapping[str, Any], key: str) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
    return value
