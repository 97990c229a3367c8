"""``PAYHOOKS_SQLITE_SYNCHRONOUS`` and the ledger's ``synchronous`` option: FULL by default,
NORMAL only when asked for, anything else refused at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from receiver import PayHooks
from receiver.demo import create_app
from receiver.state import receiver_state
from storage import Ledger
from tests.conftest import TEST_SECRET, AppFactory

# What `PRAGMA synchronous` reads back.
_PRAGMA_VALUES = {"NORMAL": 1, "FULL": 2}


def _pragma(ledger: Ledger) -> int:
    return int(ledger.database.conn.execute("PRAGMA synchronous").fetchone()[0])


def _receivers_pragma(app: Flask) -> int:
    return _pragma(receiver_state(app).ledger)


def test_a_ledger_syncs_every_commit_by_default(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        assert ledger.synchronous == "FULL"
        assert _pragma(ledger) == _PRAGMA_VALUES["FULL"]


@pytest.mark.parametrize("asked", ["NORMAL", "normal", "FULL", "full"])
def test_a_ledger_takes_either_mode_in_any_case(tmp_path: Path, asked: str) -> None:
    with Ledger(tmp_path / "ledger.db", synchronous=asked) as ledger:
        assert ledger.synchronous == asked.upper()
        assert _pragma(ledger) == _PRAGMA_VALUES[asked.upper()]


@pytest.mark.parametrize("asked", ["OFF", "EXTRA ", "", "0", None])
def test_a_ledger_refuses_any_other_mode(tmp_path: Path, asked: Any) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        Ledger(tmp_path / "ledger.db", synchronous=asked)
    assert not (tmp_path / "ledger.db").exists()


def test_the_receiver_syncs_every_commit_by_default(app: Flask) -> None:
    assert app.config["PAYHOOKS_SQLITE_SYNCHRONOUS"] == "FULL"
    assert _receivers_pragma(app) == _PRAGMA_VALUES["FULL"]


@pytest.mark.parametrize("asked", ["NORMAL", "normal"])
def test_the_receiver_uses_normal_when_configured(make_app: AppFactory, asked: str) -> None:
    assert _receivers_pragma(make_app(PAYHOOKS_SQLITE_SYNCHRONOUS=asked)) == 1


def test_the_demo_app_reads_the_setting_from_the_environment(tmp_path: Path) -> None:
    app = create_app(
        environ={
            "PAYHOOKS_SECRETS": TEST_SECRET,
            "PAYHOOKS_DATABASE": str(tmp_path / "demo.db"),
            "PAYHOOKS_SQLITE_SYNCHRONOUS": "NORMAL",
        }
    )

    assert _receivers_pragma(app) == _PRAGMA_VALUES["NORMAL"]


@pytest.mark.parametrize("asked", ["OFF", "fast", "", 1, None])
def test_any_other_setting_stops_init_app_naming_the_key(tmp_path: Path, asked: Any) -> None:
    app = Flask("durability", instance_path=str(tmp_path / "instance"))
    app.config.update(PAYHOOKS_SECRETS=[TEST_SECRET], PAYHOOKS_SQLITE_SYNCHRONOUS=asked)

    with pytest.raises(ValueError, match="PAYHOOKS_SQLITE_SYNCHRONOUS"):
        PayHooks(app)
