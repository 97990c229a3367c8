"""One console request per person at a time, across the processes of a host
(:mod:`payhooks.console.turns`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from flask import Flask
from flask.testing import FlaskClient

from payhooks.console import Console, turns
from payhooks.console.turns import take_turn
from tests.support.app import AppFactory
from tests.support.console_actions import ROLE, WHO, grant_hook

ALICE = "alice@example.com"


@pytest.fixture
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A person's second request gives up after 0.2 s instead of 5."""
    monkeypatch.setattr(turns, "TURN_WAIT_SECONDS", 0.2)


@pytest.fixture
def people_app(make_app: AppFactory) -> Flask:
    """The receiver and a console whose hook names each person from a test header."""
    app = make_app()
    Console(app, authorize=grant_hook, url_prefix="/console")
    return app


def _as(client: FlaskClient, who: str, role: str = "viewer") -> int:
    answer = client.get("/console/deliveries", headers={ROLE: role, WHO: who})
    return answer.status_code


@pytest.mark.usefixtures("short_wait")
def test_a_persons_second_request_waits_for_the_first_then_is_refused_with_console_busy(
    people_app: Flask,
) -> None:
    held = take_turn(people_app.instance_path, f"viewer {ALICE}")
    assert held is not None
    client = people_app.test_client()
    try:
        answer = client.get("/console/deliveries", headers={ROLE: "viewer", WHO: ALICE})
        assert answer.status_code == 429
        assert 'data-error="console_busy"' in answer.get_data(as_text=True)
        assert _as(client, "bob@example.com") == 200  # another person has a turn of their own
    finally:
        held.release()
    assert _as(client, ALICE) == 200  # the first done, the next goes


@pytest.mark.usefixtures("short_wait")
def test_a_turn_held_by_another_process_counts_and_ends_with_that_process(
    people_app: Flask,
) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from payhooks.console.turns import take_turn
                turn = take_turn({people_app.instance_path!r}, {"viewer " + ALICE!r})
                print("held" if turn else "not held", flush=True)
                time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        client = people_app.test_client()
        assert _as(client, ALICE) == 429
    finally:
        holder.kill()
        holder.communicate()
    assert _as(people_app.test_client(), ALICE) == 200  # the kernel let go with the process


def test_a_request_gives_its_turn_back_even_when_its_page_fails(people_app: Flask) -> None:
    client = people_app.test_client()
    headers = {ROLE: "viewer", WHO: ALICE}
    assert client.get("/console/deliveries?window=forever", headers=headers).status_code == 400
    assert take_turn(people_app.instance_path, f"viewer {ALICE}", wait_seconds=0) is not None
