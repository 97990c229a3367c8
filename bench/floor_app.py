"""The floor for ``bench/receive.py``: the cheapest answer Flask and gunicorn can give.

One route at the receiver's path that reads the body and answers the same small JSON
acknowledgement the receiver sends, with no signature, no storage and no parsing. Whatever this
app reaches on a machine is the ceiling the receiver is measured against: the cost of HTTP,
WSGI and Flask that no change to payhooks could remove.

Served as ``bench.floor_app:create_app()``.
"""

from __future__ import annotations

from flask import Flask, Response, jsonify, request

__all__ = ["create_app"]


def create_app() -> Flask:
    app = Flask(__name__)
    # A merchant's app has a secret key (payhooks' return URLs need one), and with one Flask
    # opens the session cookie on every request: the floor pays that too.
    app.config["SECRET_KEY"] = "floor"

    @app.post("/payhooks/notifications")
    def notifications() -> Response:
        request.get_data()  # the receiver reads every byte; so does the floor
        return jsonify({"code": "200", "msg": "success", "status": "processed"})

    return app
