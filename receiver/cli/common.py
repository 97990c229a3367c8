"""What the ``payhooks`` commands share: where settings come from, opening the ledger, the
values read from the command line, and turning expected failures into one clear sentence and
the right exit code.

Settings have one order everywhere: a command-line option, then the merchant's app (when the
command runs as ``flask payhooks ...`` in an app with :class:`payhooks.receiver.PayHooks`), then the
``PAYHOOKS_*`` environment variables, then the built-in defaults. So ``flask payhooks
reconcile`` reads the app's ``PAYHOOKS_DATABASE`` and ``payhooks reconcile`` the environment's,
and neither needs a secret on the command line, where it would land in the shell's history.

Exit codes (docs/cli.md): 0 success, 1 a failure the command reports
(:class:`click.ClickException`), 2 bad usage (:class:`click.UsageError`, click's own parameter
checks, and :class:`BadUsage` for a ledger file that does not exist or is not a ledger).
Expected errors never print a traceback.

Text from a webhook body is made safe for where it is written: :func:`csv_field` (the OWASP
rule against formulas, :mod:`payhooks.receiver.report_csv`), and :func:`terminal_text` and
:func:`terminal_json`, :mod:`payhooks.receiver.visible_text`'s rule under the command line's
names, so that the console's pages and the commands show the same text the same way.

Values (amounts in whole minor units, 1 or more, where a negative number is an amount, never an
unknown option; ISO 4217 codes; ISO 8601 times; durations, percentages and seconds) are each
refused in one sentence as bad usage (exit 2). ``nan`` and the infinities are never a number
here: Python's ``float`` reads them, and they pass every range check.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal, InvalidOperation
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click
from flask import Flask, current_app
from flask.cli import ScriptInfo

from payhooks.receiver.config import config_from_env
from payhooks.receiver.durations import parse_duration
from payhooks.receiver.report_csv import FORMULA_TRIGGERS, csv_field
from payhooks.receiver.settings import ReceiverSettings, load_settings
from payhooks.receiver.visible_text import visible as terminal_text
from payhooks.receiver.visible_text import visible_json as terminal_json
from payhooks.storage import (
    MAX_AMOUNT_MINOR,
    Ledger,
    NotALedgerError,
    StorageError,
    is_postgres_url,
    minor_unit_exponent,
    redacted,
)

__all__ = [
    "AMOUNT_RULE",
    "DEFAULT_DATABASE",
    "DURATION",
    "FORMULA_TRIGGERS",
    "PERCENT",
    "SIGNING_KEY_ENV",
    "BadUsage",
    "NegativeAmountsCommand",
    "Seconds",
    "amount_callback",
    "app_or_none",
    "check_window",
    "csv_field",
    "currency_callback",
    "database_option",
    "fail_on_storage_errors",
    "ledger_for",
    "local_moment_callback",
    "moment_callback",
    "resolve_database",
    "settings",
    "shown",
    "terminal_json",
    "terminal_text",
]

#: Where the ledger commands look when neither ``--database``, the app nor the environment
#: names a file.
DEFAULT_DATABASE = "payhooks.db"

#: The environment variable ``sign`` and ``replay`` read the signing key from. For the HMAC
#: schemes the receiver's ``PAYHOOKS_SECRETS`` is the same key and is read next; the
#: public-key schemes sign with a private key the receiver never holds, hence its own name.
SIGNING_KEY_ENV = "PAYHOOKS_SIGNING_KEY"

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


def app_or_none() -> Flask | None:
    """Inside a merchant's app with payhooks (``flask payhooks``), the app whose receivers get
    the signals; None for the plain ``payhooks`` script."""
    if not current_app or "payhooks" not in current_app.extensions:
        return None
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    return app


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


# -- values read from the command line -------------------------------------------------------

#: What an expected amount must be, said by every refusal of one.
AMOUNT_RULE = "amounts are 1 or more minor units"


def negative_amount_error(text: str) -> click.BadParameter:
    """The refusal of an amount written with a minus sign (``-5``, ``-0``)."""
    return click.BadParameter(f"{text} is negative: {AMOUNT_RULE}.")


class NegativeAmountsCommand(click.Command):
    """A command whose negative numbers are amounts, not options.

    click reads ``payhooks expect order-1 -5 CNY`` as an unknown option ``-5``; a person meant
    an amount, so a word that is a minus sign and digits, other than the value of an option
    that takes text, is refused as a negative amount.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        takes_text = {
            name
            for param in self.params
            if isinstance(param, click.Option)
            and not param.is_flag
            and param.name not in AMOUNT_OPTIONS
            for name in param.opts
        }
        previous = None
        for arg in args:
            if arg == "--":
                break
            if _NEGATIVE_NUMBER.fullmatch(arg) and previous not in takes_text:
                raise negative_amount_error(arg)
            previous = arg
        return super().parse_args(ctx, args)


#: The options of :class:`NegativeAmountsCommand` whose value is an amount.
AMOUNT_OPTIONS = frozenset({"plan_amount"})
_NEGATIVE_NUMBER = re.compile(r"-[0-9]+", re.ASCII)


def amount_callback(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """Refuse an amount that is not 1 or more minor units (a payment of nothing cannot be told
    from one not made), or over :data:`payhooks.storage.MAX_AMOUNT_MINOR`, which the ledger
    would refuse too (its sums must stay exact), as bad usage rather than a traceback."""
    if value is not None and value < 0:
        raise negative_amount_error(str(value))
    if value == 0:
        raise click.BadParameter(f"0 is no amount to expect: {AMOUNT_RULE}.")
    if value is not None and value > MAX_AMOUNT_MINOR:
        raise click.BadParameter(
            f"{value} is over the largest amount the ledger takes ({MAX_AMOUNT_MINOR} minor units)."
        )
    return value


def currency_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Check an ISO 4217 code with minor units, upper-cased (``cny`` is ``CNY``)."""
    if value is None:
        return None
    code = value.strip().upper()
    try:
        minor_unit_exponent(code)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 4217 currency code.") from None
    return code


def moment_callback(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> datetime | None:
    """Read an ISO 8601 date or time (one without an offset is UTC), returned in UTC as the
    ledger compares it: a UTC before year 1 or after 9999 (``0001-01-01T00:00:00+01:00``) is
    refused here, in one sentence, rather than overflowing later."""
    return _moment(value, UTC)


def local_moment_callback(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> datetime | None:
    """As :func:`moment_callback`, but a time without an offset is the merchant's
    (``PAYHOOKS_TIMEZONE``): ``2026-03-29`` is that day's midnight there. A time the clocks
    skip or show twice is read with the offset before the change."""
    return None if value is None else _moment(value, settings(ctx).timezone)


def _moment(value: str | None, zone: tzinfo) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO 8601 time (2024-05-01 or 2024-05-01T12:00:00+08:00)."
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise click.BadParameter(
            f"{value!r} is outside the times the ledger can compare (years 1 to 9999 in UTC)."
        ) from None


def check_window(
    start: datetime | None,
    end: datetime | None,
    taken: str,
    start_name: str = "--since",
    end_name: str = "--until",
) -> None:
    """Bad usage when a window of times ends where it starts, or before."""
    if start is not None and end is not None and end <= start:
        raise click.BadParameter(
            f"{end.isoformat()} is not after {start_name} {start.isoformat()}: {taken} "
            f"from {start_name} up to, not including, {end_name}.",
            param_hint=f"'{end_name}'",
        )


# click 8.3 made ParamType generic; subscripting it would fail on the 8.1 the project allows.
class Duration(click.ParamType):  # type: ignore[type-arg]
    """A DURATION option (``30s``, ``15m``, ``12h``, ``90d``), read by
    :func:`~payhooks.receiver.durations.parse_duration` into a ``timedelta``; anything else is
    bad usage (exit 2) in one sentence."""

    name = "DURATION"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            return parse_duration(str(value))
        except ValueError as err:
            self.fail(str(err), param, ctx)


#: The one instance the commands use: ``type=DURATION``.
DURATION = Duration()


class Percent(click.ParamType):  # type: ignore[type-arg]
    """A PERCENT option: a number from 0 to 100, read as a ``Decimal`` (never through a float);
    anything else (``nan``, ``inf``, ``101``) is bad usage (exit 2) in one sentence."""

    name = "PERCENT"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Decimal:
        if isinstance(value, Decimal) and value.is_finite() and 0 <= value <= 100:
            return value
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            number = Decimal("NaN")
        if not number.is_finite() or not 0 <= number <= 100:
            self.fail(f"{value!r} is not a percentage from 0 to 100 (such as 12.5).", param, ctx)
        return number


#: The one instance the commands use: ``type=PERCENT``.
PERCENT = Percent()


class Seconds(click.FloatRange):
    """A number of seconds above 0 and at most ``highest``; ``nan`` and the infinities, which
    :class:`click.FloatRange` lets through, are bad usage (exit 2) in one sentence."""

    name = "SECONDS"

    def __init__(self, highest: float) -> None:
        super().__init__(min=0, min_open=True, max=highest)

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        seconds: float = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a number of seconds.", param, ctx)
        return seconds
