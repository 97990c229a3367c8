"""``payhooks.receiver``'s public names, pinned: growing the face is a decision, not an
accident. The names load on first use (PEP 562); each must resolve."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = (
    "CheckLimits",
    "CheckReport",
    "CheckResult",
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


def test_the_metrics_package_exports_what_the_receiver_re_exports() -> None:
    metrics = importlib.import_module("payhooks.receiver.web.metrics")
    receiver = importlib.import_module("payhooks.receiver")

    assert tuple(sorted(metrics.__all__)) == ("Metrics",)
    assert receiver.Metrics is metrics.Metrics


def test_the_console_package_exports_its_three_names() -> None:
    """The console is its own package, above the receiver: ``from payhooks.console import
    Console``. The receiver no longer lends it its face."""
    console = importlib.import_module("payhooks.console")
    receiver = importlib.import_module("payhooks.receiver")

    assert tuple(sorted(console.__all__)) == ("Console", "ConsoleGrant", "ConsoleRole")
    for name in console.__all__:
        assert getattr(console, name) is not None
        assert not hasattr(receiver, name)


@pytest.mark.parametrize(
    "module", ["payhooks.receiver.web.console", "payhooks.receiver.standalone"]
)
def test_the_consoles_old_import_paths_are_gone(module: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)
