"""``payhooks.receiver``'s public names, pinned: growing the face is a decision, not an
accident. The names load on first use (PEP 562); each must resolve."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = (
    "CheckLimits",
    "CheckReport",
    "CheckResult",
    "Console",
    "ConsoleGrant",
    "ConsoleRole",
    "Metrics",
    "PayHooks",
    "PayloadError",
    "ReceiverSettings",
    "ReceiverState",
    "ReturnView",
    "blueprint",
    "config_from_env",
    "load_settings",
    "load_status_map",
    "notification_received",
    "parse_notification",
    "payment_failed",
    "payment_mismatch",
    "payment_succeeded",
    "receiver_state",
    "return_url",
    "run_checks",
    "signals",
)


def test_the_receiver_package_exports_exactly_its_public_names() -> None:
    package = importlib.import_module("payhooks.receiver")

    assert tuple(sorted(package.__all__)) == PUBLIC
    for name in PUBLIC:
        assert getattr(package, name) is not None


@pytest.mark.parametrize(
    ("package", "names"),
    [
        ("payhooks.receiver.web.console", ("Console", "ConsoleGrant", "ConsoleRole")),
        ("payhooks.receiver.web.metrics", ("Metrics",)),
    ],
)
def test_the_console_package_exports_what_the_receiver_re_exports(
    package: str, names: tuple[str, ...]
) -> None:
    console = importlib.import_module(package)
    receiver = importlib.import_module("payhooks.receiver")

    assert tuple(sorted(console.__all__)) == names
    for name in names:
        assert getattr(receiver, name) is getattr(console, name)
