"""``flask payhooks sync`` in a merchant's app, against the sandbox over HTTP: its settings, its
exit codes, the ``sync_drift`` signal; and ``payhooks sandbox resend`` after it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from flask import Flask

from bench.hostile_service import HostileService
from payhooks.receiver import PayHooks, signals
from payhooks.receiver.cli.sync import sync as sync_command
from payhooks.receiver.config import CONFIG_DEFAULTS
from payhooks.receiver.durations import parse_duration
from payhooks.receiver.script import payhooks as console_script
from payhooks.service.sandbox import NotificationState, SandboxServer, SandboxSettings
from payhooks.service.sync import (
    DEFAULT_MAX_DURATION,
    DEFAULT_MAX_PAGES,
    DEFAULT_SYNC_STATUS_MAP,
)
from payhooks.storage import DriftKind, Ledger, ReconciliationState
from tests.support.cli import clean_env
from tests.support.service import MERCHANT, card_transaction, wire

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    """Every notification is dropped (logged, never sent): each payment's is missed."""
    settings = SandboxSettings(
        notification_url="http://127.0.0.1:9/payhooks/notifications",
        drop_notifications=True,
        notify_attempts=1,
    )
    with SandboxServer.start(settings) as server:
        yield server


@pytest.fixture
def app(tmp_path: Path, sandbox: SandboxServer) -> Flask:
    app = Flask("merchant", instance_path=str(tmp_path / "instance"))
    app.config.update(
        PAYHOOKS_DATABASE=str(tmp_path / "merchant.db"),
        PAYHOOKS_SECRETS=["whsec_" + "A" * 43 + "="],
        SECRET_KEY="k",
        PAYHOOKS_SERVICE_URL=sandbox.url,
        PAYHOOKS_SERVICE_TOKEN=sandbox.issue_token(),
        PAYHOOKS_MERCHANT_ACCOUNT_ID=MERCHANT,
    )
    PayHooks(app)
    with Ledger(app.config["PAYHOOKS_DATABASE"]) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
    return app


def paid_at_the_sandbox(sandbox: SandboxServer, reference: str = "order-1") -> str:
    created = sandbox.sandbox.create_transaction(MERCHANT, wire(card_transaction(reference)))
    return str(created["id"])


def test_drift_is_printed_and_sent_as_a_signal_with_its_counts(
    app: Flask, sandbox: SandboxServer
) -> None:
    transaction_id = paid_at_the_sandbox(sandbox)
    received: list[dict[str, Any]] = []

    def alert(sender: Flask, **kwargs: Any) -> None:
        assert sender is app
        received.append(kwargs)

    with signals.sync_drift.connected_to(alert, sender=app):
        result = app.test_cli_runner().invoke(args=["payhooks", "sync"])

    assert result.exit_code == 0, result.output
    assert f"missed_notification  order-1  {transaction_id}  service=succeeded" in result.output
    assert "Drift: missed_notification 1." in result.output
    (sent,) = received
    assert sent["drift"] == {DriftKind.MISSED_NOTIFICATION: 1}
    assert sent["report"].items == 1


def test_an_agreeing_list_sends_nothing_and_fail_on_drift_exits_1_only_on_drift(
    app: Flask, sandbox: SandboxServer
) -> None:
    received: list[object] = []
    with signals.sync_drift.connected_to(lambda sender, **kw: received.append(kw), sender=app):
        clean = app.test_cli_runner().invoke(args=["payhooks", "sync", "--fail-on-drift"])
    assert clean.exit_code == 0, clean.output
    assert "No drift" in clean.output
    assert received == []
    paid_at_the_sandbox(sandbox)
    drifted = app.test_cli_runner().invoke(args=["payhooks", "sync", "--fail-on-drift"])
    assert drifted.exit_code == 1
    assert "differ (1 row(s))" in drifted.output


def test_the_sandbox_resends_what_the_sync_found_missed_when_asked(
    app: Flask, sandbox: SandboxServer
) -> None:
    paid_at_the_sandbox(sandbox)
    synced = app.test_cli_runner().invoke(args=["payhooks", "sync"])
    assert synced.exit_code == 0, synced.output
    assert len(sandbox.notifications()) == 1  # the production sync asks the sandbox nothing
    result = CliRunner().invoke(
        console_script,
        ["sandbox", "resend", "--database", app.config["PAYHOOKS_DATABASE"]],
        env={"PAYHOOKS_SERVICE_URL": sandbox.url},
    )
    assert result.exit_code == 0, result.output
    assert result.output == "Asked the sandbox to resend 1 notification(s).\n"
    dropped, resent = sandbox.notifications()
    assert dropped.state is NotificationState.DROPPED
    assert resent.resend_of == dropped.id


def test_the_production_sync_has_no_sandbox_option(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["payhooks", "sync", "--resend-sandbox"])
    assert result.exit_code == 2
    assert "No such option '--resend-sandbox'" in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "payhooks sandbox resend needs --sandbox-url or PAYHOOKS_SERVICE_URL."),
        (["--sandbox-url", "http://127.0.0.1:9", "--database", "missing.db"], "no ledger at"),
    ],
)
def test_the_sandbox_resend_without_its_sandbox_or_ledger_is_bad_usage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arguments: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(console_script, ["sandbox", "resend", *arguments], env={})
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("config", "arguments", "message"),
    [
        ({"PAYHOOKS_SERVICE_URL": None}, [], "needs --service-url or PAYHOOKS_SERVICE_URL"),
        ({"PAYHOOKS_SERVICE_TOKEN": None}, [], "needs --token or PAYHOOKS_SERVICE_TOKEN"),
        ({}, ["--token", "two words"], "cannot use its settings"),
        ({"PAYHOOKS_SYNC_MAX_AGE": 0}, [], "PAYHOOKS_SYNC_MAX_AGE must be a positive integer"),
        ({"PAYHOOKS_SYNC_STATUS_MAP": {"x": "paid"}}, [], "PAYHOOKS_SYNC_STATUS_MAP: 'x'"),
    ],
)
def test_bad_settings_are_one_sentence_and_a_stable_exit(
    app: Flask, config: dict[str, Any], arguments: list[str], message: str
) -> None:
    app.config.update(config)
    result = app.test_cli_runner().invoke(args=["payhooks", "sync", *arguments])
    assert result.exit_code in (1, 2)
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_service_that_fails_part_way_is_exit_1_and_the_next_sync_resumes(
    app: Flask, sandbox: SandboxServer
) -> None:
    for n in range(3):
        paid_at_the_sandbox(sandbox, f"order-x{n}")
    sandbox.sandbox.lose_next_answers(3)  # every try of the client's default policy
    failed = app.test_cli_runner().invoke(args=["payhooks", "sync", "--limit", "1"])
    assert failed.exit_code == 1
    assert "the next sync resumes there" in failed.output
    again = app.test_cli_runner().invoke(args=["payhooks", "sync", "--limit", "1"])
    assert again.exit_code == 0, again.output
    with Ledger(app.config["PAYHOOKS_DATABASE"]) as ledger:
        assert ledger.state("order-x0") is ReconciliationState.UNEXPECTED


def test_summary_prints_the_drift_counts_without_a_line_each(
    app: Flask, sandbox: SandboxServer
) -> None:
    transaction_id = paid_at_the_sandbox(sandbox)
    result = app.test_cli_runner().invoke(args=["payhooks", "sync", "--summary"])
    assert result.exit_code == 0, result.output
    assert transaction_id not in result.output
    assert result.output.splitlines()[-1] == "Drift: missed_notification 1."


@pytest.mark.parametrize(
    ("behaviour", "says"),
    [
        ("deep", "nests too deeply to read"),
        ("huge-cursor", "page.next_cursor is not 1 to 4096 printable characters"),
    ],
)
def test_a_refused_answer_is_one_sentence_that_says_resuming_needs_restart(
    app: Flask, behaviour: str, says: str
) -> None:
    with HostileService(behaviour) as hostile:
        for _ in range(2):  # the refused cursor was not saved: the second run fails alike
            result = app.test_cli_runner().invoke(
                args=["payhooks", "sync", "--service-url", hostile.url]
            )
            assert result.exit_code == 1
            assert says in result.output
            assert "--restart starts from the first page." in result.output
            assert "Traceback" not in result.output
            assert len(result.output.strip().splitlines()) == 1


def test_max_pages_stops_a_run_that_the_next_one_resumes(app: Flask) -> None:
    with HostileService("endless") as hostile:
        url = ["--service-url", hostile.url, "--max-pages", "2"]
        first = app.test_cli_runner().invoke(args=["payhooks", "sync", *url])
        second = app.test_cli_runner().invoke(args=["payhooks", "sync", *url])
    assert first.exit_code == second.exit_code == 1
    assert "(this run read 2 page(s), its most)" in first.output
    assert "the next sync resumes there." in first.output
    with Ledger(app.config["PAYHOOKS_DATABASE"]) as ledger:
        run = ledger.service.last_sync()
    assert run is not None
    assert (run.pages, run.next_cursor) == (4, "page-4")


def test_max_duration_stops_a_run_that_the_next_one_resumes(app: Flask) -> None:
    with HostileService("endless", pause_seconds=0.2) as hostile:
        url = ["--service-url", hostile.url, "--max-duration", "1s"]
        first = app.test_cli_runner().invoke(args=["payhooks", "sync", *url])
        second = app.test_cli_runner().invoke(args=["payhooks", "sync", *url])
    assert first.exit_code == second.exit_code == 1
    assert re.search(
        r"\(this run read \d+ page\(s\) in 1 s, past its time limit of 1 s\)", first.output
    )
    assert "the next sync resumes there." in first.output
    with Ledger(app.config["PAYHOOKS_DATABASE"]) as ledger:
        run = ledger.service.last_sync()
    assert run is not None
    assert run.next_cursor == f"page-{run.pages}"


@pytest.mark.parametrize("value", ["0s", "soon"])
def test_a_max_duration_that_is_not_one_is_bad_usage(app: Flask, value: str) -> None:
    result = app.test_cli_runner().invoke(args=["payhooks", "sync", "--max-duration", value])
    assert result.exit_code == 2
    assert "--max-duration" in result.output
    assert "Traceback" not in result.output


def test_unknown_statuses_past_the_first_hundred_are_counted_in_one_line(app: Flask) -> None:
    with HostileService("fresh-statuses", fresh_pages=2) as hostile:
        result = app.test_cli_runner().invoke(
            args=["payhooks", "sync", "--service-url", hostile.url, "--summary"]
        )
    assert result.exit_code == 0, result.output
    assert result.output.count("Unknown status string 'made-up-") == 100
    assert (
        "Other unknown status strings: 100 transaction(s) (only the first 100 strings seen "
        "are named)." in result.output
    )


def test_the_commands_bounds_default_to_the_syncs() -> None:
    defaults = {param.name: param.default for param in sync_command.params}
    assert defaults["max_pages"] == DEFAULT_MAX_PAGES
    assert parse_duration(str(defaults["max_duration"])) == DEFAULT_MAX_DURATION


def test_the_receivers_default_map_is_the_syncs() -> None:
    assert CONFIG_DEFAULTS["PAYHOOKS_SYNC_STATUS_MAP"] == {
        k: v.value for k, v in DEFAULT_SYNC_STATUS_MAP.items()
    }
