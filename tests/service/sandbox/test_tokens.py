"""The sandbox's access tokens: HS256 JWTs with a scope claim."""

from __future__ import annotations

import base64
import json

import pytest

from payhooks.service.sandbox import issue_token
from payhooks.service.sandbox.tokens import TokenError, read_token

SECRET = "sandbox-token-secret"


def test_a_token_grants_its_scopes_and_subject() -> None:
    token = issue_token(SECRET, ["subscriptions.write", "buyers.read"], subject="shop-1")
    access = read_token(token, SECRET)
    assert access.scopes == {"subscriptions.write", "buyers.read"}
    assert access.subject == "shop-1"


def test_a_token_is_an_hs256_jwt() -> None:
    header = issue_token(SECRET, []).split(".")[0]
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "HS256", "typ": "JWT"}


@pytest.mark.parametrize(
    ("token", "code"),
    [
        (issue_token("another", ["x"]), "invalid_token"),
        (issue_token(SECRET, ["x"], clock=lambda: 1000.0), "token_expired"),
        ("a.b", "invalid_token"),
        ("!!.!!.!!", "invalid_token"),
    ],
)
def test_a_token_that_cannot_be_trusted_is_refused_with_its_code(token: str, code: str) -> None:
    with pytest.raises(TokenError) as exc_info:
        read_token(token, SECRET)
    assert exc_info.value.code == code


def test_a_token_signed_with_another_algorithm_is_refused() -> None:
    _header, payload, signature = issue_token(SECRET, ["x"]).split(".")
    none_header = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    with pytest.raises(TokenError) as exc_info:
        read_token(f"{none_header}.{payload}.{signature}", SECRET)
    assert "HS256" in exc_info.value.message


def test_a_token_without_expiry_does_not_expire() -> None:
    token = issue_token(SECRET, ["x"], lifetime=None, clock=lambda: 0.0)
    assert read_token(token, SECRET).scopes == {"x"}
