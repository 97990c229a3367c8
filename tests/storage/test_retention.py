"""``Ledger.prune`` and ``Ledger.restore_pruned``: what is archived, dropped and kept, on each
engine; the archive read back byte for byte; a failed archive drops nothing."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from payhooks.storage import DeliveryStatus, Ledger, read_archive
from payhooks.storage.archives import ARCHIVE_SUFFIX, ArchiveError
from payhooks.storage.reads import EntryKind
from payhooks.storage.retention import archive_name
from tests.support.factories import FixedClock, make_outcome
from tests.support.retention import forge_archive

DAY = timedelta(days=1)
#: The headers a receiver on the default scheme stores (its verifier's and STORED_HEADERS).
RECEIVER_HEADERS = (
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "content-type",
    "user-agent",
    "timezone",
)
Rows = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def archives(tmp_path: Path) -> Path:
    """The folder archives are written to, apart from the ledger's files."""
    folder = tmp_path / "archives"
    folder.mkdir()
    return folder


@dataclass
class Stored:
    """The ids of the deliveries :func:`_fill` stores, by what each is."""

    sent: int  # processed, its signals sent: pruned
    duplicate: int  # a duplicate of ``sent``'s outcome: pruned
    owing: int  # processed, a signal still owed: kept
    malformed: int  # not a notification, awaiting reprocess: kept
    conflicting: int  # a conflicting outcome: kept
    recent: int  # processed, signals sent, but newer than the age: kept
    bodies: dict[int, bytes]


def _deliver(ledger: Ledger, key: str, body: bytes, **outcome: Any) -> int:
    delivery = ledger.receiver.record_delivery(
        dedupe_key=key, body=body, headers={"webhook-id": key, "content-type": "x/y"}
    )
    if outcome:
        ledger.receiver.record_outcome(make_outcome(**outcome), delivery_id=delivery.id)
    return delivery.id


def _send_signals(ledger: Ledger, delivery_id: int) -> None:
    owed = ledger.signals.owed(delivery_id)
    claimed = ledger.signals.claim({s.outcome_id for s in owed}, lease=timedelta(minutes=1))
    ledger.signals.mark_sent(claimed)


def _fill(ledger: Ledger, clock: FixedClock) -> Stored:
    """Deliveries of every kind ten days old, refused requests as old, one recent delivery."""
    bodies = {}

    def deliver(key: str, body: bytes, **outcome: Any) -> int:
        delivery_id = _deliver(ledger, key, body, **outcome)
        bodies[delivery_id] = body
        return delivery_id

    # A body that is not UTF-8: the archive keeps bytes, not text.
    sent = deliver("k-sent", b"\xff\xfe{binary \x00 body}", transaction_id="ll-1")
    _send_signals(ledger, sent)
    duplicate = deliver("k-dup", b'{"again": 1}', transaction_id="ll-1")
    owing = deliver("k-owing", b'{"owing": 1}', transaction_id="ll-2", external_identifier="o-2")
    malformed = deliver("k-bad", b"not json")
    ledger.receiver.mark_delivery(malformed, "malformed_json", "not JSON")
    conflicting = deliver("k-conf", b'{"conf": 1}', transaction_id="ll-1", amount_minor=1)
    ledger.receiver.record_rejected(reason="bad_signature", body=b"\x00forged", remote_addr="::1")
    clock.advance(10 * DAY.total_seconds())
    recent = deliver("k-new", b'{"new": 1}', transaction_id="ll-3", external_identifier="o-3")
    _send_signals(ledger, recent)
    ledger.receiver.record_rejected(reason="bad_signature", body=b"new", remote_addr=None)
    return Stored(sent, duplicate, owing, malformed, conflicting, recent, bodies)


def _token(archive: Path) -> str:
    """The random token in an archive's name, after the time."""
    return archive.name.removesuffix(ARCHIVE_SUFFIX).rsplit("-", 1)[1]


def _snapshot(db_rows: Rows) -> list[dict[str, Any]]:
    """Everything but the bodies and headers a prune may empty."""
    return [
        *db_rows("SELECT * FROM outcomes ORDER BY id"),
        *db_rows("SELECT * FROM owed_signals ORDER BY id"),
        *db_rows("SELECT * FROM payment_states ORDER BY external_identifier"),
        *db_rows("SELECT id, status, outcome_id, body_sha256 FROM deliveries ORDER BY id"),
    ]


def test_prune_drops_old_finished_bodies_and_keeps_the_rest(
    ledger: Ledger, clock: FixedClock, archives: Path, db_rows: Rows
) -> None:
    stored = _fill(ledger, clock)
    before = _snapshot(db_rows)
    reconciled = list(ledger.reconcile())

    report = ledger.prune(DAY, archives)

    assert report.archive is not None
    assert report.archive.parent == archives
    assert report.archive.name == archive_name(clock(), _token(report.archive))
    assert (report.archived_deliveries, report.pruned_deliveries, report.rejected) == (2, 2, 1)
    for pruned in (stored.sent, stored.duplicate):
        delivery = ledger.receiver.delivery(pruned)
        assert delivery is not None
        assert (delivery.body, delivery.headers, delivery.body_size) == (b"", {}, 0)
        assert delivery.pruned_into == report.archive.name
        assert delivery.pruned_at == clock()
    for kept in (stored.owing, stored.malformed, stored.conflicting, stored.recent):
        delivery = ledger.receiver.delivery(kept)
        assert delivery is not None
        assert delivery.body == stored.bodies[kept]
        assert (delivery.headers or {}).get("webhook-id")
    assert [row.reason for row in ledger.receiver.rejected_log().rows] == ["bad_signature"]
    assert ledger.receiver.count_rejected() == 1
    assert _snapshot(db_rows) == before
    assert list(ledger.reconcile()) == reconciled


def test_the_archive_reads_back_every_dropped_body_byte_for_byte(
    ledger: Ledger, clock: FixedClock, archives: Path
) -> None:
    stored = _fill(ledger, clock)
    report = ledger.prune(DAY, archives)
    assert report.archive is not None

    rows = list(read_archive(report.archive))

    deliveries = {row.id: row for row in rows if row.table == "deliveries"}
    assert {i: row.body for i, row in deliveries.items()} == {
        stored.sent: stored.bodies[stored.sent],
        stored.duplicate: stored.bodies[stored.duplicate],
    }
    assert deliveries[stored.sent].columns["dedupe_key"] == "k-sent"
    assert deliveries[stored.sent].columns["status"] == "processed"
    assert deliveries[stored.duplicate].columns["status"] == "duplicate"
    assert '"webhook-id":"k-dup"' in deliveries[stored.duplicate].columns["headers"]
    (rejected,) = [row for row in rows if row.table == "rejected_deliveries"]
    assert (rejected.body, rejected.columns["reason"]) == (b"\x00forged", "bad_signature")
    assert report.body_bytes == sum(len(row.body) for row in rows)


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils' sha256sum")
def test_sha256sum_checks_the_archive(ledger: Ledger, clock: FixedClock, archives: Path) -> None:
    _fill(ledger, clock)
    report = ledger.prune(DAY, archives)
    assert report.archive is not None
    checked = subprocess.run(
        ["sha256sum", "-c", f"{report.archive.name}.sha256"],
        cwd=archives,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (checked.returncode, checked.stdout) == (0, f"{report.archive.name}: OK\n")


def test_the_story_stays_readable_and_names_the_archive(
    ledger: Ledger, clock: FixedClock, archives: Path
) -> None:
    stored = _fill(ledger, clock)
    told_before = ledger.story("order-1")
    report = ledger.prune(DAY, archives)
    assert report.archive is not None

    told = ledger.story("order-1")

    assert told is not None
    assert told_before is not None
    rows = {row["delivery_id"]: row for row in told.of(EntryKind.DELIVERY)}
    assert rows[stored.sent]["pruned_into"] == report.archive.name
    assert rows[stored.conflicting]["pruned_into"] is None
    assert told.row == told_before.row
    assert len(told.timeline()) == len(told_before.timeline())


def test_a_dry_run_counts_and_changes_nothing(
    ledger: Ledger, clock: FixedClock, archives: Path, db_rows: Rows
) -> None:
    _fill(ledger, clock)
    before = db_rows("SELECT * FROM deliveries ORDER BY id")

    report = ledger.prune(DAY, archives, dry_run=True)

    assert (report.dry_run, report.archive) == (True, None)
    assert (report.archived_deliveries, report.rejected) == (2, 1)
    assert report.body_bytes == len(b"\xff\xfe{binary \x00 body}") + len(b'{"again": 1}') + 7
    assert db_rows("SELECT * FROM deliveries ORDER BY id") == before
    assert ledger.receiver.count_rejected() == 2
    assert list(archives.glob("payhooks-prune-*")) == []


@pytest.mark.parametrize("batch", [1, 2, 1000])
def test_batches_of_any_size_prune_the_same(
    ledger: Ledger, clock: FixedClock, archives: Path, batch: int
) -> None:
    stored = _fill(ledger, clock)
    report = ledger.prune(DAY, archives, batch=batch)
    assert report.archive is not None
    assert sorted(r.id for r in read_archive(report.archive) if r.table == "deliveries") == [
        stored.sent,
        stored.duplicate,
    ]


def test_nothing_old_enough_writes_no_archive(
    ledger: Ledger, clock: FixedClock, archives: Path
) -> None:
    _fill(ledger, clock)
    report = ledger.prune(timedelta(days=30), archives)
    assert (report.archive, report.archived_deliveries, report.rejected) == (None, 0, 0)
    assert list(archives.iterdir()) == []


def test_an_archive_that_cannot_be_written_drops_nothing(
    ledger: Ledger, clock: FixedClock, archives: Path, db_rows: Rows
) -> None:
    _fill(ledger, clock)
    before = db_rows("SELECT * FROM deliveries ORDER BY id")
    gone = archives / "gone"

    with pytest.raises(ArchiveError) as exc_info:
        ledger.prune(DAY, gone)

    assert exc_info.value.code == "archive_error"
    assert db_rows("SELECT * FROM deliveries ORDER BY id") == before
    assert ledger.receiver.count_rejected() == 2
    assert list(archives.iterdir()) == []


def test_a_pruned_delivery_sent_again_is_still_known_by_its_digest(
    ledger: Ledger, clock: FixedClock, archives: Path
) -> None:
    stored = _fill(ledger, clock)
    ledger.prune(DAY, archives)

    again = ledger.receiver.record_delivery(
        dedupe_key="k-sent", body=stored.bodies[stored.sent], headers={}
    )

    assert (again.id, again.is_new, again.attempts) == (stored.sent, False, 2)
    assert again.status == DeliveryStatus.PROCESSED


def test_restore_puts_every_body_back(
    ledger: Ledger, clock: FixedClock, archives: Path, db_rows: Rows
) -> None:
    stored = _fill(ledger, clock)
    before = db_rows("SELECT id, headers, body FROM deliveries ORDER BY id")
    report = ledger.prune(DAY, archives)
    assert report.archive is not None

    assert ledger.restore_pruned(report.archive) == (2, 3)

    assert db_rows("SELECT id, headers, body FROM deliveries ORDER BY id") == before
    details = ledger.receiver.delivery(stored.sent)
    assert details is not None
    assert (details.pruned_at, details.pruned_into) == (None, None)
    assert ledger.restore_pruned(report.archive) == (0, 3)  # nothing left to restore


def _rewrite(archive: Path, change: Callable[[bytes], bytes]) -> None:
    archive.write_bytes(gzip.compress(change(gzip.decompress(archive.read_bytes())), mtime=0))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda path: path.write_bytes(path.read_bytes()[:-1]), "checksum"),
        (lambda path: Path(f"{path}.sha256").unlink(), "no readable checksum"),
    ],
    ids=["truncated", "no_checksum_file"],
)
def test_a_damaged_archive_is_refused_before_anything_is_restored(
    ledger: Ledger,
    clock: FixedClock,
    archives: Path,
    damage: Callable[[Path], object],
    message: str,
) -> None:
    _fill(ledger, clock)
    report = ledger.prune(DAY, archives)
    assert report.archive is not None
    damage(report.archive)

    with pytest.raises(ArchiveError, match=message):
        ledger.restore_pruned(report.archive)


@pytest.mark.sqlite_only
def test_a_body_that_does_not_match_its_digest_is_refused(
    ledger: Ledger, clock: FixedClock, archives: Path
) -> None:
    _fill(ledger, clock)
    report = ledger.prune(DAY, archives)
    assert report.archive is not None
    _rewrite(report.archive, lambda text: text.replace(b':"eyJ', b':"eyK'))
    digest = hashlib.sha256(report.archive.read_bytes()).hexdigest()
    Path(f"{report.archive}.sha256").write_text(f"{digest}  {report.archive.name}\n")

    with pytest.raises(ArchiveError, match="does not match its SHA-256"):
        list(read_archive(report.archive))


@pytest.mark.parametrize(
    ("older_than", "batch"), [(timedelta(0), 10), (-DAY, 10), (DAY, 0), (DAY, 10001)]
)
def test_bad_arguments_are_refused(
    ledger: Ledger, archives: Path, older_than: timedelta, batch: int
) -> None:
    with pytest.raises(ValueError, match=r"older_than|batch"):
        ledger.prune(older_than, archives, batch=batch)


@pytest.mark.parametrize(
    "change",
    [
        lambda record: record.update(headers="not json {"),
        lambda record: record.pop("headers"),
        lambda record: record.update(headers=None),
        lambda record: record.update(headers='["webhook-id"]'),
        lambda record: record.update(headers='{"webhook-id": 7}'),
        lambda record: record.update(headers=json.dumps({"webhook-id": "x" * 5000})),
        lambda record: record.update(headers=json.dumps({"Webhook-ID": "k"})),
        lambda record: record.update(headers=json.dumps({f"x-{n}": "v" for n in range(17)})),
        lambda record: record.update(headers=json.dumps({"authorization": "Bearer x"})),
    ],
    ids=[
        "not_json",
        "missing",
        "null",
        "not_an_object",
        "not_a_string",
        "too_long",
        "not_lower_case",
        "too_many",
        "not_a_receiver_header",
    ],
)
def test_headers_a_receiver_would_not_store_are_refused_and_nothing_restored(
    ledger: Ledger,
    clock: FixedClock,
    archives: Path,
    change: Callable[[dict[str, Any]], object],
) -> None:
    stored = _fill(ledger, clock)
    report = ledger.prune(DAY, archives)
    assert report.archive is not None
    forge_archive(report.archive, change)

    with pytest.raises(ArchiveError, match="headers are not the few short headers") as exc_info:
        ledger.restore_pruned(report.archive, header_names=RECEIVER_HEADERS)

    assert exc_info.value.code == "archive_error"
    for pruned in (stored.sent, stored.duplicate):
        details = ledger.receiver.delivery(pruned)
        assert details is not None
        assert (details.body, details.headers) == (b"", {})
        assert details.pruned_into == report.archive.name


def test_headers_a_receiver_stores_are_restored_as_stored(
    ledger: Ledger, clock: FixedClock, archives: Path
) -> None:
    stored = _fill(ledger, clock)
    report = ledger.prune(DAY, archives)
    assert report.archive is not None
    spaced = '{ "webhook-id" : "k-sent" }'
    forge_archive(report.archive, lambda record: record.update(headers=spaced))

    assert ledger.restore_pruned(report.archive, header_names=RECEIVER_HEADERS) == (2, 3)

    details = ledger.receiver.delivery(stored.sent)
    assert details is not None
    assert details.headers == {"webhook-id": "k-sent"}


@pytest.mark.sqlite_only
def test_the_archive_and_its_checksum_are_readable_by_their_owner_only(
    ledger: Ledger, clock: FixedClock, archives: Path
) -> None:
    _fill(ledger, clock)
    before = os.umask(0o022)  # a umask that leaves new files readable by everyone
    try:
        report = ledger.prune(DAY, archives)
    finally:
        os.umask(before)
    assert report.archive is not None

    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in archives.iterdir()}

    assert modes == {report.archive.name: 0o600, f"{report.archive.name}.sha256": 0o600}
