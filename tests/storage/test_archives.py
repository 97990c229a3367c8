"""``read_archive`` on crafted archives: whoever can write an archive can rewrite its checksum
file too, so the reader caps what it decompresses instead of trusting the file."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import tracemalloc
from collections.abc import Iterable
from pathlib import Path

import pytest

from payhooks.storage import read_archive
from payhooks.storage.archives import ArchiveError, checksum_path


def _record(row_id: int, body: bytes) -> bytes:
    record = {
        "table": "deliveries",
        "id": row_id,
        "received_at": "2026-05-01T12:00:00Z",
        "headers": "{}",
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "body_base64": base64.b64encode(body).decode("ascii"),
    }
    return json.dumps(record).encode("ascii") + b"\n"


def _craft(path: Path, chunks: Iterable[bytes]) -> Path:
    """An archive of ``chunks`` (written streamed) with a checksum file that matches it."""
    with gzip.open(path, "wb", compresslevel=1) as out:
        for chunk in chunks:
            out.write(chunk)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    checksum_path(path).write_text(f"{digest}  {path.name}\n")
    return path


def test_a_body_over_the_cap_is_refused_even_with_a_matching_checksum(tmp_path: Path) -> None:
    archive = _craft(tmp_path / "big.jsonl.gz", [_record(1, bytes(4096))])

    with pytest.raises(ArchiveError, match=r"Line 1 .* body larger than 1024 bytes") as exc_info:
        list(read_archive(archive, max_body_bytes=1024))

    assert exc_info.value.code == "archive_error"


def test_a_body_at_the_cap_is_read(tmp_path: Path) -> None:
    archive = _craft(tmp_path / "fits.jsonl.gz", [_record(1, b"\xff" * 1024)])

    (row,) = read_archive(archive, max_body_bytes=1024)

    assert row.body == b"\xff" * 1024


def test_one_huge_line_ends_in_archive_error_with_memory_flat(tmp_path: Path) -> None:
    # 64 MiB of one line, no newline anywhere: read whole, it would take that much memory.
    line = (b"x" * (1 << 20) for _ in range(64))
    archive = _craft(tmp_path / "bomb.jsonl.gz", line)

    tracemalloc.start()
    try:
        with pytest.raises(ArchiveError, match="longer than a record"):
            list(read_archive(archive, max_body_bytes=3 << 20))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak < 16 << 20


def test_the_default_cap_refuses_a_line_far_over_any_body(tmp_path: Path) -> None:
    archive = _craft(tmp_path / "default.jsonl.gz", (b"x" * (1 << 20) for _ in range(32)))

    with pytest.raises(ArchiveError, match="longer than a record"):
        list(read_archive(archive))


def test_more_than_the_total_cap_decompressed_is_refused(tmp_path: Path) -> None:
    records = [_record(row_id, bytes(300)) for row_id in range(1, 11)]
    archive = _craft(tmp_path / "many.jsonl.gz", records)
    total = sum(map(len, records))

    assert len(list(read_archive(archive, max_total_bytes=total))) == 10
    with pytest.raises(ArchiveError, match=f"more than {total - 1} bytes decompressed"):
        list(read_archive(archive, max_total_bytes=total - 1))
