"""``payhooks prune``, ``restore-pruned`` and ``backup``, on each engine: what they print, the
exit codes, and that ``show`` and ``deliveries show`` say where a pruned body went."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from payhooks.storage import Ledger
from tests.support.app import TEST_SECRET, SignFunction
from tests.support.cli import clean_env, notification, record_notification, run
from tests.support.disks import size_limited
from tests.support.factories import T0, FixedClock
from tests.support.retention import fill_old_deliveries, forge_archive

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")

#: An archive's name: the time to the microsecond, then a random token.
NAME = r"payhooks-prune-\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{8}\.jsonl\.gz"
ARCHIVE = re.compile(rf"into (\S+{NAME}) ")


@pytest.fixture
def old_ids(database: Path | str) -> dict[str, int]:
    """Two notifications recorded days ago (T0), their signals sent: both prunable; and a
    body that is not a notification, which is not."""
    with Ledger(database, clock=FixedClock(T0)) as ledger:
        ids = {
            order: record_notification(ledger, notification(order, f"ll-{order}"), f"key-{order}")
            for order in ("order-1", "order-2")
        }
        stored = ledger.receiver.record_delivery(dedupe_key="bad", body=b"{", headers={})
        ledger.receiver.mark_delivery(stored.id, "malformed_json", "cut short")
        claimed = ledger.signals.claim(lease=timedelta(minutes=1))
        ledger.signals.mark_sent(claimed)
        found = {row.dedupe_key: row.id for row in ledger.receiver.delivery_log().rows}
    assert all(recorded.is_new for recorded in ids.values())
    return found


def _prune(database: Path | str, archive: Path, *extra: str) -> tuple[int, str]:
    args = ["--older-than", "1d", "--archive", str(archive), "--database", str(database)]
    result = run(["prune", *args, *extra])
    return result.exit_code, result.output + result.stderr


def test_prune_reports_the_archive_and_show_says_where_the_body_went(
    database: Path | str, tmp_path: Path, old_ids: dict[str, int]
) -> None:
    code, output = _prune(database, tmp_path)
    assert code == 0, output
    assert "Archived 2 deliveries' bodies and 0 refused requests" in output
    assert "Pruned 2 deliveries' bodies and headers" in output
    archive = Path(ARCHIVE.search(output).group(1))  # type: ignore[union-attr]
    assert archive.parent == tmp_path
    assert archive.exists()

    shown = run(["deliveries", "show", str(old_ids["key-order-1"]), "--database", str(database)])
    assert shown.exit_code == 0, shown.output
    assert f"into {archive.name}; payhooks prune's archive holds it" in shown.output
    story = run(["show", "order-1", "--database", str(database)])
    assert story.exit_code == 0, story.output
    assert f"body pruned into {archive.name}" in story.output
    kept = run(["deliveries", "show", str(old_ids["bad"]), "--database", str(database)])
    assert "pruned" not in kept.output


def test_a_pruned_body_is_not_exported_and_restore_brings_it_back(
    database: Path | str, tmp_path: Path, old_ids: dict[str, int]
) -> None:
    code, output = _prune(database, tmp_path)
    assert code == 0, output
    archive = ARCHIVE.search(output).group(1)  # type: ignore[union-attr]
    delivery = str(old_ids["key-order-1"])
    export = ["deliveries", "export", delivery, "--output", str(tmp_path / "out")]

    refused = run([*export, "--database", str(database)])
    assert refused.exit_code == 1
    assert "was pruned into" in refused.stderr

    restored = run(["restore-pruned", archive, "--database", str(database)])
    assert restored.exit_code == 0, restored.output + restored.stderr
    assert "Restored 2 deliveries' bodies" in restored.output
    exported = run([*export, "--database", str(database)])
    assert exported.exit_code == 0, exported.stderr
    written = (tmp_path / "out" / f"delivery-{delivery}.json").read_bytes()
    assert written == notification("order-1", "ll-order-1")


def test_a_dry_run_changes_nothing(
    database: Path | str, tmp_path: Path, old_ids: dict[str, int]
) -> None:
    code, output = _prune(database, tmp_path, "--dry-run")
    assert code == 0, output
    assert "Would archive and drop 2 deliveries' bodies" in output
    assert not list(tmp_path.glob("payhooks-prune-*"))
    code, output = _prune(database, tmp_path)
    assert "Pruned 2 deliveries'" in output


@pytest.mark.sqlite_only
def test_a_sqlite_ledger_archives_beside_itself_by_default(
    database: Path, old_ids: dict[str, int]
) -> None:
    result = run(["prune", "--older-than", "1d", "--database", str(database)])
    assert result.exit_code == 0, result.output + result.stderr
    assert len(list(database.parent.glob("payhooks-prune-*.jsonl.gz.sha256"))) == 1


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    "archive",
    [None, "archives", "old bodies", "."],
    ids=["default_ledger_folder", "relative_folder", "folder_with_a_space", "current_folder"],
)
def test_the_printed_check_command_checks_the_archive_when_pasted_where_prune_ran(
    database: Path, clean_env: Path, old_ids: dict[str, int], archive: str | None
) -> None:
    """The command runs as a person pastes it: in the folder prune ran in, by a shell."""
    args = ["prune", "--older-than", "1d", "--database", str(database)]
    if archive is not None:
        (clean_env / archive).mkdir(exist_ok=True)
        args += ["--archive", archive]
    result = run(args)
    assert result.exit_code == 0, result.output + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("with its sha256sum file; check it with:")
    command = lines[1].strip()

    done = subprocess.run(
        ["sh", "-c", command],
        cwd=clean_env,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, command + done.stdout + done.stderr
    assert re.fullmatch(rf"{NAME}: OK\n", done.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "soon"], "DURATION"),
        (["--older-than", "0s"], "--older-than must be longer than 0s."),
        (
            ["--older-than", "90d", "--audit-older-than", "30d"],
            "--audit-older-than must be at least --older-than",
        ),
        ([], "Missing option '--older-than'"),
        (["--older-than", "1d", "--archive", "no-such-folder"], "does not exist"),
    ],
)
def test_bad_usage_exits_2(
    database: Path | str, args: list[str], message: str, old_ids: dict[str, int]
) -> None:
    result = run(["prune", *args, "--database", str(database)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_prune_ages_the_audit_log_into_its_own_archive_and_says_so(
    database: Path | str, tmp_path: Path, old_ids: dict[str, int]
) -> None:
    with Ledger(database, clock=FixedClock(T0)) as ledger:
        ledger.console.audit(who="ana", role="operator", action="reprocess", result="processed")
    days = (datetime.now(UTC) - T0).days  # the entry's age: the command runs on the real clock
    horizon = f"{days - 1}d"

    dry = run(["prune", "--older-than", "1d", "--audit-older-than", horizon, "--dry-run",
               "--archive", str(tmp_path), "--database", str(database)])  # fmt: skip
    code, output = _prune(database, tmp_path, "--audit-older-than", horizon)

    assert dry.exit_code == 0, dry.output
    assert "Would archive and delete 1 audit log entries and 0 refusal counts" in dry.output
    assert code == 0, output
    assert "Archived 1 audit log entries and 0 refusal counts made more than" in output
    (audit_archive,) = re.findall(rf"into (\S+{NAME}) with its sha256sum file, then", output)
    assert Path(audit_archive).exists()
    with Ledger(database) as ledger:
        (entry,) = ledger.console.audit_log().rows
    assert (entry.action, entry.detail["archive"]) == ("prune_audit_log", Path(audit_archive).name)


@pytest.mark.postgresql
def test_a_postgresql_ledger_needs_an_archive_folder(postgres_url: str) -> None:
    result = run(["prune", "--older-than", "1d", "--database", postgres_url])
    assert result.exit_code == 2
    assert "pass --archive DIR" in result.stderr


@pytest.mark.sqlite_only
def test_backup_copies_a_ledger_that_reconciles_the_same(
    database: Path, tmp_path: Path, old_ids: dict[str, int]
) -> None:
    dest = tmp_path / "copy" / "backup.db"
    dest.parent.mkdir()
    result = run(["backup", str(dest), "--database", str(database)])
    assert result.exit_code == 0, result.output + result.stderr
    assert f"to {dest}" in result.output
    with Ledger(database) as source, Ledger(dest, create=False) as copy:
        assert list(copy.reconcile()) == list(source.reconcile())
        assert copy.receiver.count_deliveries() == 3
    assert sorted(p.name for p in dest.parent.iterdir()) == ["backup.db"]

    again = run(["backup", str(dest), "--database", str(database)])
    assert again.exit_code == 1
    assert "exists already" in again.stderr


@pytest.mark.sqlite_only
@pytest.mark.parametrize("source", ["missing.db", "not-a-ledger.db"])
def test_backup_of_no_ledger_is_bad_usage(tmp_path: Path, source: str) -> None:
    (tmp_path / "not-a-ledger.db").write_bytes(b"just bytes, not SQLite at all" * 10)
    result = run(["backup", str(tmp_path / "out.db"), "--database", str(tmp_path / source)])
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "out.db").exists()


@pytest.mark.postgresql
def test_backup_points_postgresql_at_pg_dump(postgres_url: str, tmp_path: Path) -> None:
    result = run(["backup", str(tmp_path / "out.db"), "--database", postgres_url])
    assert result.exit_code == 2
    assert "pg_dump" in result.stderr
    assert "password" not in result.stderr


def test_reprocess_leaves_a_pruned_delivery_alone(
    database: Path | str, tmp_path: Path, old_ids: dict[str, int], db_rows: Any
) -> None:
    code, output = _prune(database, tmp_path)
    assert code == 0, output
    before = db_rows("SELECT * FROM deliveries ORDER BY id")

    args = ["reprocess", "--status", "processed", "--no-signals", "--database", str(database)]
    result = run(args)

    assert result.exit_code == 0, result.output + result.stderr
    assert "Reprocessed 2 delivery(ies): 2 pruned." in result.output
    assert db_rows("SELECT * FROM deliveries ORDER BY id") == before


def test_a_pruned_notification_sent_again_is_answered_duplicate(
    database: Path | str,
    tmp_path: Path,
    old_ids: dict[str, int],
    client: FlaskClient,
    sign: SignFunction,
) -> None:
    code, output = _prune(database, tmp_path)
    assert code == 0, output
    body = notification("order-1", "ll-order-1")

    answer = client.post(
        "/payhooks/notifications", data=body, headers=sign(body, msg_id="key-order-1")
    )

    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.get_json()["status"] == "duplicate"
    with Ledger(database) as ledger:
        delivery = ledger.receiver.delivery(old_ids["key-order-1"])
    assert delivery is not None
    assert (delivery.attempts, delivery.body, delivery.pruned_at is not None) == (2, b"", True)


@pytest.mark.parametrize(
    ("headers", "restored"),
    [
        ({"webhook-id": "key-order-1", "content-type": "application/json"}, True),
        ({"authorization": "Bearer stolen"}, False),
        ({"x-anything": "v"}, False),
    ],
    ids=["the_receivers_headers", "a_credential", "another_header"],
)
def test_restore_puts_back_only_the_headers_the_configured_receiver_stores(
    database: Path | str,
    tmp_path: Path,
    old_ids: dict[str, int],
    headers: dict[str, str],
    restored: bool,
) -> None:
    code, output = _prune(database, tmp_path)
    assert code == 0, output
    archive = Path(ARCHIVE.search(output).group(1))  # type: ignore[union-attr]
    forge_archive(archive, lambda record: record.update(headers=json.dumps(headers)))

    result = run(
        ["restore-pruned", str(archive), "--database", str(database)],
        env={"PAYHOOKS_SECRETS": TEST_SECRET},
    )

    if restored:
        assert result.exit_code == 0, result.output + result.stderr
        assert "Restored 2 deliveries' bodies" in result.output
    else:
        assert result.exit_code == 1, result.output
        assert "headers are not the few short headers a receiver stores" in result.stderr
        assert "stolen" not in result.stderr
    with Ledger(database) as ledger:
        details = ledger.receiver.delivery(old_ids["key-order-1"])
    assert details is not None
    assert details.headers == (headers if restored else {})


def _aged(path: Path) -> None:
    """``path`` as if untouched for ten minutes: past the sweep's wait for a writer."""
    then = time.time() - 600
    os.utime(path, (then, then))


@pytest.mark.sqlite_only
def test_a_prune_killed_while_archiving_leaves_what_the_next_prune_sweeps(
    database: Path, tmp_path: Path
) -> None:
    fill_old_deliveries(database, 2000, body_size=2000)
    archives = tmp_path / "archives"
    archives.mkdir()
    args = ["--older-than", "7d", "--archive", str(archives), "--batch-size", "2"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}
    killed = subprocess.Popen(
        [sys.executable, "-m", "payhooks.receiver", "prune", *args, "--database", str(database)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(archives.glob(".*.partial")) and time.monotonic() < deadline:
            assert killed.poll() is None, "the prune ended before it could be killed"
            time.sleep(0.001)
        killed.send_signal(signal.SIGKILL)  # mid-archive: nothing dropped yet
    finally:
        killed.kill()
        killed.wait()
    (partial,) = archives.glob(".*.partial")

    # At once, the same second: its file is too fresh to call its writer gone, so it stays,
    # and the retry writes an archive of its own.
    code, output = _prune(database, archives)
    assert code == 0, output
    assert "Pruned 2000 deliveries' bodies" in output
    assert partial.exists()

    _aged(partial)
    code, output = _prune(database, archives)
    assert code == 0, output
    assert f"Removed 1 temporary file(s) that stopped prunes left: {partial.name}." in output
    assert [p.name for p in archives.glob(".*")] == []
    assert len(list(archives.glob("*.jsonl.gz.sha256"))) == len(list(archives.glob("*.gz")))


@pytest.mark.sqlite_only
def test_prune_seals_a_whole_archive_and_reports_one_it_cannot_read(
    database: Path, tmp_path: Path, old_ids: dict[str, int]
) -> None:
    _code, output = _prune(database, tmp_path)
    (archive,) = ARCHIVE.findall(output)
    Path(f"{archive}.sha256").unlink()  # killed between its two renames
    broken = tmp_path / "payhooks-prune-20260101T000000Z.jsonl.gz"
    broken.write_bytes(gzip.compress(b"{}\n")[:-4])
    for path in (Path(archive), broken):
        _aged(path)

    result = run(
        ["prune", "--older-than", "1d", "--archive", str(tmp_path), "--database", str(database)]
    )

    assert result.exit_code == 0, result.output + result.stderr
    name = Path(archive).name
    assert (
        f"Wrote the checksum file a stopped prune left out for {name} (every record read back "
        "and checked)." in result.stdout
    )
    assert result.stderr.startswith(f"Left {broken.name} as it is: ")
    assert result.stderr.endswith("; look at it by hand.\n")
    assert Path(f"{archive}.sha256").exists()
    assert not Path(f"{broken}.sha256").exists()


@pytest.mark.sqlite_only
def test_a_backup_that_runs_out_of_room_fails_in_a_sentence_and_leaves_nothing(
    database: Path, tmp_path: Path
) -> None:
    fill_old_deliveries(database, 400, body_size=8000)  # about 3.5 MB
    backups = tmp_path / "backups"
    backups.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}

    # No file this process writes may grow past 1 MiB: the copy fails as on a full disk.
    done = size_limited(
        1 << 20,
        "payhooks.receiver",
        ["backup", str(backups / "backup.db"), "--database", str(database)],
        env=env,
    )

    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"Error: Cannot back up {database}: ")
    assert done.stderr.count("\n") == 1
    assert list(backups.iterdir()) == []
