"""The sandbox's settings, checked once into a frozen object for the Python API and the command.

Each setting that answers a question the interface leaves open ("not shown") says so; the
defaults are payhooks' assumptions, listed in ``docs/service.md``.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from payhooks.service.interface import DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT
from payhooks.verify import DEFAULT_SCHEME, SCHEMES, generate_keypair, get_signer

__all__ = ["DEFAULT_SCOPES", "DEFAULT_STATUS_CODES", "OUTCOMES", "SandboxSettings"]

#: What a person (or a test) may decide on the hosted page: pay, fail or cancel.
OUTCOMES = ("pay", "fail", "cancel")

#: ``payment_status`` per outcome: the service's codes (``PS`` appears in every form; the rest
#: follow the codes the receiver's default status map knows).
DEFAULT_STATUS_CODES: Mapping[str, str] = MappingProxyType(
    {"pay": "PS", "fail": "PF", "cancel": "PC"}
)

#: The scope each endpoint requires. Only ``subscriptions.write`` is the interface's; the
#: scopes of the other endpoints are not shown, so these are assumptions.
DEFAULT_SCOPES: Mapping[str, str] = MappingProxyType(
    {
        "POST /v4/subscriptions": "subscriptions.write",
        "POST /v4/transactions": "transactions.write",
        "GET /v4/transactions": "transactions.read",
        "GET /buyers": "buyers.read",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxSettings:
    """How the sandbox behaves. Every argument has a working default.

    Construction checks every value and raises :class:`ValueError` naming the argument.
    """

    #: Accounts ``x-merchant-account-id`` may name; the first is the default one (buyers
    #: added without an account, lists read without the header).
    merchant_account_ids: tuple[str, ...] = ("sandbox-merchant",)
    #: The HS256 secret access tokens are signed with (how the service issues tokens is not
    #: shown). Generated when empty; :meth:`Sandbox.issue_token` makes tokens.
    token_secret: str = ""
    #: The notification's signature scheme (not shown by the interface): any of the five.
    scheme: str = DEFAULT_SCHEME
    #: The key notifications are signed with; generated for ``scheme`` when empty, and then
    #: ``verifying_key`` is what the merchant's receiver needs.
    signing_key: str = field(default="", repr=False)
    verifying_key: str = field(default="", repr=False)
    signature_options: Mapping[str, Any] = field(default_factory=dict)
    #: Where transaction notifications go. The interface names a notification address only for
    #: subscriptions (``payment_method.webhooks_url``); for transactions payhooks assumes one
    #: address registered with the service beforehand, this one. None: none is sent.
    notification_url: str | None = None
    #: ``payment_method.method`` values of each shape (the interface's placeholders). The
    #: name is also the provider member's prefix (``stripe_payment_intent_id``).
    card_processors: frozenset[str] = frozenset({"stripe"})
    orchestrators: frozenset[str] = frozenset({"adyen"})
    wallets: frozenset[str] = frozenset({"alipay"})
    #: ``payment_channel_code`` values of the wallet channel.
    wallet_channel_codes: frozenset[str] = frozenset({"WALLET"})
    status_codes: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_STATUS_CODES))
    scopes: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SCOPES))
    #: The zone ``payment_time`` is written in (its zone is not shown; the receiver's default
    #: ``PAYHOOKS_PAYMENT_TIME_ZONE`` is UTC too).
    payment_time_zone: str = "UTC"
    #: Tries per notification, and the backoff between them: ``backoff * 2 ** n`` seconds,
    #: at most ``notify_max_backoff`` (the service's retry behaviour is not shown).
    notify_attempts: int = 5
    notify_backoff: float = 1.0
    notify_max_backoff: float = 60.0
    notify_timeout: float = 5.0
    #: Start with notifications dropped on purpose (switch at run time with
    #: :meth:`Sandbox.drop_notifications`).
    drop_notifications: bool = False
    page_default_limit: int = DEFAULT_PAGE_LIMIT
    page_max_limit: int = MAX_PAGE_LIMIT
    #: The Bearer token the control API (``/sandbox/...``) requires; None: the control API
    #: is open, which :meth:`SandboxServer.start` allows on a loopback address only. 16 to 512
    #: printable ASCII characters, no spaces.
    control_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        accounts: object = self.merchant_account_ids
        if isinstance(accounts, str) or not isinstance(accounts, tuple | list | frozenset | set):
            raise ValueError("merchant_account_ids: give a sequence of non-empty account ids")
        if not accounts or not all(isinstance(a, str) and a for a in accounts):
            raise ValueError("merchant_account_ids: give a sequence of non-empty account ids")
        object.__setattr__(self, "merchant_account_ids", tuple(dict.fromkeys(accounts)))
        if self.scheme not in SCHEMES:
            raise ValueError(
                f"scheme: unknown signature scheme {self.scheme!r}; known: {', '.join(SCHEMES)}"
            )
        if not self.token_secret:
            object.__setattr__(self, "token_secret", secrets.token_urlsafe(32))
        if not self.signing_key:
            pair = generate_keypair(self.scheme)
            object.__setattr__(self, "signing_key", pair.signing_key)
            object.__setattr__(self, "verifying_key", pair.verifying_key)
        try:
            get_signer(self.scheme, self.signing_key, **self.signature_options)
        except ValueError as err:
            raise ValueError(f"signing_key or signature_options: {err}") from err
        if self.notification_url is not None:
            parts = urlsplit(self.notification_url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError("notification_url must be an absolute http(s) URL")
        missing = sorted(set(OUTCOMES) - set(self.status_codes))
        if missing:
            raise ValueError(f"status_codes: no code for the outcome {missing[0]!r}")
        for name in ("notify_attempts", "page_default_limit", "page_max_limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("notify_backoff", "notify_max_backoff", "notify_timeout"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        token = self.control_token
        if token is not None and (
            not isinstance(token, str)
            or not 16 <= len(token) <= 512
            or not all("!" <= c <= "~" for c in token)
        ):
            raise ValueError(
                "control_token must be 16 to 512 printable ASCII characters with no spaces"
            )
        if self.page_default_limit > self.page_max_limit:
            raise ValueError("page_default_limit must not exceed page_max_limit")
        methods = [self.card_processors, self.orchestrators, self.wallets]
        names = [name for group in methods for name in group]
        if len(names) != len(set(names)):
            raise ValueError("card_processors, orchestrators and wallets must not share a name")
        object.__setattr__(self, "status_codes", MappingProxyType(dict(self.status_codes)))
        object.__setattr__(self, "scopes", MappingProxyType(dict(self.scopes)))
