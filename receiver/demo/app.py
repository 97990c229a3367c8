"""A ready-made app with the receiver mounted at ``/payhooks``:
``payhooks.receiver.demo:create_app``.

It is what ``payhooks serve`` runs and what a developer points the replay tool at. It reads
every ``PAYHOOKS_*`` key from the environment (``PAYHOOKS_SECRETS`` whitespace-separated) and
keeps its database at ``./payhooks.db`` unless ``PAYHOOKS_DATABASE`` says otherwise.

For a quick start it needs nothing: without keys it generates a development key pair for the
configured scheme, and without ``SECRET_KEY`` it generates one, so return URLs work until the
process exits. Neither is for production: set ``PAYHOOKS_SECRETS`` or ``PAYHOOKS_PUBLIC_KEYS``,
and ``SECRET_KEY``. The generated signing key is kept in the app's config
(:data:`DEMO_SIGNING_KEY`) and never logged: logs travel to places a key must not (files,
aggregators, CI output). ``payhooks serve``, which a developer watches in a terminal, prints it
there itself.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, jsonify, url_for

from payhooks.receiver.config import KEY_CONFIG, config_from_env
from payhooks.receiver.extension import PayHooks
from payhooks.storage import redacted
from payhooks.verify import DEFAULT_SCHEME, SCHEMES, generate_keypair

__all__ = ["DEMO_SIGNING_KEY", "create_app"]

logger = logging.getLogger("payhooks")

#: Config key holding the signing key the demo generated, when it generated one, so the CLI's
#: ``demo`` command can sign for this very app.
DEMO_SIGNING_KEY = "PAYHOOKS_DEMO_SIGNING_KEY"


def create_app(
    config: Mapping[str, Any] | None = None, *, environ: Mapping[str, str] | None = None
) -> Flask:
    """Build the demo app.

    :param config: overrides applied after the environment (tests and the CLI use it).
    :param environ: where to read ``PAYHOOKS_*`` and ``SECRET_KEY`` (default :data:`os.environ`).
    """
    env = os.environ if environ is None else environ
    app = Flask(__name__)
    app.config["PAYHOOKS_DATABASE"] = os.path.abspath("payhooks.db")
    app.config.update(config_from_env(env))
    if env.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = env["SECRET_KEY"]
    app.config.update(config or {})

    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = secrets.token_urlsafe(32)
        logger.warning(
            "payhooks demo: no SECRET_KEY set; generated one for this process "
            "(return URLs stop working when it exits)"
        )
    _ensure_keys(app)
    PayHooks(app)

    @app.get("/")
    def index() -> Response:
        return jsonify(
            {
                "service": "payhooks demo",
                "notifications": url_for("payhooks.notifications", _external=True),
                "signature_scheme": app.config["PAYHOOKS_SIGNATURE_SCHEME"],
                "database": redacted(str(app.config["PAYHOOKS_DATABASE"])),
            }
        )

    return app


def _ensure_keys(app: Flask) -> None:
    """Generate a development key pair when the scheme's keys are not configured."""
    scheme = app.config.setdefault("PAYHOOKS_SIGNATURE_SCHEME", DEFAULT_SCHEME)
    info = SCHEMES.get(scheme)
    if info is None:
        return  # PayHooks refuses it with a clear message.
    key_config = KEY_CONFIG[info.key_kind]
    if app.config.get(key_config):
        return
    pair = generate_keypair(scheme)
    app.config[key_config] = [pair.verifying_key]
    app.config[DEMO_SIGNING_KEY] = pair.signing_key
    logger.warning(
        "payhooks demo: %s is not set; generated a development key for %s, valid until the "
        "process exits. To use your own, set %s (`payhooks keygen --scheme %s` makes one).",
        key_config,
        scheme,
        key_config,
        scheme,
    )
