"""The same commands as ``flask payhooks ...`` inside a merchant's app: they default to the
app's settings (its database, scheme and keys) rather than the environment's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from flask import Flask

from payhooks.receiver import PayHooks, signals
from payhooks.storage import Ledger, Outcome, ReconciliationState
from payhooks.verify import generate_keypair
from tests.support.cli import clean_env, json_lines, notification

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")

SECRET = generate_keypair("standard-webhooks").signing_key


@pytest.fixture
def app(tmp_path: Path) -> Flask:
    app = Flask("merchant", instance_path=str(tmp_path / "instance"))
    app.config.update(
        PAYHOOKS_DATABASE=str(tmp_path / "merchant.db"), PAYHOOKS_SECRETS=[SECRET], SECRET_KEY="k"
    )
    PayHooks(app)
    return app


def test_ledger_commands_use_the_apps_database(app: Flask, clean_env: Path) -> None:
    runner = app.test_cli_runner()

    registered = runner.invoke(args=["payhooks", "expect", "order-1", "2500", "CNY"])
    report = runner.invoke(args=["payhooks", "reconcile", "--format", "json"])

    assert registered.exit_code == 0, registered.output
    assert [row["external_identifier"] for row in json_lines(report.stdout)] == ["order-1"]
    assert not (clean_env / "payhooks.db").exists()
    with Ledger(app.config["PAYHOOKS_DATABASE"]) as ledger:
        assert ledger.state("order-1") is ReconciliationState.PENDING


def test_the_apps_settings_win_over_the_environment(
    app: Flask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYHOOKS_DATABASE", str(tmp_path / "env.db"))

    app.test_cli_runner().invoke(args=["payhooks", "expect", "order-1", "2500", "CNY"])

    assert not (tmp_path / "env.db").exists()
    assert Path(app.config["PAYHOOKS_DATABASE"]).exists()


def test_sign_and_verify_use_the_apps_keys(app: Flask, tmp_path: Path) -> None:
    body = tmp_path / "body.json"
    body.write_bytes(notification())
    runner = app.test_cli_runner()

    signed = runner.invoke(args=["payhooks", "sign", str(body)])
    (tmp_path / "headers.txt").write_text(signed.stdout)
    checked = runner.invoke(
        args=["payhooks", "verify", str(body), "--headers", str(tmp_path / "headers.txt")]
    )

    assert signed.exit_code == 0, signed.output
    assert checked.exit_code == 0, checked.output
    assert checked.stdout.startswith("Valid: scheme standard-webhooks")


def test_reprocess_in_the_app_sends_its_signals_once(app: Flask) -> None:
    received: list[tuple[str, ReconciliationState]] = []

    def on_paid(
        sender: Flask,
        *,
        outcome: Outcome,
        outcome_id: int,
        delivery_id: int,
        reconciliation: ReconciliationState,
    ) -> None:
        received.append((outcome.external_identifier, reconciliation))

    with Ledger(app.config["PAYHOOKS_DATABASE"]) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        delivery = ledger.receiver.record_delivery(dedupe_key="k", body=notification(), headers={})
        ledger.receiver.mark_delivery(delivery.id, "processing_error", error="a bug, since fixed")
    runner = app.test_cli_runner()

    with signals.payment_succeeded.connected_to(on_paid, sender=app):
        first = runner.invoke(args=["payhooks", "reprocess"])
        second = runner.invoke(args=["payhooks", "reprocess", "--status", "processed"])

    assert first.exit_code == 0, first.output
    assert second.exit_code == 0, second.output
    assert received == [("order-1", ReconciliationState.PAID)]


def test_reprocess_in_the_app_with_no_signals_records_quietly(app: Flask) -> None:
    received: list[Outcome] = []

    def on_any(sender: Flask, *, outcome: Outcome, **kwargs: object) -> None:
        received.append(outcome)

    with Ledger(app.config["PAYHOOKS_DATABASE"]) as ledger:
        ledger.expect_transaction("order-1", 2500, "CNY")
        delivery = ledger.receiver.record_delivery(dedupe_key="k", body=notification(), headers={})
    runner = app.test_cli_runner()

    with signals.notification_received.connected_to(on_any, sender=app):
        result = runner.invoke(args=["payhooks", "reprocess", "--no-signals"])

    assert result.exit_code == 0, result.output
    assert received == []
    with Ledger(app.config["PAYHOOKS_DATABASE"]) as ledger:
        assert ledger.state("order-1") is ReconciliationState.PAID
        stored = ledger.receiver.delivery(delivery.id)
        assert stored is not None
        assert stored.status == "processed"


def test_flask_payhooks_runs_from_the_flask_command(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(
        textwrap.dedent(
            f"""
            from flask import Flask
            from payhooks.receiver import PayHooks

            app = Flask(__name__)
            app.config["PAYHOOKS_DATABASE"] = {str(tmp_path / "shop.db")!r}
            app.config["PAYHOOKS_SECRETS"] = ["whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"]
            PayHooks(app)
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAYHOOKS_", "FLASK_"))}

    def flask(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "flask", "--app", "shop", "payhooks", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    registered = flask("expect", "order-9", "100", "JPY")
    report = flask("reconcile", "--format", "json")
    conflict = flask("expect", "order-9", "200", "JPY")

    assert registered.returncode == 0, registered.stderr
    assert json.loads(report.stdout)["expected_amount"] == "100"
    assert conflict.returncode == 1
    assert "already registered with a different amount_minor" in conflict.stderr
    assert not (tmp_path / "payhooks.db").exists()


@pytest.fixture
def keyless_shop(tmp_path: Path) -> Path:
    """An app file whose keys would come from the environment, where none are set."""
    (tmp_path / "shop.py").write_text(
        textwrap.dedent(
            f"""
            from flask import Flask
            from payhooks.receiver import PayHooks

            app = Flask(__name__)
            app.config["PAYHOOKS_DATABASE"] = {str(tmp_path / "shop.db")!r}
            PayHooks(app)
            """
        )
    )
    return tmp_path


def _flask(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAYHOOKS_", "FLASK_"))}
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "shop", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_ledger_commands_run_in_an_app_without_webhook_keys(keyless_shop: Path) -> None:
    registered = _flask(keyless_shop, "payhooks", "expect", "order-9", "100", "JPY")
    report = _flask(keyless_shop, "payhooks", "reconcile", "--format", "json")

    assert registered.returncode == 0, registered.stderr
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["external_identifier"] == "order-9"


def test_an_app_without_keys_still_refuses_to_be_served(keyless_shop: Path) -> None:
    done = _flask(keyless_shop, "run", "--port", "1")  # fails before it would bind

    assert done.returncode != 0
    assert "PAYHOOKS_SECRETS is required" in done.stderr
