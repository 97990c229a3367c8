"""What a user installs: one top-level name, and an sdist that can run its own tests.

A merchant's app often has modules of its own named ``storage.py`` or ``verify.py``; payhooks
installs nothing but ``payhooks``, so such an app imports its own modules and payhooks' side by
side. The app tests run the installed package (the strict editable install links only
``payhooks/``), under gunicorn and ``flask --app``, as a merchant runs them.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import flask
import pytest

from tests.support.app import TEST_SECRET
from tests.support.gunicorn_server import GunicornServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel and the sdist, built from this checkout the way a release is."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return out


def test_the_wheel_installs_only_payhooks(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/", 1)[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert tops == {"payhooks", "payhooks-0.1.0.dist-info"}
    assert "payhooks/__init__.py" not in names  # a namespace: no folder of its own
    assert "payhooks/receiver/web/templates/payhooks/return.html" in names
    assert {f"payhooks/{package}/py.typed" for package in ("receiver", "verify", "storage")} <= (
        names
    )
    assert "payhooks-0.1.0.dist-info/licenses/LICENSE" in names


def test_the_wheel_carries_the_console_with_its_templates_static_files_and_command(
    dist: Path,
) -> None:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = archive.read("payhooks-0.1.0.dist-info/entry_points.txt").decode()
    assert {
        "payhooks/console/__init__.py",
        "payhooks/console/py.typed",
        "payhooks/console/templates/payhooks_console/base.html",
        "payhooks/console/static/console.css",
        "payhooks/console/static/favicon.svg",
        "payhooks/console/standalone/__init__.py",
    } <= names
    assert not any(name.startswith("payhooks/receiver/web/console/") for name in names)
    assert "[payhooks.commands]\nconsole = payhooks.console.standalone:console_command" in (
        entry_points
    )


def test_an_installed_wheel_gives_the_console_and_payhooks_console(
    dist: Path, tmp_path: Path
) -> None:
    """The wheel installed in a virtual environment of its own, its dependencies lent from this
    one (every package but payhooks itself, so no editable copy can answer for the wheel)."""
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(_run_python(python, "import sysconfig; print(sysconfig.get_path('purelib'))"))
    lent = tmp_path / "lent"
    lent.mkdir()
    here = Path(flask.__file__).parents[1]  # this environment's site-packages
    for item in here.iterdir():
        if not item.name.lower().startswith(("payhooks", "__editable__")):
            (lent / item.name).symlink_to(item)
    (purelib / "lent.pth").write_text(f"{lent}\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )

    imported = _run_python(
        python,
        "import payhooks.console as c; from payhooks.console import Console, ConsoleGrant, "
        "ConsoleRole; print(c.__file__)",
    )
    console = subprocess.run(
        [str(venv / "bin" / "payhooks"), "console", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_clean_env(tmp_path),
    )
    assert Path(imported).is_relative_to(purelib)
    assert console.returncode == 0, console.stderr
    assert console.stdout.startswith("Usage: payhooks console [OPTIONS]")


def _run_python(python: Path, code: str) -> str:
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def test_every_package_folder_is_listed_in_pyproject() -> None:
    """A subpackage missing from ``[tool.setuptools] packages`` would be left out of the wheel
    while the editable install and the tests still found it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for package, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join([package, *relative]))
    assert found == listed


def test_the_sdist_carries_what_its_tests_need(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    needed = {
        "LICENSE",
        "README.md",
        "tests/conftest.py",
        "tests/support/app.py",
        "tests/system/test_docs.py",
        "sample_payloads/README.md",
        "docs/ARCHITECTURE.md",
        "bench/receive.py",
    }
    assert needed <= names


_APP = """\
from flask import Flask

import storage
import verify
from payhooks.receiver import PayHooks, signals

app = Flask(__name__)
app.config["PAYHOOKS_SECRETS"] = [{secret!r}]
app.config["PAYHOOKS_DATABASE"] = {database!r}
PayHooks(app)


@app.get("/mine")
def mine():
    return {{"storage": storage.WHO, "verify": verify.WHO}}
"""


@pytest.fixture
def merchant_app(tmp_path: Path) -> Path:
    """A merchant's app folder with its own ``storage.py`` and ``verify.py``."""
    (tmp_path / "storage.py").write_text('WHO = "the merchant\'s storage"\n')
    (tmp_path / "verify.py").write_text('WHO = "the merchant\'s verify"\n')
    database = str(tmp_path / "payhooks.db")
    (tmp_path / "app.py").write_text(_APP.format(secret=TEST_SECRET, database=database))
    return tmp_path


def _request(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def _clean_env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAYHOOKS_", "FLASK_"))}
    env["PYTHONPATH"] = str(folder)
    return env


def test_a_merchant_app_with_its_own_storage_and_verify_serves_under_gunicorn(
    merchant_app: Path,
) -> None:
    with GunicornServer("app:app", env=_clean_env(merchant_app), cwd=merchant_app, workers=1) as (
        server
    ):
        mine = _request(server.port, "GET", "/mine")
        refused = _request(server.port, "POST", "/payhooks/notifications", b"{}")
    assert mine == (200, {"storage": "the merchant's storage", "verify": "the merchant's verify"})
    # payhooks' own endpoint answers with its own error contract: no signature headers.
    assert refused[0] == 401
    assert refused[1]["error"]["code"] == "missing_signature"


def test_a_merchant_app_with_its_own_storage_and_verify_runs_under_flask(
    merchant_app: Path,
) -> None:
    def flask(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "flask", "--app", "app", "payhooks", *args],
            cwd=merchant_app,
            env=_clean_env(merchant_app),
            capture_output=True,
            text=True,
            timeout=60,
        )

    registered = flask("expect", "order-1", "2500", "CNY")
    report = flask("reconcile", "--format", "json")
    assert registered.returncode == 0, registered.stderr
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout.splitlines()[0])["external_identifier"] == "order-1"


def test_ci_runs_the_readme_test_command_word_for_word() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = next(
        line
        for line in readme.splitlines()
        if line.startswith("python3 -m venv") and "pytest" in line
    )
    assert command in ci


def test_python_dash_m_runs_the_console_script_with_the_demo_commands() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "payhooks.receiver", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    commands = _commands(done.stdout)
    assert {"serve", "demo", "expect", "reconcile", "verify", "sign", "keygen"} <= commands


def test_a_merchant_apps_flask_cli_has_only_the_in_app_commands(merchant_app: Path) -> None:
    """``serve`` and ``demo`` run the demo app with the environment's settings, not the
    merchant's app: they belong to the console script only."""
    done = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "payhooks", "--help"],
        cwd=merchant_app,
        env=_clean_env(merchant_app),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    commands = _commands(done.stdout)
    assert {"expect", "reconcile", "reprocess", "replay", "sign", "verify", "keygen"} <= commands
    assert not commands & {"serve", "demo"}


def _commands(help_text: str) -> set[str]:
    listing = help_text.split("Commands:", 1)[1]
    return {line.split()[0] for line in listing.splitlines() if line.startswith("  ")}
