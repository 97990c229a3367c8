"""What a merchant's tests need: a test client that behaves as a WSGI server does, and the
replay sender, which signs JSON bodies and POSTs them to a receiver over real HTTP.

The receiver answers the service first and runs the signals' receivers once the response is
closed (``response.call_on_close``), as a server closes it after writing it. Flask's test client
leaves a response open until the test closes it, so a test would never see its receivers run.
:meth:`payhooks.receiver.PayHooks.init_app` makes :class:`TestClient` the app's
``test_client_class`` (unless the app has one of its own), so ``app.test_client()`` closes each
response once it is read, and a test sees the receivers' work as soon as ``post`` returns.

``payhooks replay`` and ``payhooks demo`` send with :func:`replay`, and so can a test or a load
generator::

    from payhooks.receiver.testing import load_payloads, replay
    from payhooks.verify import get_signer

    report = replay(
        "http://127.0.0.1:8000/payhooks/notifications",
        load_payloads(["sample_payloads"]),
        get_signer("standard-webhooks", "whsec_..."),
        repeat=100,
        concurrency=8,
    )
    print(report.counts)  # Counter({'200 processed': 7, '200 duplicate': 693, ...})

Each delivery is signed just before it is sent (a fresh timestamp, and a fresh ``webhook-id``
unless ``same_id``), as the service would sign a retry. Sending uses the standard library
(:mod:`http.client`) with one keep-alive connection per worker thread: no dependency beyond
payhooks' own.
"""

from __future__ import annotations

import http.client
import json
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, Final
from urllib.parse import urlsplit

from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from payhooks.verify import Signer

__all__ = [
    "USER_AGENT",
    "Connection",
    "Payload",
    "ReplayError",
    "ReplayInterrupted",
    "ReplayReport",
    "ReplayResult",
    "TestClient",
    "load_payloads",
    "replay",
    "send_signed",
]

#: The ``User-Agent`` of every replayed delivery, so a receiver's log tells them apart.
USER_AGENT: Final = "payhooks-replay/1"

#: How much of each answer a result keeps (enough for the error body).
_KEPT_RESPONSE_BYTES: Final = 4096

# Failures of a kept-alive connection that the server closed while it sat idle: the request
# never reached the application, so sending it once more on a new connection is safe (and a
# receiver deduplicates by webhook-id anyway).
_STALE_CONNECTION = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class TestClient(FlaskClient):
    """Flask's test client, closing each response once read (``buffered=True`` by default)."""

    __test__ = False  # not a pytest test class, whatever its name

    def open(self, *args: Any, **kwargs: Any) -> TestResponse:
        kwargs.setdefault("buffered", True)
        return super().open(*args, **kwargs)


class ReplayInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`replay`; :attr:`report` counts the deliveries answered before."""

    def __init__(self, report: ReplayReport) -> None:
        self.report = report
        super().__init__()


class ReplayError(Exception):
    """Bodies that cannot be loaded or a URL that cannot be used; ``code`` and ``message``."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Payload:
    """One body to send, exactly as its file holds it (the signature covers these bytes)."""

    #: Where it came from (a file name), for reports.
    name: str
    body: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What the receiver answered to one delivery."""

    name: str
    #: The ``webhook-id`` sent, for schemes that carry one.
    webhook_id: str | None
    #: The HTTP status, or None when no answer came (refused connection, timeout).
    status: int | None
    #: The receiver's word: ``processed`` or ``duplicate`` for a 2xx, the error ``code``
    #: otherwise (``invalid_signature``...), or the transport error's name without an answer.
    outcome: str
    #: Wall time from sending to the end of the answer.
    seconds: float
    #: The start of the answer's body.
    response: bytes = field(default=b"", repr=False)

    @property
    def refused(self) -> bool:
        """True unless the receiver answered 2xx."""
        return self.status is None or not 200 <= self.status < 300

    @property
    def label(self) -> str:
        """``200 processed``, ``401 invalid_signature``, ``no answer (ConnectionRefusedError)``."""
        if self.status is None:
            return f"no answer ({self.outcome})"
        return f"{self.status} {self.outcome}".rstrip()


@dataclass
class ReplayReport:
    """Every delivery's result (unless not kept) and the count per :attr:`ReplayResult.label`."""

    counts: Counter[str] = field(default_factory=Counter)
    results: list[ReplayResult] = field(default_factory=list)
    #: How many deliveries got no 2xx.
    refused: int = 0
    #: The files (:attr:`Payload.name`) that got each label.
    names: dict[str, set[str]] = field(default_factory=dict)

    def add(self, result: ReplayResult, *, keep: bool = True) -> None:
        """Count ``result`` (and keep it, with ``keep``)."""
        self.counts[result.label] += 1
        self.names.setdefault(result.label, set()).add(result.name)
        self.refused += result.refused
        if keep:
            self.results.append(result)

    @property
    def sent(self) -> int:
        return sum(self.counts.values())

    @property
    def ok(self) -> bool:
        """True when every delivery was accepted (2xx)."""
        return self.refused == 0


def _is_expected_result(path: Path) -> bool:
    return path.name.endswith(".expected.json")


def load_payloads(paths: Iterable[str | PathLike[str]]) -> list[Payload]:
    """Read the bodies to send: files as given, folders as their ``*.json`` files (sorted).

    ``*.expected.json`` files are skipped wherever they come from (``sample_payloads/`` keeps
    one beside each body, and a shell glob such as ``sample_payloads/card_*.json`` names them
    too): they are expected results, never bodies.

    :raises ReplayError: a path that does not exist or cannot be read, or nothing to send.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(child for child in path.glob("*.json") if child.is_file()))
        elif path.exists():
            files.append(path)
        else:
            raise ReplayError("no_such_file", f"{path} does not exist.")
    payloads = []
    for path in files:
        if _is_expected_result(path):
            continue
        try:
            payloads.append(Payload(path.name, path.read_bytes()))
        except OSError as err:
            raise ReplayError("unreadable", f"{path} cannot be read: {err.strerror}.") from err
    if not payloads:
        raise ReplayError("no_payloads", "There is no .json body to send in the given paths.")
    return payloads


class Connection:
    """One HTTP connection to a receiver, kept alive between requests. Not thread-safe: use one
    per thread.

    :param url: the notifications URL (``http://`` or ``https://``).
    :param timeout: seconds to wait to connect and for each answer.
    :raises ReplayError: a URL that is not http(s) with a host.
    """

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ReplayError("bad_url", f"{url!r} is not an http:// or https:// URL.")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self._conn is None:
            factory = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = factory(self._host, self._port, timeout=self._timeout)
        return self._conn

    def post(self, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
        """POST ``body`` with ``headers``; return the status and the whole answer's body.

        :raises OSError: or :class:`http.client.HTTPException` when no answer comes.
        """
        reused = self._conn is not None
        try:
            return self._post_once(body, headers)
        except _STALE_CONNECTION:
            self.close()
            if not reused:
                raise
            return self._post_once(body, headers)
        except BaseException:
            self.close()
            raise

    def _post_once(self, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
        conn = self._connect()
        conn.request("POST", self._path, body=body, headers=dict(headers))
        response = conn.getresponse()
        data = response.read()
        if response.will_close:
            self.close()
        return response.status, data

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _outcome(status: int, data: bytes) -> str:
    """The receiver's word in its JSON answer: ``status`` on success, ``error.code`` else."""
    try:
        document = json.loads(data)
    except ValueError:
        return ""
    if not isinstance(document, dict):
        return ""
    if 200 <= status < 300:
        return str(document.get("status") or "")
    error = document.get("error")
    return str(error.get("code") or "") if isinstance(error, dict) else ""


def send_signed(
    connection: Connection,
    payload: Payload,
    signer: Signer,
    *,
    webhook_id: str | None = None,
    extra_headers: Mapping[str, str] | None = None,
) -> ReplayResult:
    """Sign ``payload`` now and POST it; a transport failure is a result, not an exception.

    :param webhook_id: the message id to sign with (default: a fresh one per call).
    :param extra_headers: added to the request (they are not signed).
    """
    signed = signer.sign(payload.body, webhook_id=webhook_id)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        **(extra_headers or {}),
        **signed,
    }
    sent_id = signed.get("webhook-id")
    started = time.perf_counter()
    try:
        status, data = connection.post(payload.body, headers)
    except (OSError, http.client.HTTPException) as err:
        return ReplayResult(
            payload.name, sent_id, None, type(err).__name__, time.perf_counter() - started
        )
    return ReplayResult(
        payload.name,
        sent_id,
        status,
        _outcome(status, data),
        time.perf_counter() - started,
        data[:_KEPT_RESPONSE_BYTES],
    )


def _jobs(
    payloads: Sequence[Payload], repeat: int, same_id: bool
) -> Iterator[tuple[Payload, str | None]]:
    ids = [f"msg_{secrets.token_hex(12)}" if same_id else None for _ in payloads]
    for _ in range(repeat):
        yield from zip(payloads, ids, strict=True)


def replay(
    url: str,
    payloads: Sequence[Payload],
    signer: Signer,
    *,
    repeat: int = 1,
    concurrency: int = 1,
    same_id: bool = False,
    timeout: float = 10.0,
    on_result: Callable[[ReplayResult], None] | None = None,
    keep_results: bool = True,
) -> ReplayReport:
    """Send every payload ``repeat`` times from ``concurrency`` threads; count the answers.

    :param same_id: sign every repeat of one body with the same ``webhook-id`` (the receiver
        answers ``duplicate`` after the first); by default each send gets a fresh id, as
        distinct deliveries would.
    :param on_result: called with each result as it comes (one call at a time), e.g. to move a
        progress bar.
    :param keep_results: keep every :class:`ReplayResult` in the report (turn off for long
        load runs that only need the counts).
    :raises ReplayError: a bad URL; ``ValueError`` for ``repeat`` or ``concurrency`` below 1.
    :raises ReplayInterrupted: Ctrl-C; the deliveries still waiting for an answer are left.
    """
    if repeat < 1 or concurrency < 1:
        raise ValueError("repeat and concurrency must be at least 1")
    Connection(url)  # check the URL once, before any thread starts
    jobs = _jobs(payloads, repeat, same_id)
    lock = threading.Lock()
    report = ReplayReport()
    stop = threading.Event()
    failures: list[BaseException] = []

    def work() -> None:
        try:
            with Connection(url, timeout=timeout) as connection:
                while True:
                    with lock:
                        job = None if stop.is_set() else next(jobs, None)
                    if job is None:
                        return
                    result = send_signed(connection, job[0], signer, webhook_id=job[1])
                    with lock:
                        if stop.is_set():
                            return  # interrupted: the report is what it was then
                        report.add(result, keep=keep_results)
                        if on_result is not None:
                            on_result(result)
        except BaseException as err:
            failures.append(err)
            stop.set()  # the other workers stop at their next delivery

    # Daemon threads, so that Ctrl-C is answered at once: a worker waiting on an answer is
    # left behind, and its delivery is not counted.
    workers = [
        threading.Thread(target=work, name="payhooks-replay", daemon=True)
        for _ in range(min(concurrency, len(payloads) * repeat))
    ]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            worker.join()
    except KeyboardInterrupt as err:
        with lock:
            stop.set()
        raise ReplayInterrupted(report) from err
    if failures:
        raise failures[0]
    return report
