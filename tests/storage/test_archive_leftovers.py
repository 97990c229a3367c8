"""What a stopped prune leaves in its archive folder, swept by the next one; and archive names
that never collide, even in the same instant."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest

from payhooks.storage import Ledger, read_archive
from payhooks.storage.archive_leftovers import IDLE_SECONDS, ArchiveLeftovers, sweep_leftovers
from payhooks.storage.archives import ArchiveWriter, checksum_path, partial_path
from payhooks.storage.retention import archive_name
from tests.support.factories import T0, FixedClock, make_outcome

DAY = timedelta(days=1)


@pytest.fixture
def archives(tmp_path: Path) -> Path:
    folder = tmp_path / "archives"
    folder.mkdir()
    return folder


def _age(path: Path, seconds: float = IDLE_SECONDS + 60) -> None:
    """Make ``path`` look untouched for ``seconds``: what waiting that long would do."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def _old_delivery(database: Path | str, key: str) -> None:
    """A finished delivery received ten days before T0 (the test ledger's clock)."""
    with Ledger(database, clock=FixedClock(T0 - 10 * DAY)) as old:
        delivery = old.receiver.record_delivery(dedupe_key=key, body=key.encode(), headers={})
        old.receiver.record_outcome(
            make_outcome(transaction_id=f"ll-{key}", external_identifier=key),
            delivery_id=delivery.id,
        )
        old.signals.mark_sent(old.signals.claim(lease=timedelta(minutes=1)))


def _archive(folder: Path, name: str = "") -> Path:
    """A whole archive of one row whose checksum file is missing: what a prune killed between
    its two renames leaves."""
    writer = ArchiveWriter(folder / (name or archive_name(T0)))
    writer.write("deliveries", 1, "2026-01-01T00:00:00Z", b"\xffbody", status="processed")
    writer.commit()
    checksum_path(writer.path).unlink()
    return writer.path


def test_two_prunes_in_the_same_instant_write_two_archives(
    ledger: Ledger, database: Path | str, archives: Path
) -> None:
    _old_delivery(database, "first")
    first = ledger.prune(DAY, archives)
    _old_delivery(database, "second")

    second = ledger.prune(DAY, archives)  # the ledger's clock has not moved

    assert first.archive is not None
    assert second.archive is not None
    assert first.archive != second.archive
    assert [row.body for row in read_archive(first.archive)] == [b"first"]
    assert [row.body for row in read_archive(second.archive)] == [b"second"]
    assert sorted(p.name for p in archives.iterdir()) == sorted(
        name for a in (first.archive, second.archive) for name in (a.name, f"{a.name}.sha256")
    )


def test_archive_names_sort_by_time_and_differ_within_one() -> None:
    names = [archive_name(T0 + timedelta(microseconds=n)) for n in (0, 0, 1, 999_999, 10**6)]

    assert len(set(names)) == len(names)
    assert names[1:] == sorted(names[1:])
    assert names[0] < names[2]


def test_abandoned_partial_archives_and_checksums_are_removed(archives: Path) -> None:
    # What a prune killed while writing leaves: nobody holds their lock any more.
    partial = archives / f".{archive_name(T0)}.partial"
    partial.write_bytes(b"\x1f\x8b half an archive")
    partial_sum = archives / f".{archive_name(T0 + DAY)}.partial.sha256"
    partial_sum.write_text("half a line")
    for leftover in (partial, partial_sum):
        _age(leftover)

    swept = sweep_leftovers(archives)

    assert swept == ArchiveLeftovers(removed=(partial.name, partial_sum.name))
    assert list(archives.iterdir()) == []


def test_a_dry_run_says_what_it_would_sweep_and_changes_nothing(archives: Path) -> None:
    partial = archives / f".{archive_name(T0)}.partial"
    partial.write_bytes(b"\x1f\x8b")
    archive = _archive(archives, archive_name(T0 + DAY))
    for path in (partial, archive):
        _age(path)
    before = sorted(archives.iterdir())

    found = sweep_leftovers(archives, dry_run=True)

    assert found == ArchiveLeftovers(removed=(partial.name,), sealed=(archive.name,))
    assert sorted(archives.iterdir()) == before


def test_a_whole_archive_left_without_its_checksum_gets_one(archives: Path) -> None:
    archive = _archive(archives)
    _age(archive)

    swept = sweep_leftovers(archives)

    assert swept == ArchiveLeftovers(sealed=(archive.name,))
    assert [row.body for row in read_archive(archive)] == [b"\xffbody"]
    assert sorted(p.name for p in archives.iterdir()) == [archive.name, f"{archive.name}.sha256"]
    if shutil.which("sha256sum"):
        checked = subprocess.run(
            ["sha256sum", "-c", f"{archive.name}.sha256"], cwd=archives, check=False
        )
        assert checked.returncode == 0


def test_an_archive_that_does_not_read_back_is_left_and_said_so(archives: Path) -> None:
    archive = _archive(archives)
    archive.write_bytes(archive.read_bytes()[:-9])  # cut short: the gzip trailer is gone
    _age(archive)

    swept = sweep_leftovers(archives)

    ((name, why),) = swept.left
    assert (name, swept.sealed, swept.removed) == (archive.name, (), ())
    assert "cannot be read" in why
    assert sorted(p.name for p in archives.iterdir()) == [archive.name]


def test_what_a_live_prune_is_writing_is_kept(archives: Path) -> None:
    writer = ArchiveWriter(archives / archive_name(T0))
    writer.write("deliveries", 1, "2026-01-01T00:00:00Z", b"body", status="processed")
    _age(partial_path(writer.path))  # old, but its writer holds the lock
    young = archives / f".{archive_name(T0 + DAY)}.partial"
    young.write_bytes(b"")  # nobody's lock, but written just now
    whole = _archive(archives, archive_name(T0 + 2 * DAY))  # just renamed into place

    try:
        assert not sweep_leftovers(archives)
        assert partial_path(writer.path).exists()
        assert young.exists()
        assert not checksum_path(whole).exists()
    finally:
        writer.discard()


def test_files_of_other_names_are_never_touched(archives: Path) -> None:
    others = [
        archives / ".notes.partial",
        archives / ".payhooks-prune-mine.jsonl.gz.partial",
        archives / "payhooks-prune-copy.jsonl.gz",
        archives / f"{archive_name(T0)}.bak",
    ]
    for path in others:
        path.write_bytes(gzip.compress(b"x"))
        _age(path)

    assert not sweep_leftovers(archives)
    assert sorted(archives.iterdir()) == sorted(others)


def test_a_folder_that_is_not_there_is_swept_of_nothing(tmp_path: Path) -> None:
    assert sweep_leftovers(tmp_path / "gone") == ArchiveLeftovers()
