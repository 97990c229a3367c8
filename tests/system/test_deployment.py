"""The recommended production setup keeps answering while slow clients hold connections open.

Issue 13.3: gunicorn's sync workers with nothing in front were held for 31 s at a time by 4
slow connections. ``docs/deployment.md`` now recommends nginx in front, buffering each request
whole, and gunicorn's sync workers behind it on loopback. Here that setup runs on loopback (the
nginx site read from the page itself, by :class:`tests.support.nginx_server.NginxServer`, and
gunicorn as the page runs it, with the demo app), twice as many slow connections as workers are
held open (bounded: :class:`tests.support.slow_clients.Slowloris`), and ordinary signed
notifications must still complete within a few seconds. This is a behaviour, not a benchmark:
``bench/slowloris.py`` has the figures.

The same slowloris against gunicorn alone must stall it, or the first test proves nothing.
The slow clients trickle over plain sockets, so for them the site listens without TLS; every
other test here speaks HTTPS to it, with a throwaway certificate, as a customer would.

nginx must be installed (CI installs it in ``.ci/run``): where it is missing the tests fail
when ``CI=true`` and are skipped, with the command that installs it, otherwise.
"""

from __future__ import annotations

import http.client
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.receive import DEMO_APP, prepare
from payhooks.verify import generate_keypair
from tests.support.gunicorn_server import GunicornServer
from tests.support.nginx_server import NginxServer, require_nginx
from tests.support.slow_clients import Slowloris, probe

WORKERS = 4
#: How long the slow clients hold their connections when nginx is in front.
HOLD = 120.0
#: A notification that takes longer than this is stalled, not slow: a stalled one waits for
#: the slow clients (``HOLD``); a slow machine under the whole suite took up to 5 s unstalled,
#: and CI's machines have been five to ten times slower than a quiet one.
LATE = 60.0


@pytest.fixture
def nginx_installed() -> None:
    require_nginx()


class Deployment:
    """The demo app under gunicorn's sync workers, optionally behind the documented nginx."""

    def __init__(
        self, folder: Path, *, behind_nginx: bool, tls: bool = False, app: str = DEMO_APP
    ) -> None:
        self.keys = generate_keypair("standard-webhooks")
        self.database = folder / "payhooks.db"
        self.next_number = 0
        self.gunicorn = GunicornServer(
            app,
            env={
                "PAYHOOKS_DATABASE": str(self.database),
                "PAYHOOKS_SECRETS": self.keys.verifying_key,
                "SECRET_KEY": "deployment-test",
            },
            cwd=folder,
            workers=WORKERS,
        )
        self.nginx: NginxServer | None = None
        self._behind_nginx = behind_nginx
        self._tls = tls
        self._folder = folder

    def start(self) -> Deployment:
        self.gunicorn.start()
        if self._behind_nginx:
            self.nginx = NginxServer.documented(
                upstream=f"127.0.0.1:{self.gunicorn.port}",
                prefix=self._folder / "nginx",
                tls=self._tls,
            ).start()
        return self

    @property
    def port(self) -> int:
        return self.nginx.port if self.nginx is not None else self.gunicorn.port

    def jobs(self, count: int) -> list[tuple[bytes, dict[str, str]]]:
        """``count`` new signed notifications, each for a payment registered first."""
        made = prepare([self.database], self.next_number, count, self.keys.signing_key)
        self.next_number += count
        return made

    def stop(self) -> None:
        try:
            if self.nginx is not None:
                self.nginx.stop()
        finally:
            self.gunicorn.stop()


def _deployment(folder: Path, *, behind_nginx: bool, **options: Any) -> Iterator[Deployment]:
    deployment = Deployment(folder, behind_nginx=behind_nginx, **options)
    try:
        yield deployment.start()
    finally:
        deployment.stop()


@pytest.fixture
def recommended(nginx_installed: None, tmp_path: Path) -> Iterator[Deployment]:
    yield from _deployment(tmp_path, behind_nginx=True)


#: The demo app with a page that shows a return URL, as a checkout would build it.
RETURNS_APP = textwrap.dedent(
    """
    from payhooks.receiver import return_url
    from payhooks.receiver.demo import create_app

    app = create_app()
    app.add_url_rule("/return-url", "return_url", lambda: return_url("order-1"))
    """
)


@pytest.fixture
def over_https(nginx_installed: None, tmp_path: Path) -> Iterator[Deployment]:
    """The documented site as documented: HTTPS (a throwaway certificate), and the redirect."""
    (tmp_path / "returns_app.py").write_text(RETURNS_APP, encoding="utf-8")
    yield from _deployment(tmp_path, behind_nginx=True, tls=True, app="returns_app:app")


@pytest.fixture
def gunicorn_alone(tmp_path: Path) -> Iterator[Deployment]:
    yield from _deployment(tmp_path, behind_nginx=False)


def test_notifications_complete_while_slow_clients_hold_connections(
    recommended: Deployment,
) -> None:
    jobs = recommended.jobs(12)
    slow_connections = 2 * WORKERS

    with Slowloris(recommended.port, slow_connections, interval=0.5, duration=HOLD) as slowloris:
        opened = slowloris.wait_until_open(timeout=60)
        result = probe(recommended.port, jobs, rate=4, timeout=LATE)
        still_held = slowloris.open_now

    assert opened
    assert still_held == slow_connections, slowloris.stats  # they were held throughout
    assert result.late == 0, result.summary()
    assert result.statuses == {200: len(jobs)}, result.statuses


def test_the_same_slow_clients_stall_gunicorn_alone(gunicorn_alone: Deployment) -> None:
    jobs = gunicorn_alone.jobs(6)

    with Slowloris(gunicorn_alone.port, WORKERS, interval=0.5, duration=30) as slowloris:
        assert slowloris.wait_until_open(timeout=60)
        result = probe(gunicorn_alone.port, jobs, rate=4, timeout=2.0)

    assert result.late > 0, result.summary()


def _get(deployment: Deployment, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """``GET path`` over HTTPS to the documented site: the status and the body."""
    assert deployment.nginx is not None
    conn = http.client.HTTPSConnection(
        "127.0.0.1", deployment.port, timeout=60, context=deployment.nginx.client_context
    )
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_urls_the_app_builds_behind_the_proxy_are_https_on_the_client_s_host(
    over_https: Deployment,
) -> None:
    # Return URLs are built from the Host and the scheme the app sees: nginx passes the host
    # on and sets X-Forwarded-Proto to its own scheme, whatever the client claims.
    headers = {"Host": "shop.example", "X-Forwarded-Proto": "http"}
    made = _get(over_https, "/return-url", headers)
    index = _get(over_https, "/", headers)

    assert made[0] == 200
    assert made[1].startswith(b"https://shop.example/payhooks/return/order-1?token=")
    assert json.loads(index[1])["notifications"] == "https://shop.example/payhooks/notifications"


def test_plain_http_only_redirects_to_https(over_https: Deployment) -> None:
    assert over_https.nginx is not None
    assert over_https.nginx.http_port is not None
    conn = http.client.HTTPConnection("127.0.0.1", over_https.nginx.http_port, timeout=60)
    try:
        conn.request("GET", "/payhooks/return/order-1?token=t", headers={"Host": "shop.example"})
        response = conn.getresponse()
        response.read()
    finally:
        conn.close()

    assert response.status == 301
    assert response.headers["Location"] == "https://shop.example/payhooks/return/order-1?token=t"


def test_a_body_over_the_receivers_cap_still_gets_the_receivers_own_answer(
    over_https: Deployment,
) -> None:
    # nginx holds bodies up to twice the receiver's 64 KiB cap, so the service gets the
    # receiver's error code for one just over it, not nginx's page.
    assert over_https.nginx is not None
    body = b"{" + b" " * 70_000 + b"}"
    conn = http.client.HTTPSConnection(
        "127.0.0.1", over_https.port, timeout=60, context=over_https.nginx.client_context
    )
    try:
        conn.request(
            "POST", "/payhooks/notifications", body=body,
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        response = conn.getresponse()
        answer = json.loads(response.read())
    finally:
        conn.close()

    assert response.status == 413
    assert answer["error"]["code"] == "payload_too_large"
