"""What a merchant's tests need: a test client that behaves as a WSGI server does.

The receiver answers the service first and runs the signals' receivers once the response is
closed (``response.call_on_close``), as a server closes it after writing it. Flask's test client
leaves a response open until the test closes it, so a test would never see its receivers run.
:meth:`payhooks.receiver.PayHooks.init_app` makes :class:`TestClient` the app's
``test_client_class`` (unless the app has one of its own), so ``app.test_client()`` closes each
response once it is read, and a test sees the receivers' work as soon as ``post`` returns.
"""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient
from werkzeug.test import TestResponse

__all__ = ["TestClient"]


class TestClient(FlaskClient):
    """Flask's test client, closing each response once read (``buffered=True`` by default)."""

    __test__ = False  # not a pytest test class, whatever its name

    def open(self, *args: Any, **kwargs: Any) -> TestResponse:
        kwargs.setdefault("buffered", True)
        return super().open(*args, **kwargs)
