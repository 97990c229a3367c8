"""A bounded slowloris on loopback, and ordinary notifications timed while it runs.

Issue 13.3: four slow connections held gunicorn's four sync workers, and every notification
behind them waited for the worker timeout. :class:`Slowloris` reproduces that, and nothing
more: ``connections`` sockets to ``127.0.0.1`` only, each trickling one request a byte every
``interval`` seconds, half of them in the headers (the classic slowloris) and half in a body
whose ``Content-Length`` promises more (a slow POST), so a server that buffers headers but not
bodies is caught too. Every loop is bounded: a connection the server drops is reopened after
a pause, at most ``max_opens`` times per slot, and everything stops at ``duration`` seconds or
at :meth:`Slowloris.stop`, whichever comes first; the context manager always stops and joins.

:func:`probe` sends ordinary signed notifications meanwhile, each on a fresh connection (as a
service that does not keep connections alive would), on a fixed schedule that does not wait
for the answers (a stalled server does not slow the sender down), and records for each one its
latency or that it did not complete within ``timeout``.
"""

from __future__ import annotations

import http.client
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType

__all__ = ["NOTIFY", "Job", "ProbeResult", "Slowloris", "probe"]

NOTIFY = "/payhooks/notifications"

#: One request to send: the body and its signed headers.
Job = tuple[bytes, dict[str, str]]

# The slow body's promised length: far more bytes than a bounded run trickles, well under the
# receiver's 64 KiB cap (so nothing refuses it for its size before reading it).
_SLOW_BODY_LENGTH = 4096
# A header line the trickle repeats: short lines, so no server refuses it for a line's length
# before the minute is out.
_HEADER_LINE = b"X-Slow: a\r\n"


@dataclass
class SlowStats:
    """What the slow connections did: how often they were opened, and dropped by the server."""

    opened: int = 0
    dropped: int = 0
    refused: int = 0
    bytes_sent: int = 0


class Slowloris:
    """``connections`` slow connections to ``127.0.0.1:port``, bounded in count and time.

    :param port: the loopback port to trickle to.
    :param connections: how many slow connections at once.
    :param interval: seconds between two bytes on one connection.
    :param duration: seconds after which every connection stops, whatever else happens.
    :param max_opens: how many times each slot may open a connection (the first included).
    """

    def __init__(
        self,
        port: int,
        connections: int,
        *,
        interval: float = 1.0,
        duration: float = 60.0,
        max_opens: int = 20,
    ) -> None:
        self.port = port
        self.connections = connections
        self.interval = interval
        self.duration = duration
        self.max_opens = max_opens
        self.stats = SlowStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._deadline = 0.0
        self._open = 0

    @property
    def open_now(self) -> int:
        """How many slow connections are open (connected, not yet dropped) at this moment."""
        with self._lock:
            return self._open

    def start(self) -> Slowloris:
        self._deadline = time.monotonic() + self.duration
        for slot in range(self.connections):
            thread = threading.Thread(
                target=self._slot, args=(slot % 2 == 1,), name=f"slow-{slot}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        return self

    def wait_until_open(self, *, timeout: float = 10.0) -> bool:
        """Wait until every slot has a connection open; whether they all did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.open_now >= self.connections:
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.interval + 5.0)

    def __enter__(self) -> Slowloris:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _running(self) -> bool:
        return not self._stop.is_set() and time.monotonic() < self._deadline

    def _count(self, **changes: int) -> None:
        with self._lock:
            for name, change in changes.items():
                setattr(self.stats, name, getattr(self.stats, name) + change)

    def _slot(self, slow_body: bool) -> None:
        """One slot: open a connection, trickle until dropped or told to stop, reopen."""
        for _ in range(self.max_opens):
            if not self._running():
                return
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            except OSError:
                self._count(refused=1)
                self._stop.wait(0.5)
                continue
            self._count(opened=1)
            with self._lock:
                self._open += 1
            try:
                self._trickle(sock, slow_body)
            finally:
                with self._lock:
                    self._open -= 1
                sock.close()
            self._stop.wait(0.2)  # a pause before reopening: bounded, and not a flood

    def _trickle(self, sock: socket.socket, slow_body: bool) -> None:
        """Send the start of a request at once, then a byte each ``interval``; return when
        the server drops the connection or the run ends."""
        start = f"POST {NOTIFY} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n".encode()
        if slow_body:
            start += (
                f"Content-Type: application/json\r\nContent-Length: {_SLOW_BODY_LENGTH}\r\n\r\n"
            ).encode()
            trickle = b"{" + b" " * (_SLOW_BODY_LENGTH - 1)
        else:
            trickle = _HEADER_LINE * (_SLOW_BODY_LENGTH // len(_HEADER_LINE))
        sock.setblocking(False)
        try:
            sock.send(start)
            self._count(bytes_sent=len(start))
            for index in range(len(trickle)):
                if self._stop.wait(self.interval) or not self._running():
                    return
                if self._dropped(sock):
                    return
                sock.send(trickle[index : index + 1])
                self._count(bytes_sent=1)
        except OSError:
            self._count(dropped=1)

    def _dropped(self, sock: socket.socket) -> bool:
        """Whether the server closed (or answered and will close) the connection."""
        try:
            sock.recv(4096)
        except BlockingIOError:
            return False
        except OSError:
            self._count(dropped=1)
            return True
        # An answer (a 408, a 400) or the end of the stream (``b""``): the server let go.
        self._count(dropped=1)
        return True


@dataclass
class ProbeResult:
    """Ordinary notifications sent during a run: latencies of those that completed in time,
    and how many did not."""

    timeout: float
    latencies: list[float] = field(default_factory=list)
    late: int = 0
    statuses: Counter[int] = field(default_factory=Counter)

    @property
    def sent(self) -> int:
        return len(self.latencies) + self.late

    def percentile(self, fraction: float) -> float:
        """The ``fraction`` quantile of every probe's latency, a late one counting as at least
        ``timeout`` (so a run where most are late cannot show a small p99)."""
        ordered = sorted([*self.latencies, *[self.timeout] * self.late])
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]

    @property
    def worst(self) -> float:
        return self.timeout if self.late else max(self.latencies, default=0.0)

    def summary(self) -> str:
        """``p50 .. ms  p99 .. ms  max .. ms  late N of M`` (a late one shows as ``>``)."""
        if not self.sent:
            return "no probes sent"
        p50 = statistics.median(sorted([*self.latencies, *[self.timeout] * self.late]))
        over = ">" if self.late else ""
        return (
            f"p50 {p50 * 1000:7.1f} ms  p99 {self.percentile(0.99) * 1000:7.1f} ms  "
            f"max {over}{self.worst * 1000:.0f} ms  "
            f"not within {self.timeout:g} s: {self.late} of {self.sent}"
        )


def _send_one(port: int, job: Job, timeout: float) -> tuple[float | None, int]:
    """Send one notification on a fresh connection: (latency or ``None`` if late, status)."""
    body, headers = job
    began = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", NOTIFY, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        status = response.status
    except (OSError, http.client.HTTPException):
        return None, 0
    finally:
        conn.close()
    elapsed = time.perf_counter() - began
    return (elapsed if elapsed <= timeout else None), status


def probe(port: int, jobs: Sequence[Job], *, rate: float, timeout: float = 5.0) -> ProbeResult:
    """Send ``jobs`` to ``127.0.0.1:port`` at ``rate`` per second, each with ``timeout``.

    The schedule is fixed: a late answer does not delay the next notification. At most
    ``rate * timeout`` (plus a few) are in flight, so the run ends within about
    ``len(jobs) / rate + timeout`` seconds whatever the server does.
    """
    result = ProbeResult(timeout)
    lock = threading.Lock()
    in_flight = max(4, int(rate * timeout) + 4)

    def one(job: Job) -> None:
        latency, status = _send_one(port, job, timeout)
        with lock:
            if latency is None:
                result.late += 1
            else:
                result.latencies.append(latency)
            result.statuses[status] += 1

    with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="probe") as pool:
        start = time.monotonic()
        for index, job in enumerate(jobs):
            delay = start + index / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(one, job)
    return result
