"""The sandbox's settings fail at construction, naming the argument."""

from __future__ import annotations

from typing import Any

import pytest

from payhooks.service.sandbox import SandboxSettings
from payhooks.verify import generate_keypair, get_verifier


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"merchant_account_ids": ()}, "merchant_account_ids"),
        ({"merchant_account_ids": "shop"}, "merchant_account_ids"),
        ({"scheme": "md5"}, "scheme"),
        ({"scheme": "standard-webhooks-ed25519", "signing_key": "whsk_x"}, "signing_key"),
        ({"notification_url": "/relative"}, "notification_url"),
        ({"status_codes": {"pay": "PS"}}, "status_codes"),
        ({"notify_attempts": 0}, "notify_attempts"),
        ({"notify_backoff": -1}, "notify_backoff"),
        ({"page_default_limit": 200}, "page_default_limit"),
        ({"wallets": frozenset({"stripe"})}, "wallets"),
        ({"control_token": "short"}, "control_token"),
        ({"control_token": "a control token with spaces"}, "control_token"),
        ({"control_token": "caf\u00e9-caf\u00e9-caf\u00e9-caf\u00e9"}, "control_token"),
    ],
)
def test_a_bad_setting_is_a_value_error_naming_it(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        SandboxSettings(**settings)


@pytest.mark.parametrize("scheme", ["standard-webhooks", "sorted-fields-rsa"])
def test_keys_are_generated_for_the_scheme_when_not_given(scheme: str) -> None:
    settings = SandboxSettings(scheme=scheme)
    assert settings.signing_key
    get_verifier(scheme, settings.verifying_key)  # a key the receiver can be configured with
    assert settings.token_secret
    assert settings.signing_key not in repr(settings)


def test_a_given_signing_key_is_kept() -> None:
    pair = generate_keypair("hmac-sha256")
    settings = SandboxSettings(scheme="hmac-sha256", signing_key=pair.signing_key)
    assert settings.signing_key == pair.signing_key
