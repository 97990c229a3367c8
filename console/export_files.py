"""The console's exports as files: any worker process can show one, whichever writes it.

An export of the finance page's rows can take minutes (a million rows is tens of seconds of
CPU), longer than a WSGI server lets a request live, so it is written outside the request
(:mod:`.export_writer`) and its state is kept in files, never in memory: gunicorn runs several
worker processes, and the one that serves an export's page or its download is seldom the one
writing it. Each export is, in the console's export folder:

- ``<id>.csv.partial`` while it is written, renamed ``<id>.csv`` once whole;
- ``<id>.json``: its :class:`ExportRecord`, replaced whole (written beside, then renamed) when
  it starts, every :data:`HEARTBEAT_SECONDS` while it runs (the heartbeat, with the rows so
  far) and when it ends.

A process that dies while writing (a worker killed, a restart) leaves a record that says
running and whose heartbeat stops: after :data:`STALE_AFTER` it is shown as failed, and the
next export's start sweeps it. The folder is bounded: that sweep deletes exports started more
than :data:`MAX_AGE` ago and keeps the newest :data:`MAX_KEPT` finished ones (the one
starting counted); a person runs one export at a time, and the folder :data:`MAX_RUNNING` at
once (:class:`ExportBusy`). Starting is one short
critical section under an exclusive ``flock`` on ``<folder>/.lock``, so two processes never
both let the same person in.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the process's own lock only
    fcntl = None  # type: ignore[assignment]

_FLOCK: Callable[[int, int], None] | None = None if fcntl is None else fcntl.flock

__all__ = [
    "EXPORT_ID",
    "HEARTBEAT_SECONDS",
    "MAX_AGE",
    "MAX_KEPT",
    "MAX_RUNNING",
    "STALE_AFTER",
    "STOPPED",
    "ExportBusy",
    "ExportFolder",
    "ExportRecord",
    "ExportState",
]

#: An export's id: 20 random hex digits, in its URL and its files' names.
EXPORT_ID: Final = re.compile(r"[0-9a-f]{20}")
#: How often a running export's record is rewritten with its rows so far.
HEARTBEAT_SECONDS: Final = 5.0
#: A running export whose heartbeat is older than this has lost its process.
STALE_AFTER: Final = timedelta(minutes=1)
#: Exports started longer ago than this are deleted when a new one starts.
MAX_AGE: Final = timedelta(days=1)
#: The most finished exports the folder keeps (beside the running ones).
MAX_KEPT: Final = 20
#: The most exports running at once, across the processes sharing the folder.
MAX_RUNNING: Final = 3
#: What a stale export says instead of running.
STOPPED: Final = "stopped: the process writing it ended"


class ExportState(StrEnum):
    """Where an export stands."""

    RUNNING = "running"
    READY = "ready"
    FAILED = "failed"


class ExportBusy(Exception):
    """An export that may not start now (429 ``console_busy``): one sentence why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class ExportRecord:
    """One export's metadata, as its ``<id>.json`` keeps it."""

    id: str
    #: Who started it (the grant's name) and their role then.
    who: str
    role: str
    #: The finance page's arguments that select its rows, as its URL carries them.
    filter: Mapping[str, Any]
    started_at: datetime
    #: The last time its writer said it was alive.
    heartbeat_at: datetime
    state: ExportState = ExportState.RUNNING
    #: Rows written: so far while it runs, all of them once ready.
    rows: int = 0
    #: The file's size and SHA-256 (hex), once ready.
    bytes: int | None = None
    sha256: str | None = None
    finished_at: datetime | None = None
    #: Why it failed, one sentence.
    error: str | None = None

    def seen_at(self, now: datetime) -> ExportRecord:
        """This record as a page shows it at ``now``: a running one whose heartbeat stopped
        more than :data:`STALE_AFTER` ago is failed (:data:`STOPPED`)."""
        if self.state is ExportState.RUNNING and now - self.heartbeat_at > STALE_AFTER:
            return replace(self, state=ExportState.FAILED, error=STOPPED)
        return self

    def to_json(self) -> str:
        values = asdict(self)
        values["filter"] = dict(self.filter)
        for name in ("started_at", "heartbeat_at", "finished_at"):
            moment = values[name]
            values[name] = None if moment is None else moment.isoformat()
        return json.dumps(values, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ExportRecord:
        """:raises ValueError: text that is not such a record (a file changed by hand)."""
        try:
            values = json.loads(text)
            values["state"] = ExportState(values["state"])
            for name in ("started_at", "heartbeat_at", "finished_at"):
                if values[name] is not None:
                    values[name] = datetime.fromisoformat(values[name])
                    if values[name].tzinfo is None:
                        raise ValueError(f"{name} has no offset")
            record = cls(**values)
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as err:
            raise ValueError(f"not an export record: {err}") from err
        if EXPORT_ID.fullmatch(record.id) is None or not isinstance(record.filter, dict):
            raise ValueError("not an export record")
        return record


class ExportFolder:
    """The folder one console keeps its exports in; see the module docstring.

    :param path: the folder; made (mode 0700: the files hold every payment's row) when the
        first export starts.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()  # flock excludes processes; this, this one's threads

    def __repr__(self) -> str:
        return f"<ExportFolder {str(self.path)!r}>"

    def csv_path(self, export_id: str) -> Path:
        """Where an export's whole file is, once ready."""
        return self.path / f"{export_id}.csv"

    def partial_path(self, export_id: str) -> Path:
        """Where an export's file is while it is written."""
        return self.path / f"{export_id}.csv.partial"

    def _record_path(self, export_id: str) -> Path:
        return self.path / f"{export_id}.json"

    def record(self, export_id: str) -> ExportRecord | None:
        """The export's record, or None: no such export, or its record cannot be read."""
        if EXPORT_ID.fullmatch(export_id) is None:
            return None
        try:
            return ExportRecord.from_json(self._record_path(export_id).read_text("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return None

    def records(self) -> list[ExportRecord]:
        """Every readable record, newest first."""
        try:
            names = [entry.name for entry in os.scandir(self.path)]
        except FileNotFoundError:
            return []
        found = [
            record
            for name in names
            if name.endswith(".json") and (record := self.record(name[:-5])) is not None
        ]
        return sorted(found, key=lambda record: record.started_at, reverse=True)

    def save(self, record: ExportRecord) -> None:
        """Replace the record's file whole: a reader sees the old one or the new one."""
        target = self._record_path(record.id)
        temporary = target.with_name(f"{target.name}.{secrets.token_hex(4)}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with open(descriptor, "w", encoding="utf-8") as handle:
                handle.write(record.to_json())
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    def start(
        self, *, who: str, role: str, shown_filter: Mapping[str, Any], now: datetime
    ) -> ExportRecord:
        """Record a new export as running, after sweeping the folder; its writer is the
        caller's to start.

        :raises ExportBusy: ``who`` already runs one, or :data:`MAX_RUNNING` run.
        :raises OSError: the folder cannot be made or written.
        """
        with self._exclusive():
            records = self.sweep(now)
            running = [record for record in records if record.state is ExportState.RUNNING]
            if any(record.who == who for record in running):
                raise ExportBusy(
                    "You already have an export running: wait for it to be ready (its page "
                    "says when) before you start another."
                )
            if len(running) >= MAX_RUNNING:
                raise ExportBusy(
                    f"{len(running)} exports are running already; try again when one is ready."
                )
            record = ExportRecord(
                id=secrets.token_hex(10),
                who=who,
                role=role,
                filter=dict(shown_filter),
                started_at=now,
                heartbeat_at=now,
            )
            self.save(record)
            return record

    def sweep(self, now: datetime) -> list[ExportRecord]:
        """Mark stale exports failed and delete their partial files; delete the finished ones
        started more than :data:`MAX_AGE` ago, the oldest finished ones beyond
        :data:`MAX_KEPT` - 1 (room for the one starting) and leftovers no record names; return
        the records kept. A running export is never deleted: its writer is still at work."""
        kept: list[ExportRecord] = []
        finished = 0
        for record in self.records():  # newest first
            seen = record.seen_at(now)
            if seen.state is not record.state:
                self.save(seen)
                self.partial_path(record.id).unlink(missing_ok=True)
            if seen.state is ExportState.RUNNING:  # alive: its writer still needs its files
                kept.append(seen)
                continue
            if now - seen.started_at > MAX_AGE or finished >= MAX_KEPT - 1:
                self.delete(seen.id)
                continue
            finished += 1
            kept.append(seen)
        self._sweep_leftovers({record.id for record in kept}, now)
        return kept

    def delete(self, export_id: str) -> None:
        """Remove an export's files (its record last, so it is never a file without one)."""
        self.csv_path(export_id).unlink(missing_ok=True)
        self.partial_path(export_id).unlink(missing_ok=True)
        self._record_path(export_id).unlink(missing_ok=True)

    def _sweep_leftovers(self, known: set[str], now: datetime) -> None:
        """Files no kept record names (a record deleted by hand, a temporary record of a
        process that died while writing it), once older than :data:`STALE_AFTER`: a younger
        one may be another process's, being written now."""
        oldest = now.timestamp() - STALE_AFTER.total_seconds()
        with os.scandir(self.path) as entries:
            for entry in entries:
                owner = entry.name.split(".", 1)[0]
                if entry.name == ".lock" or owner in known or not entry.is_file():
                    continue
                with suppress(OSError):
                    if entry.stat().st_mtime < oldest:
                        os.unlink(entry.path)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """The folder's lock, for starting an export: this process's threads and every other
        process that shares the folder wait."""
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._lock:
            descriptor = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                if _FLOCK is not None:  # without fcntl (Windows), this process's lock only
                    _FLOCK(descriptor, fcntl.LOCK_EX)
                yield
            finally:
                os.close(descriptor)  # releases the flock
