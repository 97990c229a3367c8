"""What the ``payhooks`` commands share: where settings come from, opening the ledger, and
turning expected failures into one clear sentence and the right exit code.

Settings have one order everywhere: a command-line option, then the merchant's app (when the
command runs as ``flask payhooks ...`` in an app with :class:`payhooks.receiver.PayHooks`), then the
``PAYHOOKS_*`` environment variables, then the built-in defaults. So ``flask payhooks
reconcile`` reads the app's ``PAYHOOKS_DATABASE`` and ``payhooks reconcile`` the environment's,
and neither needs a secret on the command line, where it would land in the shell's history.

Exit codes (docs/cli.md): 0 success, 1 a failure the command reports
(:class:`click.ClickException`), 2 bad usage (:class:`click.UsageError`, click's own parameter
checks, and :class:`BadUsage` for a ledger file that does not exist or is not a ledger).
Expected errors never print a traceback.

Text from a webhook body is made safe for where a report puts it. An ``unexpected`` row's
identifier and every transaction id come from notification bodies: the signature says the
service sent them, not that they are harmless. Each output gets its own rule, and none changes
what a tool reading the report exactly gets back:

- CSV: :func:`csv_field`, the OWASP rule against formulas, lives in
  :mod:`payhooks.receiver.report_csv`, which the console's CSV export shares; it is
  re-exported here.
- A terminal obeys escape sequences, and a newline draws a row of its own in a table.
  :func:`terminal_text` shows every control character as a visible escape (``\\x1b``,
  ``\\n``), and a backslash as ``\\\\`` so that an escape on screen is never ambiguous.
- JSON (:func:`terminal_json`, for JSON Lines and documents alike) writes each character
  :func:`terminal_text` would escape as a JSON ``\\u`` escape: the document decodes to the
  exact values and shows inert on a terminal, and the characters JSON leaves raw that some line
  readers (Python's ``str.splitlines``, JavaScript before ES2019) treat as line breaks are
  escaped too, so one record stays on one line.

The last two are :mod:`payhooks.receiver.visible_text`'s rule under the command line's names:
the console's pages show the same text the same way.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TextIO, TypeVar

import click
from flask import Flask, current_app
from flask.cli import ScriptInfo

from payhooks.receiver.config import KEY_CONFIG, config_from_env
from payhooks.receiver.report_csv import FORMULA_TRIGGERS, csv_field
from payhooks.receiver.settings import ReceiverSettings, load_settings
from payhooks.receiver.visible_text import visible as terminal_text
from payhooks.receiver.visible_text import visible_json as terminal_json
from payhooks.storage import (
    Ledger,
    NotALedgerError,
    StorageError,
    is_postgres_url,
    redacted,
)
from payhooks.verify import DEFAULT_SCHEME, SCHEMES, Signer, Verifier, get_signer, get_verifier

__all__ = [
    "DEFAULT_DATABASE",
    "FORMULA_TRIGGERS",
    "SIGNING_KEY_ENV",
    "BadUsage",
    "csv_field",
    "database_option",
    "fail_on_storage_errors",
    "ledger_for",
    "resolve_database",
    "resolve_scheme",
    "scheme_option",
    "settings",
    "shown",
    "signer_for",
    "terminal_json",
    "terminal_text",
    "verifier_for",
    "written_whole",
]

#: Where the ledger commands look when neither ``--database``, the app nor the environment
#: names a file.
DEFAULT_DATABASE = "payhooks.db"

#: The environment variable ``sign`` and ``replay`` read the signing key from. For the HMAC
#: schemes the receiver's ``PAYHOOKS_SECRETS`` is the same key and is read next; the
#: public-key schemes sign with a private key the receiver never holds, hence its own name.
SIGNING_KEY_ENV = "PAYHOOKS_SIGNING_KEY"

# The options a *signer* accepts; PAYHOOKS_SIGNATURE_OPTIONS is the verifier's, which has a
# few more (check_timestamp, time_zone, providers) that mean nothing to a sender.
_SIGNER_OPTIONS = frozenset(
    {"hash_algorithm", "header_name", "encoding", "max_body_bytes", "max_depth", "max_members"}
)

_P = ParamSpec("_P")
_R = TypeVar("_R")


# -- settings ----------------------------------------------------------------------------------


def _flask_app(ctx: click.Context) -> Flask | None:
    """The merchant's app when running as ``flask payhooks ...``, with its context pushed."""
    if current_app:
        app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
        return app
    info = ctx.find_object(ScriptInfo)
    if info is None:
        return None  # the plain ``payhooks`` script: no app to look for
    app = info.load_app()
    ctx.with_resource(app.app_context())
    return app


def settings(ctx: click.Context | None = None) -> ReceiverSettings:
    """The checked ``PAYHOOKS_*`` settings for this invocation
    (:func:`~payhooks.receiver.settings.load_settings`): the app's config inside ``flask
    payhooks``, else the environment over the defaults. Keys are not required here (the ledger
    commands need none); the commands that sign or verify ask for them. Computed once per
    invocation.

    :raises BadUsage: a setting that cannot be read or used, in one sentence (exit 2).
    """
    ctx = ctx or click.get_current_context()
    root = ctx.find_root()
    cached: ReceiverSettings | None = root.meta.get("payhooks.settings")
    if cached is not None:
        return cached
    app = _flask_app(ctx)
    try:
        found: Mapping[str, Any]
        if app is not None and "payhooks" in app.extensions:
            found = app.config
        else:
            found = config_from_env(os.environ)
        loaded = load_settings(found, require_keys=False)
    except ValueError as err:
        raise BadUsage(f"The configuration cannot be used: {err}.") from err
    root.meta["payhooks.settings"] = loaded
    return loaded


# -- the ledger --------------------------------------------------------------------------------


class DatabaseTarget(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A ledger file's path, or a ``postgresql://`` URL kept as written (a path type would
    fold its ``//``)."""

    name = "PATH_OR_URL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Path) or is_postgres_url(value):
            return value
        return Path(value)


def database_option(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``--database PATH_OR_URL`` for the commands that read or write the ledger."""
    return click.option(
        "--database",
        type=DatabaseTarget(),
        default=None,
        help=(
            "The ledger: a SQLite file or a postgresql:// URL. Default: the app's "
            "PAYHOOKS_DATABASE under `flask payhooks`, "
            f"else $PAYHOOKS_DATABASE, else ./{DEFAULT_DATABASE}."
        ),
    )(function)


def resolve_database(database: Path | str | None) -> Path | str:
    """``--database``, else the app's or the environment's ``PAYHOOKS_DATABASE``, else
    ``./payhooks.db``; a ``postgresql://`` URL stays a string."""
    if database is not None:
        return database
    configured = settings().database
    if configured and is_postgres_url(configured):
        return configured
    return Path(configured) if configured else Path(DEFAULT_DATABASE)


def shown(target: Path | str) -> str:
    """How a message names the ledger: the path, or the URL without its password."""
    return redacted(os.fspath(target))


def fail_on_storage_errors(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """Report a ledger failure (locked, read-only, a conflict) as one sentence, exit 1."""

    @wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except StorageError as err:
            raise click.ClickException(err.message) from err

    return wrapper


class BadUsage(click.ClickException):
    """Bad usage that is not about the command line's shape (a ledger file that does not
    exist): exit 2 like click's own usage errors, but one sentence with no usage text."""

    exit_code = 2


def _check_exists(path: Path | str) -> None:
    if isinstance(path, Path) and not path.exists():
        raise BadUsage(f"There is no ledger at {path}: pass --database or set PAYHOOKS_DATABASE.")


def _busy_timeout_ms() -> int:
    return settings().busy_timeout_ms


@contextmanager
def ledger_for(
    database: Path | str | None, *, must_exist: bool = True, read_only: bool = False
) -> Iterator[Ledger]:
    """Open the ledger the options and settings name; closed on the way out.

    :param must_exist: open only an existing ledger: a missing file, or one that is not a
        payhooks ledger (another application's database, left untouched), is bad usage (exit 2)
        rather than a new empty ledger (a mistyped path should not report "nothing to
        reconcile"). Only the commands that create a ledger pass False.
    :param read_only: for the commands that only read: open it as ``payhooks console``'s
        viewer does (:class:`~payhooks.storage.Ledger`'s ``read_only``), so that a ledger in a
        folder this user may not write, where SQLite cannot make its ``-shm``, can be read,
        and nothing is written to it; a schema behind this payhooks is then an error naming
        ``payhooks migrate`` (exit 1), not a migration.
    """
    path = resolve_database(database)
    if must_exist:
        _check_exists(path)
    try:
        ledger = Ledger(
            path,
            busy_timeout_ms=_busy_timeout_ms(),
            create=not must_exist,
            read_only=read_only and must_exist,
        )
    except NotALedgerError as err:
        raise BadUsage(err.message) from err
    except StorageError as err:
        raise click.ClickException(
            f"Cannot open the ledger at {shown(path)}: {err.message}"
        ) from err
    with ledger:
        yield ledger


# -- signatures --------------------------------------------------------------------------------


def scheme_option(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``--scheme NAME``: one of the registered signature schemes."""
    return click.option(
        "--scheme",
        type=click.Choice(sorted(SCHEMES)),
        default=None,
        help=(
            "The signature scheme. Default: the app's or $PAYHOOKS_SIGNATURE_SCHEME, "
            f"else {DEFAULT_SCHEME}."
        ),
    )(function)


def resolve_scheme(scheme: str | None) -> str:
    """``--scheme``, else the configured ``PAYHOOKS_SIGNATURE_SCHEME``, else the default."""
    return scheme or settings().scheme


def _scheme_options(scheme: str) -> dict[str, Any]:
    """The configured verifier options, when they are for this scheme (``--scheme`` may name
    another one than the settings do)."""
    configured = settings()
    return dict(configured.signature_options) if configured.scheme == scheme else {}


def signer_for(scheme: str, secret: str | None) -> Signer:
    """A signer for ``scheme`` with ``--secret``, else ``$PAYHOOKS_SIGNING_KEY``, else (HMAC
    schemes) the first of the configured ``PAYHOOKS_SECRETS``.

    :raises click.UsageError: no key anywhere (exit 2).
    :raises click.ClickException: a key the scheme cannot use; the key is never echoed.
    """
    key = secret or os.environ.get(SIGNING_KEY_ENV)
    configured = settings()
    if (
        not key
        and SCHEMES[scheme].key_kind == "secret"
        and configured.key_config == KEY_CONFIG["secret"]
    ):
        key = configured.keys[0] if configured.keys else None
    if not key:
        where = (
            f"${SIGNING_KEY_ENV} or $PAYHOOKS_SECRETS"
            if SCHEMES[scheme].key_kind == "secret"
            else f"${SIGNING_KEY_ENV} (the private key; `payhooks keygen --scheme {scheme}`)"
        )
        raise click.UsageError(f"No signing key: pass --secret or set {where}.")
    options = {
        name: value for name, value in _scheme_options(scheme).items() if name in _SIGNER_OPTIONS
    }
    try:
        return get_signer(scheme, key, **options)
    except ValueError as err:
        raise _blame(err, f"The signing key cannot be used with {scheme}") from err


def verifier_for(
    scheme: str, secrets: tuple[str, ...], *, tolerance_seconds: float | None
) -> Verifier:
    """A verifier for ``scheme`` with the ``--secret`` keys, else the configured
    ``PAYHOOKS_SECRETS`` or ``PAYHOOKS_PUBLIC_KEYS`` (whichever the scheme takes).

    :raises click.UsageError: no key anywhere (exit 2).
    """
    configured = settings()
    key_config = KEY_CONFIG[SCHEMES[scheme].key_kind]
    keys = secrets or (configured.keys if configured.key_config == key_config else ())
    if not keys:
        raise click.UsageError(f"No key to verify with: pass --secret or set {key_config}.")
    try:
        return get_verifier(
            scheme, keys, tolerance_seconds=tolerance_seconds, **_scheme_options(scheme)
        )
    except ValueError as err:
        raise _blame(err, f"The key cannot be used with {scheme}") from err


def _blame(err: ValueError, key_fault: str) -> click.ClickException:
    """Name what is really at fault when building a signer or verifier fails: the key (the
    schemes' errors about keys start with ``key``/``keys[...]``), else the configured
    ``PAYHOOKS_SIGNATURE_OPTIONS``, as :func:`payhooks.receiver.settings.load_settings` does.
    Either is bad usage (exit 2): nothing was tried."""
    if str(err).startswith("key"):
        return BadUsage(f"{key_fault}: {err}.")
    return BadUsage(f"The configuration cannot be used: PAYHOOKS_SIGNATURE_OPTIONS: {err}.")


@contextmanager
def written_whole(path: Path) -> Iterator[TextIO]:
    """A file written whole or not at all: a temporary file beside ``path``, moved over it once
    complete, so Ctrl-C or a full disk never leaves a truncated report that looks whole.

    Only a regular file (or a new one) is replaced: a device, a pipe or a terminal
    (``/dev/stdout``, ``/dev/full``, a FIFO) is written in place, as replacing it would put a
    plain file where the device was. A symbolic link keeps pointing where it did: its target is
    what gets replaced."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        regular = True
    if not regular:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            yield handle
        return
    path = path.resolve()
    # The name is chosen before the file exists and the file is made inside the ``try``: a
    # Ctrl-C that lands just after the file was created (inside ``mkstemp``, or before a
    # ``try`` around its result) would otherwise leave the temporary file behind.
    temporary = path.parent / f".{path.name}.{secrets.token_hex(8)}"
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(descriptor, "w", encoding="utf-8", newline="") as handle:
            yield handle
        os.replace(temporary, path)
    except BaseException as err:
        if not (isinstance(err, FileExistsError) and err.filename == str(temporary)):
            temporary.unlink(missing_ok=True)  # never another's file of the same name
        raise
