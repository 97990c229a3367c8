"""The creation record: attempts and their ends, kept in a file across clients."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from payhooks.service.client import CreationLog, CreationState


def test_attempts_are_kept_in_the_file_across_logs(tmp_path: Path) -> None:
    path = tmp_path / "creations.db"
    log = CreationLog(path)
    first = log.begin("order-1", "transaction", None)
    log.finish(first, CreationState.REFUSED, http_status=400, error_code="invalid_request")
    second = log.begin("order-1", "transaction", None)
    log.close()

    reopened = CreationLog(path)
    latest = reopened.latest("order-1")
    assert latest is not None
    assert latest.id == second
    assert latest.state is CreationState.SENDING  # a crash mid-call leaves it visible
    assert [a.state for a in reopened.attempts(CreationState.REFUSED)] == [CreationState.REFUSED]
    assert reopened.latest("order-2") is None
    reopened.close()


def test_times_are_aware() -> None:
    with closing(CreationLog()) as log:
        attempt = log.begin("sub-1", "subscription", "key-1")
        log.finish(attempt, CreationState.CREATED, service_id="s-1")
        (row,) = log.attempts()
    assert row.started_at.utcoffset() is not None
    assert row.finished_at is not None
    assert row.finished_at.utcoffset() is not None
    assert row.idempotency_key == "key-1"
