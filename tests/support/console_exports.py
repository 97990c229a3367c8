"""What the console's export tests share: start an export as the finance page's form does,
wait on its page until it is no longer running, and read what that page says."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from html import unescape

from flask.testing import FlaskClient
from werkzeug.datastructures import MultiDict
from werkzeug.test import TestResponse

__all__ = ["EXPORTS", "FINANCE", "ExportPage", "start_export", "wait_for_export"]

FINANCE = "/console/reconciliation"
EXPORTS = "/console/exports"
_FORM = re.compile(r'<form class="export" method="post" action="[^"]*/exports">(.*?)</form>', re.S)
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]*)" value="([^"]*)">')
_STATE = re.compile(r'data-state="([a-z]+)"')
_FACT = {
    "rows": re.compile(r"<dd data-rows>([0-9]+)</dd>"),
    "bytes": re.compile(r"<dd data-bytes>([0-9]+) bytes</dd>"),
    "sha256": re.compile(r"<code data-sha256>([0-9a-f]{64})</code>"),
}


def start_export(
    client: FlaskClient,
    headers: Mapping[str, str],
    filters: Mapping[str, str | list[str]] | None = None,
    *,
    prefix: str = "/console",
) -> TestResponse:
    """Read the finance page with ``filters`` and POST its export form's hidden fields (the
    session's token, the page's filters), as a browser sends the form."""
    finance = f"{prefix}/reconciliation"
    page = client.get(finance, query_string=filters or {}, headers=dict(headers))
    found = _FORM.search(page.get_data(as_text=True))
    assert found is not None, "the finance page has no export form"
    form = [(name, unescape(value)) for name, value in _HIDDEN.findall(found.group(1))]
    return client.post(f"{prefix}/exports", data=MultiDict(form), headers=dict(headers))


class ExportPage:
    """What an export's page says: its state and, once ready, its facts and download link."""

    def __init__(self, html: str) -> None:
        self.html = html
        found = _STATE.search(html)
        assert found is not None, html
        self.state = found.group(1)
        facts = {name: pattern.search(html) for name, pattern in _FACT.items()}
        self.rows = int(facts["rows"].group(1)) if facts["rows"] else None
        self.bytes = int(facts["bytes"].group(1)) if facts["bytes"] else None
        self.sha256 = facts["sha256"].group(1) if facts["sha256"] else None


def wait_for_export(
    client: FlaskClient,
    location: str,
    headers: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> ExportPage:
    """Read the export's page until it no longer says running (as its reload would)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = client.get(location, headers=dict(headers or {}))
        assert answer.status_code == 200, answer.get_data(as_text=True)
        page = ExportPage(answer.get_data(as_text=True))
        if page.state != "running":
            return page
        assert time.monotonic() < deadline, f"the export at {location} is still running"
        time.sleep(0.05)
