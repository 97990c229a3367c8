"""The Flask extension: :class:`PayHooks` mounts the receiver on an app.

Configuration is read once, in :meth:`PayHooks.init_app`, and checked there: an app that could
not verify a single delivery (no keys, an unknown scheme, a bad status map) fails at start-up
with a :class:`ValueError` naming the key, not at the first notification.

The extension keeps no app: what one app needs (its verifier, its ledgers, its status map) lives
in a :class:`~payhooks.receiver.state.ReceiverState` in that app's ``extensions``, so app factories
and several apps in one process, each with its own database and keys, work side by side.
"""

from __future__ import annotations

import os
from typing import Any

import click
from flask import Flask
from flask.cli import ScriptInfo

from payhooks.receiver.cli import payhooks_group
from payhooks.receiver.config import CONFIG_DEFAULTS
from payhooks.receiver.state import STATE_KEY, build_state, receiver_state
from payhooks.receiver.testing import TestClient
from payhooks.receiver.web import (
    IDENTIFIER_CONVERTER,
    ExternalIdentifierConverter,
    blueprint,
    install_retry_timer,
)
from payhooks.storage import Ledger

__all__ = ["EXTENSION_KEY", "PayHooks"]

#: Where :meth:`PayHooks.init_app` puts the extension, as Flask's extension guide asks.
EXTENSION_KEY = "payhooks"


class PayHooks:
    """Receive the payment service's notifications in a Flask app.

    ::

        payhooks = PayHooks()

        def create_app():
            app = Flask(__name__)
            app.config["PAYHOOKS_SECRETS"] = ["whsec_..."]
            payhooks.init_app(app)
            return app

    ``options`` are defaults for the ``PAYHOOKS_*`` config keys, named in lower case without
    the prefix (``PayHooks(secrets=[...], url_prefix="/hooks")``). The app's config wins over
    them, and they win over the built-in defaults, so one extension object can carry a
    project's choices while each app (production, tests) still overrides by config.

    A merchant who protects forms with Flask-WTF's ``CSRFProtect`` must exempt the blueprint
    (``csrf.exempt(payhooks.receiver.blueprint)``): the service cannot send a CSRF token; the
    signature is what authenticates a notification.
    """

    def __init__(self, app: Flask | None = None, **options: Any) -> None:
        unknown = sorted(
            name for name in options if f"PAYHOOKS_{name.upper()}" not in CONFIG_DEFAULTS
        )
        if unknown:
            raise ValueError(f"unknown PayHooks option(s): {', '.join(unknown)}")
        self._options = {f"PAYHOOKS_{name.upper()}": value for name, value in options.items()}
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Set the config defaults, check them, and mount the blueprint and CLI on ``app``.

        :raises ValueError: naming the config key, when the configuration cannot work.
        :raises RuntimeError: when payhooks is already initialised on ``app`` (by this object
            or another one). A second call cannot take effect: the blueprint, its URL prefix
            and the app's ledger are already in use, so it fails before changing anything
            rather than half-applying a new configuration or doing nothing silently.
        """
        if EXTENSION_KEY in app.extensions:
            raise RuntimeError(
                f"PayHooks is already initialised on app {app.name!r}: call init_app once "
                "per app (use the PayHooks object that did, or a new app)."
            )
        for key, default in CONFIG_DEFAULTS.items():
            app.config.setdefault(key, self._options.get(key, default))
        if not app.config["PAYHOOKS_DATABASE"]:
            os.makedirs(app.instance_path, exist_ok=True)
            app.config["PAYHOOKS_DATABASE"] = os.path.join(app.instance_path, "payhooks.db")

        state = build_state(app.config, serving=_may_serve())
        app.extensions[EXTENSION_KEY] = self
        app.extensions[STATE_KEY] = state
        app.url_map.converters[IDENTIFIER_CONVERTER] = ExternalIdentifierConverter
        app.register_blueprint(blueprint, url_prefix=app.config["PAYHOOKS_URL_PREFIX"])
        install_retry_timer(app, state)
        if app.test_client_class is None:  # receivers run once a response is closed
            app.test_client_class = TestClient
        if payhooks_group.name not in app.cli.commands:
            app.cli.add_command(payhooks_group)

    @property
    def ledger(self) -> Ledger:
        """The current app's ledger for this thread: register expected payments with it.

        ::

            payhooks.ledger.expect_transaction("order-1", 2500, "CNY")
        """
        return receiver_state().ledger

    def __repr__(self) -> str:
        return "<PayHooks>"


def _may_serve() -> bool:
    """False while the ``flask`` command builds the app for a command other than ``flask
    run`` (``flask payhooks reconcile``, ``flask shell``): a report needs no webhook keys.
    gunicorn, ``flask run`` and tests build apps that may serve, so those are checked whole."""
    ctx = click.get_current_context(silent=True)
    return ctx is None or ctx.find_object(ScriptInfo) is None or ctx.info_name == "run"
