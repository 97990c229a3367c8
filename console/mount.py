"""The :class:`Console` extension: mounts the console's pages on an app, behind a hook."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from flask import Flask, Response, request

from payhooks.console.access import (
    ACCESS_KEY,
    Authorize,
    ConsoleAccess,
    check_authorize,
    current_access,
)
from payhooks.console.answers import secure
from payhooks.console.export_files import ExportFolder
from payhooks.console.filters import register_filters
from payhooks.console.limits import DEFAULT_TIME_LIMIT_MS, MAX_TIME_LIMIT_MS
from payhooks.console.pages import IDENTIFIER_CONVERTER, blueprint
from payhooks.receiver.ledgers import LedgerPool
from payhooks.receiver.settings import ReceiverSettings, load_settings
from payhooks.receiver.state import STATE_KEY, receiver_state
from payhooks.receiver.web import ExternalIdentifierConverter
from payhooks.storage import MAX_POOL_SIZE, is_postgres_url

__all__ = ["CONSOLE_POOL", "DEFAULT_CONSOLE_POOL_SIZE", "EXPORTS_FOLDER", "Console"]

#: The exports' folder in the app's instance folder, unless ``Console(exports=...)`` names one.
EXPORTS_FOLDER = "payhooks-exports"
#: The name of the console's PostgreSQL pool (the receiver's is ``"receiver"``).
CONSOLE_POOL = "console"
#: The console's pool per process, unless ``Console(pool_size=...)`` says: a few people
#: paging need fewer connections than the service's notifications.
DEFAULT_CONSOLE_POOL_SIZE = 4


def _utc_now() -> datetime:
    return datetime.now(UTC)


#: An identifier a browser would take for a dot segment, with any tildes before it: escaped.
_DOTS = re.compile(r"~*\.\.?")
#: The same, escaped: a tilde more.
_ESCAPED_DOTS = re.compile(r"~+\.\.?")


class _IdentifierConverter(ExternalIdentifierConverter):
    """The receiver's identifier converter, but building URLs a browser sends as they are.

    Every ``/`` is quoted: an identifier such as ``a/../b`` stays one path segment, which a
    browser never resolves into another payment's page (routing decodes ``%2F`` back, so the
    rule still matches). A whole identifier ``.`` or ``..`` would still be a dot segment,
    which a browser removes before sending (``/payments/..`` goes to ``/``); ``%2E`` would not
    help, for the URL standard treats ``%2e`` as a dot too. So such an identifier, with any
    tildes before its dots, gets one tilde more in its URL (``.`` is ``~.``, ``..`` is
    ``~..``, ``~.`` is ``~~.``), and routing takes one off: every identifier round-trips, and
    no URL of one is a dot segment. Newlines are taken too, as every other character is.
    """

    regex = "(?s:.+?)"
    #: Set again: werkzeug infers "one path segment" from a regex of a subclass too.
    part_isolating = False

    def to_url(self, value: str) -> str:
        if _DOTS.fullmatch(value):
            value = "~" + value
        return quote(value, safe="")

    def to_python(self, value: str) -> str:
        return value[1:] if _ESCAPED_DOTS.fullmatch(value) else value


class Console:
    """The console's read-only pages, mounted under ``url_prefix`` behind ``authorize``.

    ::

        def console_role(request):
            return "operator" if session.get("staff") else None

        Console(app, authorize=console_role, url_prefix="/console")

    Mount :class:`~payhooks.receiver.PayHooks` on the app first: the pages read its ledger;
    or name the ledger with ``database``, and the app needs no receiver (``payhooks console``).

    :param authorize: called with the request on every console request; returns the
        :class:`~payhooks.console.ConsoleRole` (or its value, ``"viewer"`` or
        ``"operator"``) it grants, or None to refuse with a 403 page. A hook that raises, or
        returns anything else, refuses too.
    :param url_prefix: where the pages go: a path of its own, neither the receiver's
        ``PAYHOOKS_URL_PREFIX`` nor above or under it.
    :param clock: now, as an aware time: where the log's time presets count back from.
    :param database: the ledger the pages read, a SQLite file or a ``postgresql://`` URL,
        instead of the receiver's; each thread opens its own, on first use.
    :param read_only: with ``database``, open it read-only (a file made read-only, a role
        with only ``SELECT``; :class:`~payhooks.storage.Ledger`'s ``read_only``).
    :param busy_timeout_ms: with ``database``, how long a read waits for a connection.
    :param settings: the checked settings (:func:`~payhooks.receiver.load_settings`) whose
        scheme and keys a delivery's signature evidence is checked with, for a console that
        has no receiver's config to read them from (``payhooks console`` passes its
        environment's); None reads the app's config at each page. The finance page's days are
        those of their ``PAYHOOKS_TIMEZONE`` (without them, of the app's config, read once by
        :meth:`init_app`).
    :param exports: the folder the finance page's exports are written to, made (mode 0700)
        at the first one; by default ``payhooks-exports`` in the app's instance folder. Every
        worker process of the app must see the same folder: an export's page and download
        may be served by another process than the one writing it.
    :param time_limit_ms: how long one page's reads may take together (docs/console.md,
        "Limits"): past it a count stops and the page says so, or the page answers 503
        ``console_time_limit``; 1 to 3,600,000.
    :param pool_size: on PostgreSQL, the most connections the console's own pool opens per
        process. The console never borrows the receiver's: mounted beside it, it opens its
        own ledgers (and pool) on the same database, so pages never hold the connections a
        notification needs.
    :raises ValueError: naming ``authorize`` (missing or not callable), ``url_prefix``,
        ``time_limit_ms`` or ``pool_size``.
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        authorize: Authorize | None = None,
        url_prefix: str = "/console",
        clock: Callable[[], datetime] = _utc_now,
        database: str | os.PathLike[str] | None = None,
        read_only: bool = False,
        busy_timeout_ms: int = 5000,
        settings: ReceiverSettings | None = None,
        exports: str | os.PathLike[str] | None = None,
        time_limit_ms: int = DEFAULT_TIME_LIMIT_MS,
        pool_size: int = DEFAULT_CONSOLE_POOL_SIZE,
    ) -> None:
        self.authorize: Authorize = check_authorize(authorize)
        if isinstance(time_limit_ms, bool) or not isinstance(time_limit_ms, int):
            raise ValueError(f"Console: time_limit_ms must be an int; got {time_limit_ms!r}")
        if not 1 <= time_limit_ms <= MAX_TIME_LIMIT_MS:
            raise ValueError(
                f"Console: time_limit_ms must be from 1 to {MAX_TIME_LIMIT_MS}; got {time_limit_ms}"
            )
        if isinstance(pool_size, bool) or not isinstance(pool_size, int):
            raise ValueError(f"Console: pool_size must be an int; got {pool_size!r}")
        if not 1 <= pool_size <= MAX_POOL_SIZE:
            raise ValueError(
                f"Console: pool_size must be from 1 to {MAX_POOL_SIZE}; got {pool_size}"
            )
        self.time_limit_ms = time_limit_ms
        self.pool_size = pool_size
        if not isinstance(url_prefix, str) or not url_prefix.startswith("/") or url_prefix == "/":
            raise ValueError(
                f"Console: url_prefix must start with / and name a path; got {url_prefix!r}"
            )
        self.url_prefix = url_prefix.rstrip("/")
        self.clock = clock
        self.settings = settings
        self.exports = None if exports is None else Path(exports)
        self._ledgers: LedgerPool | None = None
        if database is not None:
            target = str(database) if is_postgres_url(database) else Path(database)
            self._ledgers = LedgerPool(
                target,
                busy_timeout_ms=busy_timeout_ms,
                read_only=read_only,
                pool_size=pool_size,
                pool_name=CONSOLE_POOL,
            )
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Mount the pages on ``app``, and the security headers on everything under the prefix.

        :raises RuntimeError: PayHooks is not initialised on ``app`` (and no ``database`` was
            named), or a console already is.
        :raises ValueError: the app's ``PAYHOOKS_*`` config cannot be used (without
            ``settings``), naming the key.
        """
        if self._ledgers is None and STATE_KEY not in app.extensions:
            raise RuntimeError(
                f"Console: PayHooks is not initialised on app {app.name!r}; mount PayHooks "
                "first, the console reads its ledger"
            )
        if ACCESS_KEY in app.extensions:
            raise RuntimeError(f"Console: a console is already mounted on app {app.name!r}")
        receiver = (app.config.get("PAYHOOKS_URL_PREFIX") or "").rstrip("/")
        if receiver and _overlap(self.url_prefix, receiver):
            raise ValueError(
                f"Console: url_prefix {self.url_prefix!r} overlaps the receiver's "
                f"PAYHOOKS_URL_PREFIX {receiver!r}; give the console a path of its own"
            )
        ledgers = self._ledgers if self._ledgers is not None else self._beside(app)
        exports = self.exports or Path(app.instance_path) / EXPORTS_FOLDER
        settings = self.settings or load_settings(app.config, require_keys=False)
        ledgers.timezone = settings.timezone  # before any page opens a ledger of the pool
        app.extensions[ACCESS_KEY] = ConsoleAccess(
            self.authorize,
            self.url_prefix,
            self.clock,
            ledgers,
            ExportFolder(exports),
            self.settings,
            time_limit_ms=self.time_limit_ms,
            timezone=settings.timezone,
        )
        app.url_map.converters[IDENTIFIER_CONVERTER] = _IdentifierConverter
        register_filters(app)
        app.register_blueprint(blueprint, url_prefix=self.url_prefix)
        app.after_request(_secure_console_responses)

    def _beside(self, app: Flask) -> LedgerPool:
        """The console's own ledgers on the receiver's database: its own connections (SQLite)
        or its own pool (PostgreSQL), never the ones the receiver stores notifications with;
        writable, for operators act through them."""
        receiver = receiver_state(app).ledgers
        return LedgerPool(
            receiver.path,
            busy_timeout_ms=receiver.busy_timeout_ms,
            synchronous=receiver.synchronous,
            pool_size=self.pool_size,
            pool_name=CONSOLE_POOL,
        )

    def __repr__(self) -> str:
        return f"<Console {self.url_prefix}>"


def _overlap(one: str, other: str) -> bool:
    """Whether one prefix is the other or lies under it."""
    return one == other or one.startswith(other + "/") or other.startswith(one + "/")


def _secure_console_responses(response: Response) -> Response:
    """Every answer under the prefix, the app's own 404 and 405 for paths the console has no
    rule for included."""
    return secure(response) if current_access().covers(request.path) else response
