"""How the ledger commands open the ledger: never another application's file, one sentence for
a missing driver or a PostgreSQL URL that cannot be used, and never the password."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import clean_env, run
from tests.support.processes import free_port

__all__ = ["clean_env"]

# psycopg blocked as if the postgres extra were not installed.
_WITHOUT_PSYCOPG = (
    "import sys; sys.modules['psycopg'] = sys.modules['psycopg_pool'] = None; "
    "from payhooks.receiver.script import main; main()"
)
_URL = "postgresql://shop:s3cret@127.0.0.1:{port}/ledger"


def _digest(folder: Path) -> dict[str, str]:
    return {item.name: hashlib.sha256(item.read_bytes()).hexdigest() for item in folder.iterdir()}


@pytest.mark.parametrize(
    "command",
    [["reconcile"], ["reprocess", "--no-signals"], ["signals"], ["reconcile", "--format", "csv"]],
)
def test_a_reading_command_refuses_another_applications_database_and_changes_nothing(
    clean_env: Path, command: list[str]
) -> None:
    other = clean_env / "shop.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    conn.close()
    before = _digest(clean_env)

    result = run([*command, "--database", str(other)])

    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: {other} is not a payhooks ledger (it holds no payhooks schema); nothing was "
        "changed in it.\n"
    )
    assert _digest(clean_env) == before  # no ledger tables, no WAL, no lock file


@pytest.mark.parametrize(
    "command",
    [
        ["reconcile", "--database", _URL],
        ["expect", "order-1", "100", "CNY", "--database", _URL],
        ["migrate", "--database", _URL],
        ["copy-ledger", "ledger.db", _URL],
    ],
)
def test_a_postgresql_url_without_the_extra_is_one_sentence_naming_it(
    tmp_path: Path, command: list[str]
) -> None:
    args = [part.format(port=free_port()) for part in command]

    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PSYCOPG, *args],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "PostgreSQL needs the postgres extra: pip install 'payhooks[postgres]'." in done.stderr
    assert "s3cret" not in done.stderr


def test_serve_without_the_extra_fails_at_start_rather_than_answering_500(tmp_path: Path) -> None:
    url = _URL.format(port=free_port())

    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PSYCOPG, "serve", "--port", "0"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PAYHOOKS_DATABASE": url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 1
    assert done.stdout == ""  # nothing listened, no key printed
    assert done.stderr == (
        f"Error: Cannot open the ledger at {url.replace('s3cret', '***')}: PostgreSQL needs the "
        "postgres extra: pip install 'payhooks[postgres]'.\n"
    )


@pytest.mark.usefixtures("clean_env")
def test_a_postgresql_url_that_cannot_be_used_fails_at_once_with_its_cause() -> None:
    import psycopg_pool  # noqa: F401 - imported before the clock starts: a slow first import

    url = _URL.format(port=free_port())
    started = time.monotonic()

    result = run(["reconcile", "--database", url], env={"PAYHOOKS_BUSY_TIMEOUT_MS": "60000"})

    assert time.monotonic() - started < 30  # not the busy timeout of a pool's retries
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        f"Error: Cannot open the ledger at {url.replace('s3cret', '***')}: Cannot connect to "
        "PostgreSQL: connection failed:"
    )
    assert "Connection refused" in result.stderr
