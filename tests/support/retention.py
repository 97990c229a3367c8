"""Old deliveries for ``payhooks prune`` to prune: for the load tests and ``bench/prune.py``;
and archives rewritten as an attacker who can write them would.

Recorded through the ledger as the receiver records them (a delivery, its outcome, the
payment's row and owed signals), dated days back with a fixed clock, then every signal owed
marked sent: each one is a finished delivery old enough to prune. Many per transaction, so a
large ledger fills in reasonable time.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from payhooks.storage import Ledger
from tests.support.cli import notification
from tests.support.factories import FixedClock, make_outcome

__all__ = ["fill_old_deliveries", "forge_archive", "old_body"]


def old_body(number: int, size: int) -> bytes:
    """Old delivery ``number``'s body: a notification padded with spaces to ``size`` bytes,
    ending in a byte that is not UTF-8 (an archive must keep bytes, not text)."""
    body = notification(f"old-{number}", f"old-tx-{number}")
    return body + b" " * max(0, size - len(body) - 1) + b"\xff"


def fill_old_deliveries(
    database: Path | str,
    count: int,
    *,
    days_ago: int = 30,
    body_size: int = 1024,
    per_transaction: int = 500,
    progress: Callable[[int], None] | None = None,
) -> list[int]:
    """Record ``count`` finished deliveries received ``days_ago`` days ago; their ids."""
    clock = FixedClock(datetime.now(UTC) - timedelta(days=days_ago))
    ids: list[int] = []
    with Ledger(database, clock=clock, synchronous="NORMAL") as ledger:
        for start in range(0, count, per_transaction):
            with ledger.transaction():
                for number in range(start, min(count, start + per_transaction)):
                    delivery = ledger.receiver.record_delivery(
                        dedupe_key=f"old-{number}",
                        body=old_body(number, body_size),
                        headers={"webhook-id": f"old-{number}"},
                    )
                    outcome = make_outcome(
                        transaction_id=f"old-tx-{number}", external_identifier=f"old-{number}"
                    )
                    ledger.receiver.record_outcome(outcome, delivery_id=delivery.id)
                    ids.append(delivery.id)
            while claimed := ledger.signals.claim(lease=timedelta(minutes=5), limit=1000):
                ledger.signals.mark_sent(claimed)
            if progress is not None:
                progress(len(ids))
    return ids


def forge_archive(archive: Path, change: Callable[[dict[str, Any]], object]) -> None:
    """Rewrite every delivery's record of ``archive`` with ``change``, and its checksum file to
    match: what anyone who can write the archive can do."""
    records = [json.loads(line) for line in gzip.decompress(archive.read_bytes()).splitlines()]
    for record in records:
        if record["table"] == "deliveries":
            change(record)
    text = "".join(json.dumps(record) + "\n" for record in records)
    archive.write_bytes(gzip.compress(text.encode("ascii"), mtime=0))
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    Path(f"{archive}.sha256").write_text(f"{digest}  {archive.name}\n")
