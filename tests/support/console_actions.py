"""What the console's action tests share: a hook that names the person, the headers of an
operator and a viewer, and reading a page's CSRF token the way a browser's form would send it."""

from __future__ import annotations

import re
from collections.abc import Callable

from flask import Request
from flask.testing import FlaskClient

from payhooks.console import ConsoleGrant

__all__ = ["OPERATOR", "ROLE", "VIEWER", "WHO", "Stuck", "grant_hook", "token"]

ROLE = "X-Test-Console-Role"
WHO = "X-Test-Console-Who"
OPERATOR = {ROLE: "operator", WHO: "ana@example.com"}
VIEWER = {ROLE: "viewer", WHO: "vic@example.com"}
_TOKEN = re.compile(r'name="csrf_token" value="([^"]*)"')

#: ``stuck(body=None)``: stores a delivery left without its outcome; its id.
Stuck = Callable[..., int]


def grant_hook(request: Request) -> ConsoleGrant | str | None:
    """The role from one test header and, when the other is there, the person's name."""
    role = request.headers.get(ROLE)
    who = request.headers.get(WHO)
    if role is None:
        return None
    return role if who is None else ConsoleGrant(role, who)  # type: ignore[arg-type]


def token(client: FlaskClient, path: str, headers: dict[str, str] = OPERATOR) -> str:
    """The CSRF token of the first action form on the console page at ``path``."""
    page = client.get(path, headers=headers)
    found = _TOKEN.search(page.get_data(as_text=True))
    assert found is not None, f"{path} has no action form"
    return found.group(1)
