"""``Metrics``: the counters after real signed notifications through the test client, the
ledger's gauges on each engine, and the endpoint's guard (the merchant's ``authorize`` hook)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, Request
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from payhooks.receiver import Metrics, receiver_state
from payhooks.receiver.web.metrics.mount import MISSING_EXTRA
from payhooks.storage import MISMATCH_STATES, DriftKind, Ledger
from tests.support.app import AppFactory, BodyFactory, SignFunction
from tests.support.unreadable_rows import SPOILED_COLUMNS, spoil

NOTIFY = "/payhooks/notifications"
METRICS = "/internal/metrics"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _open(request: Request) -> bool:
    return True


def samples(client: FlaskClient, url: str = METRICS) -> Samples:
    """Every sample of one scrape, by name and sorted labels."""
    response = client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    found: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def delivered(found: Samples, http_status: int, code: str) -> float:
    key = ("payhooks_deliveries_total", (("code", code), ("http_status", str(http_status))))
    return found.get(key, 0.0)


def rejected(found: Samples, code: str) -> float:
    return found.get(("payhooks_rejections_total", (("code", code),)), 0.0)


@pytest.fixture
def metered(make_app: AppFactory) -> Flask:
    app = make_app()
    Metrics(app, url=METRICS, authorize=_open)
    return app


def test_each_answer_is_counted_under_its_status_and_code(
    metered: Flask, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    client = metered.test_client()
    for n in range(3):
        ledger.expect_transaction(f"order-{n}", 2500, "CNY")
    bodies = [
        make_body(external_identifier=f"order-{n}", transaction_id=f"ll-{n}") for n in range(3)
    ]
    answers = [client.post(NOTIFY, data=body, headers=sign(body)).status_code for body in bodies]
    again = client.post(NOTIFY, data=bodies[0], headers=sign(bodies[0], msg_id="msg_test_1"))
    not_json = client.post(NOTIFY, data=b"{", headers=sign(b"{"))
    not_a_notification = client.post(NOTIFY, data=b"{}", headers=sign(b"{}"))
    unsigned = client.post(NOTIFY, data=bodies[1], headers={"content-type": "application/json"})
    forged = client.post(
        NOTIFY, data=bodies[2], headers={**sign(bodies[1]), "webhook-id": "msg_forged"}
    )
    assert answers == [200, 200, 200]
    assert again.get_json()["status"] == "duplicate"
    assert [not_json.status_code, not_a_notification.status_code] == [400, 422]
    assert [unsigned.status_code, forged.status_code] == [401, 401]

    found = samples(client)

    assert delivered(found, 200, "processed") == 3
    assert delivered(found, 200, "duplicate") == 1
    assert delivered(found, 400, "malformed_json") == 1
    assert delivered(found, 422, "invalid_payload") == 1
    assert rejected(found, "missing_signature") == 1
    assert rejected(found, "invalid_signature") == 1
    assert found[("payhooks_request_duration_seconds_count", ())] == 8
    assert found[("payhooks_request_duration_seconds_bucket", (("le", "+Inf"),))] == 8


def test_a_body_over_the_cap_is_a_rejection(
    make_app: AppFactory, sign: SignFunction, ledger: Ledger
) -> None:
    app = make_app(PAYHOOKS_MAX_BODY_BYTES=100)
    Metrics(app, url=METRICS, authorize=_open)
    client = app.test_client()
    body = b"{" + b" " * 200 + b"}"

    assert client.post(NOTIFY, data=body, headers=sign(body)).status_code == 413

    assert rejected(samples(client), "payload_too_large") == 1


def test_the_ledger_gauges_show_what_the_ledger_holds(
    metered: Flask, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    client = metered.test_client()
    ledger.expect_transaction("order-1", 2500, "CNY")
    ledger.expect_transaction("order-2", 2500, "CNY")
    short = make_body(external_identifier="order-2", transaction_id="ll-2", amount="24.00")
    for body in (make_body(), short):
        assert client.post(NOTIFY, data=body, headers=sign(body)).status_code == 200

    found = samples(client)

    assert found[("payhooks_ledger_readable", ())] == 1
    assert found[("payhooks_reconciliation_mismatches", (("state", "amount_mismatch"),))] == 1
    assert found[("payhooks_reconciliation_mismatches", (("state", "unexpected"),))] == 0
    accepted = ledger.receiver.delivery(2)
    assert accepted is not None
    assert found[("payhooks_last_accepted_delivery_timestamp_seconds", ())] == pytest.approx(
        accepted.received_at.timestamp()
    )
    assert found[("payhooks_owed_signals", ())] == len(ledger.signals.owed()) == 0
    assert found[("payhooks_last_sync_timestamp_seconds", ())] == 0
    assert found[("payhooks_sync_drift", (("kind", "missed_notification"),))] == 0


def test_a_conflicting_outcome_is_the_last_accepted_delivery_and_a_refused_body_is_not(
    metered: Flask, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    """Answered 200, a conflicting outcome stops the service's retries: the silence gauge
    counts it, as docs/operations.md says; a malformed body after it does not move it."""
    client = metered.test_client()
    ledger.expect_transaction("order-1", 2500, "CNY")
    first = make_body()
    stray = make_body(external_identifier="stray-1")  # the same transaction, another order
    answers = [
        client.post(NOTIFY, data=first, headers=sign(first, msg_id="msg_first")),
        client.post(NOTIFY, data=stray, headers=sign(stray, msg_id="msg_stray")),
        client.post(NOTIFY, data=b"{", headers=sign(b"{", msg_id="msg_bad")),
    ]
    assert [answer.status_code for answer in answers] == [200, 200, 400]
    assert answers[1].get_json()["status"] == "conflicting_outcome"
    conflict = ledger.receiver.delivery(2)
    assert conflict is not None
    assert conflict.status == "conflicting_outcome"

    found = samples(client)

    assert found[("payhooks_last_accepted_delivery_timestamp_seconds", ())] == pytest.approx(
        conflict.received_at.timestamp()
    )


def test_every_drift_kind_and_mismatch_state_is_a_series_on_an_empty_ledger(
    metered: Flask, ledger: Ledger
) -> None:
    found = samples(metered.test_client())

    drift = {dict(labels)["kind"] for name, labels in found if name == "payhooks_sync_drift"}
    states = {
        dict(labels)["state"]
        for name, labels in found
        if name == "payhooks_reconciliation_mismatches"
    }
    assert drift == {kind.value for kind in DriftKind}
    assert states == {state.value for state in MISMATCH_STATES}
    assert found[("payhooks_last_accepted_delivery_timestamp_seconds", ())] == 0
    assert found[("payhooks_oldest_owed_signal_age_seconds", ())] == 0


def test_signals_owed_and_not_sent_are_counted_with_the_oldest_ones_age(
    metered: Flask, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body()
    # A Flask client that never closes the answer: the claimed signals stay owed.
    with metered.test_client() as client:
        response = client.post(NOTIFY, data=body, headers=sign(body), buffered=False)
        assert response.status_code == 200
        found = samples(client)
        response.close()

    assert found[("payhooks_owed_signals", ())] >= 1
    assert found[("payhooks_oldest_owed_signal_age_seconds", ())] >= 0


@pytest.mark.parametrize(
    "authorize",
    [
        pytest.param(lambda request: False, id="false"),
        pytest.param(lambda request: None, id="none"),
        pytest.param(lambda request: "yes", id="truthy-but-not-true"),
        pytest.param(lambda request: 1, id="one"),
        pytest.param(lambda request: 1 / 0, id="raises"),
        pytest.param(
            lambda request: request.headers.get("Authorization") == "Bearer right",
            id="wrong-token",
        ),
    ],
)
def test_a_scrape_the_hook_does_not_let_in_is_refused_with_nothing_shown(
    make_app: AppFactory, authorize: Callable[[Request], Any]
) -> None:
    app = make_app()
    Metrics(app, url=METRICS, authorize=authorize)

    response = app.test_client().get(METRICS, headers={"Authorization": "Bearer wrong"})

    assert response.status_code == 403
    assert response.get_json()["error"]["code"] == "forbidden"
    assert "payhooks_" not in response.text


def test_a_scrape_the_hook_lets_in_is_served(make_app: AppFactory) -> None:
    app = make_app()
    Metrics(
        app,
        url=METRICS,
        authorize=lambda request: request.headers.get("Authorization") == "Bearer right",
    )

    response = app.test_client().get(METRICS, headers={"Authorization": "Bearer right"})

    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    assert "payhooks_ledger_readable 1.0" in response.text


def test_without_prometheus_client_the_merchant_reads_what_to_install(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)

    with pytest.raises(ImportError) as exc_info:
        Metrics(make_app(), url=METRICS, authorize=_open)

    assert str(exc_info.value) == MISSING_EXTRA
    assert "pip install 'payhooks[metrics]'" in MISSING_EXTRA


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"url": METRICS}, "authorize"),
        ({"url": METRICS, "authorize": "yes"}, "authorize"),
        ({"url": "metrics", "authorize": _open}, "url"),
        ({"url": "/", "authorize": _open}, "url"),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        Metrics(**options)


@pytest.mark.parametrize("url", ["/payhooks", "/payhooks/metrics"])
def test_metrics_under_the_receivers_prefix_are_refused(make_app: AppFactory, url: str) -> None:
    with pytest.raises(ValueError, match="PAYHOOKS_URL_PREFIX"):
        Metrics(make_app(), url=url, authorize=_open)


def test_metrics_need_payhooks_first_and_mount_once(make_app: AppFactory) -> None:
    with pytest.raises(RuntimeError, match="PayHooks is not initialised"):
        Metrics(Flask("bare"), url=METRICS, authorize=_open)
    app = make_app()
    Metrics(app, url=METRICS, authorize=_open)
    with pytest.raises(RuntimeError, match="already mounted"):
        Metrics(app, url="/other", authorize=_open)


def test_two_apps_in_one_process_count_apart(
    make_app: AppFactory, tmp_path: Any, sign: SignFunction
) -> None:
    one, other = make_app(), make_app()
    Metrics(one, url=METRICS, authorize=_open)
    Metrics(other, url=METRICS, authorize=_open)

    one.test_client().post(NOTIFY, data=b"{}", headers={})

    assert rejected(samples(one.test_client()), "missing_signature") == 1
    assert rejected(samples(other.test_client()), "missing_signature") == 0


def test_an_observer_that_raises_leaves_the_answer_as_it_was(
    metered: Flask, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    def broken(report: object) -> None:
        raise RuntimeError("the merchant's monitoring is down")

    receiver_state(metered).observers.insert(0, broken)
    ledger.expect_transaction("order-1", 2500, "CNY")
    body = make_body()
    client = metered.test_client()

    response = client.post(NOTIFY, data=body, headers=sign(body))

    assert response.status_code == 200
    assert json.loads(response.data)["status"] == "processed"
    assert delivered(samples(client), 200, "processed") == 1


@pytest.mark.sqlite_only
def test_a_ledger_that_cannot_be_read_gives_readable_zero_and_no_ledger_figure(
    make_app: AppFactory, database: Any
) -> None:
    app = make_app()
    Metrics(app, url=METRICS, authorize=_open)
    receiver_state(app).ledgers.close()
    database.write_bytes(b"this is not a ledger" * 100)

    found = samples(app.test_client())

    assert found[("payhooks_ledger_readable", ())] == 0
    assert not [name for name, _ in found if name == "payhooks_owed_signals"]


@pytest.mark.parametrize("column", SPOILED_COLUMNS)
def test_a_stored_time_payhooks_never_writes_gives_readable_zero_not_a_500(
    metered: Flask, ledger: Ledger, column: str
) -> None:
    spoil(ledger, column)

    found = samples(metered.test_client())

    assert found[("payhooks_ledger_readable", ())] == 0
    assert not [name for name, _ in found if name == "payhooks_owed_signals"]


def test_the_rollup_lag_is_how_long_the_oldest_change_not_yet_counted_has_waited(
    metered: Flask, ledger: Ledger, make_body: BodyFactory, sign: SignFunction
) -> None:
    client = metered.test_client()
    assert samples(client)[("payhooks_rollup_lag_seconds", ())] == 0  # never built: read live
    ledger.finance.rollup.refresh()
    body = make_body()
    assert client.post(NOTIFY, data=body, headers=sign(body)).status_code == 200
    assert samples(client)[("payhooks_rollup_lag_seconds", ())] > 0
    assert ledger.finance.rollup.refresh().done
    assert samples(client)[("payhooks_rollup_lag_seconds", ())] == 0
