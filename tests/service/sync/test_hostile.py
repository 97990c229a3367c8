"""A hostile service on loopback: its size, pace and shapes are bounded, refused with one
sentence and a stable code, and never leave the sync unable to go on."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from bench.hostile_service import HostileService
from payhooks.service import MalformedResponseError, SyncInterruptedError, TransportError
from payhooks.service.client import RetryPolicy, ServiceClient
from payhooks.service.sync import sync_transactions
from payhooks.storage import DriftKind, Ledger
from payhooks.storage.sync_rows import SyncStatus


@pytest.fixture
def start_hostile() -> Iterator[Callable[..., HostileService]]:
    started: list[HostileService] = []

    def start(behaviour: str, **options: float) -> HostileService:
        started.append(HostileService(behaviour, **options))  # type: ignore[arg-type]
        return started[-1]

    yield start
    for service in started:
        service.stop()


@pytest.fixture
def hostile_client(
    start_hostile: Callable[..., HostileService],
) -> Iterator[Callable[..., ServiceClient]]:
    made: list[ServiceClient] = []

    def make(behaviour: str, timeout: float = 5.0, **options: float) -> ServiceClient:
        service = start_hostile(behaviour, **options)
        made.append(
            ServiceClient(
                service.url,
                access_token="token",
                merchant_account_id="merchant",
                timeout=timeout,
                retry=RetryPolicy(attempts=1),
            )
        )
        return made[-1]

    yield make
    for client in made:
        client.close()


def test_a_gzip_bomb_is_refused_past_the_cap_decoded_with_memory_flat(
    hostile_client: Callable[..., ServiceClient],
) -> None:
    client = hostile_client("gzip-bomb", bomb_mib=16)
    tracemalloc.start()
    try:
        with pytest.raises(MalformedResponseError) as exc_info:
            next(client.transaction_pages())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert exc_info.value.code == "response_too_large"
    assert "over 1048576 bytes" in exc_info.value.message
    assert peak < 4 * 1024 * 1024


def test_a_body_trickled_byte_by_byte_ends_at_the_tries_timeout(
    hostile_client: Callable[..., ServiceClient],
) -> None:
    client = hostile_client("trickle", timeout=1.0, trickle_seconds=0.1)
    started = time.monotonic()
    with pytest.raises(TransportError) as exc_info:
        next(client.transaction_pages())
    assert exc_info.value.code == "deadline_exceeded"
    assert time.monotonic() - started < 6  # the whole page takes over 15 s to arrive


@pytest.mark.parametrize(
    ("behaviour", "code"),
    [("deep", "response_too_deep"), ("huge-cursor", "bad_cursor")],
)
def test_hostile_shapes_are_one_sentence_with_a_stable_code(
    hostile_client: Callable[..., ServiceClient], behaviour: str, code: str
) -> None:
    with pytest.raises(MalformedResponseError) as exc_info:
        next(iter(hostile_client(behaviour).transaction_pages()))
    assert exc_info.value.code == code
    assert exc_info.value.message.endswith(".")
    assert ". " not in exc_info.value.message


def test_a_cursor_refused_is_never_saved_and_the_error_says_resuming_cannot_help(
    hostile_client: Callable[..., ServiceClient], ledger: Ledger
) -> None:
    client = hostile_client("huge-cursor")
    with pytest.raises(SyncInterruptedError) as exc_info:
        sync_transactions(client, ledger)
    assert exc_info.value.resumable is False
    assert "--restart" in exc_info.value.message
    run = ledger.service.last_sync()
    assert run is not None
    assert (run.pages, run.next_cursor) == (0, None)


def test_endless_cursors_stop_at_max_pages_and_the_next_sync_resumes(
    hostile_client: Callable[..., ServiceClient], ledger: Ledger
) -> None:
    client = hostile_client("endless")
    with pytest.raises(SyncInterruptedError) as exc_info:
        sync_transactions(client, ledger, max_pages=3)
    assert exc_info.value.resumable is True
    assert exc_info.value.__cause__.code == "too_many_pages"  # type: ignore[union-attr]
    assert "the next sync resumes there" in exc_info.value.message
    with pytest.raises(SyncInterruptedError) as again:
        sync_transactions(client, ledger, max_pages=2)
    assert again.value.report.resumed
    run = ledger.service.last_sync()
    assert run is not None
    assert (run.pages, run.next_cursor) == (5, "page-5")


def test_a_slow_endless_service_stops_at_the_time_limit_and_the_next_sync_resumes(
    hostile_client: Callable[..., ServiceClient], ledger: Ledger
) -> None:
    client = hostile_client("endless", pause_seconds=0.05)
    started = time.monotonic()
    with pytest.raises(SyncInterruptedError) as exc_info:
        sync_transactions(client, ledger, max_duration=timedelta(seconds=0.3), max_pages=200)
    assert time.monotonic() - started < 5  # 200 pages would take 10 s
    assert exc_info.value.resumable is True
    assert exc_info.value.__cause__.code == "run_time_limit"  # type: ignore[union-attr]
    assert "past its time limit of 0.3 s); what it recorded is kept, and the next sync " in (
        exc_info.value.message
    )
    first = ledger.service.last_sync()
    assert first is not None
    assert first.status is SyncStatus.INTERRUPTED
    assert first.error is not None
    assert first.error.endswith("past its time limit of 0.3 s")
    assert 1 <= first.pages < 200
    with pytest.raises(SyncInterruptedError) as again:
        sync_transactions(client, ledger, max_duration=timedelta(seconds=0.3), max_pages=200)
    assert again.value.report.resumed
    run = ledger.service.last_sync()
    assert run is not None
    assert run.id == first.id
    assert run.pages > first.pages
    assert run.next_cursor == f"page-{run.pages}"


@pytest.mark.parametrize("kept", [0, 10])
def test_fresh_unknown_statuses_are_named_up_to_the_bound_and_the_rest_counted(
    hostile_client: Callable[..., ServiceClient], ledger: Ledger, kept: int
) -> None:
    client = hostile_client("fresh-statuses", fresh_pages=3)  # 300 items, 300 statuses
    report = sync_transactions(client, ledger, max_unknown_statuses=kept)
    assert report.items == 300
    assert sorted(report.unknown_statuses) == [
        f"made-up-{n:010}".ljust(150, ".") for n in range(kept)
    ]
    assert set(report.unknown_statuses.values()) <= {1}
    assert report.other_unknown == 300 - kept


def test_an_item_the_ledger_cannot_store_is_drift_and_the_sync_goes_on(
    hostile_client: Callable[..., ServiceClient], ledger: Ledger
) -> None:
    report = sync_transactions(hostile_client("bad-item"), ledger)
    assert report.drift[DriftKind.UNSTORABLE_ITEM] == 2
    assert report.items == 4
    rows = [row for row in ledger.service.sync_drift() if row.kind is DriftKind.UNSTORABLE_ITEM]
    # What can be stored names the item; the value the ledger refused is never kept.
    assert {(row.transaction_id, row.external_identifier) for row in rows} == {
        (None, "order-3"),
        ("tx-2", ""),
    }
    assert {row.kind for row in ledger.service.sync_drift()} == {
        DriftKind.UNEXPECTED,
        DriftKind.UNSTORABLE_ITEM,
    }
