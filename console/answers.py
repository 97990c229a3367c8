"""What every console answer carries: the security headers, and the one-sentence error pages.

The headers go on every response under the console's prefix, its error pages and stylesheet
included: no script may run (the policy allows none), no other site may frame a page, and no
shared cache or ``Referer`` keeps what a page showed.
"""

from __future__ import annotations

from typing import Final

from flask import Response, render_template

__all__ = ["SECURITY_HEADERS", "error_page", "secure"]

#: Set on every console response.
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def secure(response: Response) -> Response:
    """``response`` with :data:`SECURITY_HEADERS` set (replacing any it had)."""
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    return response


def error_page(status: int, code: str, message: str) -> Response:
    """An HTML page saying ``message`` (one sentence), with the stable ``code`` on its
    ``data-error`` attribute for scripts and tests."""
    html = render_template("payhooks_console/error.html", status=status, code=code, message=message)
    return Response(html, status=status, mimetype="text/html")
