"""The receiver on a PostgreSQL ledger that cannot be used: a 503 with Retry-After (the service
retries), never a 500, and nothing acknowledged."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from payhooks.storage.postgresql import close_pools
from tests.support.app import AppFactory, BodyFactory, SignFunction
from tests.support.postgres import PostgresServer


def _post(make_app: AppFactory, url: str, make_body: BodyFactory, sign: SignFunction) -> object:
    app = make_app(PAYHOOKS_DATABASE=url, PAYHOOKS_BUSY_TIMEOUT_MS=300)
    body = make_body()
    return app.test_client().post("/payhooks/notifications", data=body, headers=sign(body))


@pytest.fixture
def unmigrated_url(postgres_server: tuple[PostgresServer, str]) -> Iterator[str]:
    server = postgres_server[0]
    url = server.create_database()
    try:
        yield url
    finally:
        close_pools(url)
        server.drop_database(url)


def test_a_server_that_cannot_be_reached_answers_503_with_retry_after(
    make_app: AppFactory,
    make_body: BodyFactory,
    sign: SignFunction,
    postgres_server: tuple[PostgresServer, str],
) -> None:
    url = f"postgresql://payhooks@127.0.0.1:{postgres_server[0].port}/no_such_database"
    try:
        response = _post(make_app, url, make_body, sign)
    finally:
        close_pools(url)

    assert response.status_code == 503  # type: ignore[attr-defined]
    assert response.get_json()["error"]["code"] == "storage_unavailable"  # type: ignore[attr-defined]
    assert response.headers["Retry-After"].isdigit()  # type: ignore[attr-defined]


def test_a_database_not_yet_migrated_answers_503_and_stores_nothing(
    make_app: AppFactory, make_body: BodyFactory, sign: SignFunction, unmigrated_url: str
) -> None:
    response = _post(make_app, unmigrated_url, make_body, sign)

    assert response.status_code == 503  # type: ignore[attr-defined]
    with psycopg.connect(unmigrated_url) as conn:
        assert conn.execute("SELECT to_regclass('deliveries')").fetchone() == (None,)
