"""An export's writer: a thread of the process that started it, streaming rows into its file.

The request that starts an export returns at once; this thread reads the rows on a connection
of its own (:meth:`payhooks.storage.FinanceBook.rows` with ``connection_apart``: on
PostgreSQL a connection opened for the export and closed after it, never one of the pool the
receiver answers from), writes each as the CSV line ``payhooks reconcile --format csv``
writes (:mod:`payhooks.receiver.report_csv`), hashing the bytes as they go, into
``<id>.csv.partial``; flushed to disk, the file is renamed ``<id>.csv`` and the record says
ready, with the row count, the size and the SHA-256. Meanwhile a second small thread rewrites
the record every :data:`~.export_files.HEARTBEAT_SECONDS` with the rows so far, so a page in
any process sees it alive; when the process dies both stop, and the record goes stale.

Memory stays flat: a row at a time from the cursor, and at most :data:`CHUNK_BYTES` of lines
before they are written.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime
from typing import Final

from payhooks.console.export_files import (
    HEARTBEAT_SECONDS,
    ExportFolder,
    ExportRecord,
    ExportState,
)
from payhooks.receiver.ledgers import LedgerPool
from payhooks.receiver.report_csv import csv_header, csv_line
from payhooks.storage import ReconciliationRow, StorageError
from payhooks.storage.reads import FinanceFilter

__all__ = ["CHUNK_BYTES", "start_writer", "write_export"]

#: How many bytes of lines are gathered before they are written and hashed.
CHUNK_BYTES: Final = 1 << 16

logger = logging.getLogger("payhooks")


class _Progress:
    """The rows written so far, read by the heartbeat; ``done`` stops it."""

    def __init__(self) -> None:
        self.rows = 0
        self.done = threading.Event()
        #: Held while the record is saved: the heartbeat never saves over the final record.
        self.saving = threading.Lock()


def _heartbeat(
    folder: ExportFolder, record: ExportRecord, progress: _Progress, clock: Callable[[], datetime]
) -> None:
    while not progress.done.wait(HEARTBEAT_SECONDS):
        with progress.saving:
            if progress.done.is_set():
                return
            try:
                folder.save(replace(record, rows=progress.rows, heartbeat_at=clock()))
            except OSError as err:  # a full disk: the writer will fail on it too
                logger.warning("payhooks console: export %s heartbeat failed: %s", record.id, err)


def write_export(
    folder: ExportFolder,
    record: ExportRecord,
    rows: Callable[[], Iterator[ReconciliationRow]],
    clock: Callable[[], datetime],
) -> ExportRecord:
    """Write ``rows()`` as the export's CSV and its record as ready; on a failure, remove the
    partial file and record why in one sentence. Returns the final record; raises nothing
    (it runs on a thread of its own, where nobody would catch it)."""
    progress = _Progress()
    beat = threading.Thread(
        target=_heartbeat,
        args=(folder, record, progress, clock),
        name=f"payhooks-export-heartbeat-{record.id}",
        daemon=True,
    )
    beat.start()
    partial = folder.partial_path(record.id)
    try:
        size, digest = _write_file(partial, rows(), progress)
        os.replace(partial, folder.csv_path(record.id))
        final = replace(
            record,
            state=ExportState.READY,
            rows=progress.rows,
            bytes=size,
            sha256=digest,
            finished_at=clock(),
            heartbeat_at=clock(),
        )
    except StorageError as err:
        final = _failed(record, progress, clock, f"The ledger could not be read: {err.message}")
    except OSError as err:
        final = _failed(
            record, progress, clock, f"The file could not be written: {err.strerror or err}."
        )
    except Exception:
        logger.exception("payhooks console: export %s failed", record.id)
        final = _failed(record, progress, clock, "The export failed; the error is logged.")
    if final.state is ExportState.FAILED:
        partial.unlink(missing_ok=True)
    with progress.saving:
        progress.done.set()
        try:
            folder.save(final)
        except OSError as err:  # the record goes stale, and is shown failed
            logger.error(
                "payhooks console: export %s: its record cannot be saved: %s", record.id, err
            )
    return final


def _failed(
    record: ExportRecord, progress: _Progress, clock: Callable[[], datetime], message: str
) -> ExportRecord:
    now = clock()
    return replace(
        record,
        state=ExportState.FAILED,
        rows=progress.rows,
        error=message,
        finished_at=now,
        heartbeat_at=now,
    )


def _write_file(
    path: os.PathLike[str], rows: Iterator[ReconciliationRow], progress: _Progress
) -> tuple[int, str]:
    """Write the header and ``rows`` as CSV lines to a new file at ``path`` (mode 0600),
    flushed to disk; its size and SHA-256."""
    digest = hashlib.sha256()
    size = 0
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(descriptor, "wb") as out:

        def write(chunk: list[bytes]) -> int:
            data = b"".join(chunk)
            out.write(data)
            digest.update(data)
            return len(data)

        chunk = [csv_header().encode()]
        pending = len(chunk[0])
        for row in rows:
            line = csv_line(row).encode()
            chunk.append(line)
            pending += len(line)
            progress.rows += 1
            if pending >= CHUNK_BYTES:
                size += write(chunk)
                chunk, pending = [], 0
        size += write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return size, digest.hexdigest()


def start_writer(
    folder: ExportFolder,
    record: ExportRecord,
    ledgers: LedgerPool,
    wanted: FinanceFilter,
    clock: Callable[[], datetime],
) -> threading.Thread:
    """Start the export's writer on a daemon thread (a process that exits does not wait for
    it: its record goes stale). The thread opens its own ledger from ``ledgers`` and closes it
    when done."""

    def run() -> None:
        try:
            write_export(
                folder,
                record,
                lambda: ledgers.get().finance.rows(wanted, connection_apart=True),
                clock,
            )
        finally:
            ledgers.close()

    thread = threading.Thread(target=run, name=f"payhooks-export-{record.id}", daemon=True)
    thread.start()
    return thread
