"""The one-time login token: good once, within its lifetime, and only itself."""

from __future__ import annotations

from datetime import timedelta

import pytest

from payhooks.console.standalone import LoginToken
from payhooks.console.standalone.login_token import TOKEN_LIFETIME
from tests.support.factories import FixedClock


def test_the_token_is_good_once(clock: FixedClock) -> None:
    token = LoginToken(clock)

    assert token.redeem(token.value)
    assert not token.redeem(token.value)


@pytest.mark.parametrize("offered", ["", "x", "é" * 43, "\udcff", "TOKEN-WITH-A-TYPO"])
def test_a_wrong_token_is_refused_and_leaves_the_right_one_good(
    clock: FixedClock, offered: str
) -> None:
    token = LoginToken(clock)

    assert not token.redeem(offered)
    assert not token.redeem(token.value[:-1])
    assert token.redeem(token.value)


@pytest.mark.parametrize(
    ("after", "good"),
    [
        (TOKEN_LIFETIME - timedelta(seconds=1), True),
        (TOKEN_LIFETIME, False),
        (TOKEN_LIFETIME + timedelta(days=1), False),
    ],
)
def test_the_token_dies_after_its_lifetime(clock: FixedClock, after: timedelta, good: bool) -> None:
    token = LoginToken(clock)
    clock.advance(after.total_seconds())

    assert token.redeem(token.value) is good


def test_each_token_is_new_and_long(clock: FixedClock) -> None:
    values = {LoginToken(clock).value for _ in range(50)}

    assert len(values) == 50
    assert all(len(value) >= 43 for value in values)  # 32 random bytes, URL-safe base64


def test_its_repr_never_shows_the_secret(clock: FixedClock) -> None:
    token = LoginToken(clock)

    assert token.value not in repr(token)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()
